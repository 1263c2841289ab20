/* pack_cache.c — the packed-weights cache file (see pack_cache.h).
 *
 * Layout: a 4096-byte header (magic, version, key, byte count, checksum of the data), then the arena's bytes,
 * so the data starts page-aligned. */
#include "models/pack_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/hash.h"

#define HEADER_BYTES 4096
#define CHUNK ((size_t)8 << 20)

typedef struct header {
    char magic[8]; /* "TERNPACK" */
    uint32_t version;
    uint32_t header_bytes;
    uint64_t key, bytes, checksum;
} header;

static char *cache_dir(void) {
    const char *d = getenv("TERN_CACHE_DIR");
    if (d)
        return *d && strcmp(d, "off") ? strdup(d) : NULL;
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[4096];
    if (x && *x)
        snprintf(buf, sizeof buf, "%s/tern", x);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.cache/tern", home);
    else
        return NULL;
    return strdup(buf);
}

/* A hash of a file's first 64 KiB (0 when it cannot be read). */
static uint64_t head_hash(const char *path) {
    const size_t cap = 64 << 10;
    uint8_t *buf = malloc(cap);
    int fd = buf ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t n = fd >= 0 ? read(fd, buf, cap) : -1;
    if (fd >= 0)
        close(fd);
    const uint64_t h = n > 0 ? tern_hash64(buf, (size_t)n, 4) : 0;
    free(buf);
    return h;
}

/* Adds a checkpoint file's identity to *ctx (a uint64_t key). The files are added, not chained: directory order
 * varies. With the size and time goes the file's head — a safetensors header, its tensors' names, dtypes and
 * offsets — so a file copied over with its time kept is still told apart. */
static void add_file_key(void *ctx, const char *name, const char *path) {
    const size_t n = strlen(name);
    const int weights = n > 12 && !strcmp(name + n - 12, ".safetensors");
    struct stat st;
    if ((!weights && strcmp(name, "config.json") && strcmp(name, "model.safetensors.index.json")) || stat(path, &st))
        return;
    const uint64_t f[4] = {(uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec,
                           head_hash(path)};
    *(uint64_t *)ctx += tern_hash64(f, sizeof f, tern_hash64(name, n, 2));
}

char *tern_pack_cache_path(const char *model_dir, int threads, uint64_t *source_key) {
    *source_key = 0;
    char *dir = cache_dir(), real[4096];
    if (!dir || !realpath(model_dir, real)) {
        free(dir);
        return NULL;
    }
    /* The checkpoint as it is now: every weight and config file's name, size, modification time and head. */
    uint64_t key = tern_hash64(real, strlen(real), 1);
    tern_err_free(tern_dir_files(real, add_file_key, &key));
    *source_key = key;
    char name[64];
    snprintf(name, sizeof name, "%016llx-t%d.pack", (unsigned long long)tern_hash64(real, strlen(real), 3), threads);
    char *path = tern_path_join(dir, name);
    free(dir);
    return path;
}

static int read_full(int fd, uint8_t *p, size_t n) {
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        p += r;
        n -= (size_t)r;
    }
    return 1;
}

int tern_pack_cache_read(const char *path, uint64_t key, uint8_t *arena, size_t bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    header h;
    struct stat st;
    int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h && !memcmp(h.magic, "TERNPACK", 8) &&
             h.version == TERN_PACK_CACHE_VERSION && h.header_bytes == HEADER_BYTES && h.key == key &&
             h.bytes == bytes && !fstat(fd, &st) && (uint64_t)st.st_size == HEADER_BYTES + (uint64_t)bytes &&
             lseek(fd, HEADER_BYTES, SEEK_SET) == HEADER_BYTES;
    posix_fadvise(fd, HEADER_BYTES, (off_t)bytes, POSIX_FADV_SEQUENTIAL);
    tern_hasher s;
    tern_hasher_init(&s, key);
    for (size_t off = 0; ok && off < bytes; off += CHUNK) { /* chunks of a multiple of 32: the hash's stride */
        const size_t n = bytes - off < CHUNK ? bytes - off : CHUNK;
        ok = read_full(fd, arena + off, n);
        if (ok)
            tern_hasher_feed(&s, arena + off, n);
    }
    close(fd);
    return ok && tern_hasher_done(&s) == h.checksum;
}

tern_err *tern_pack_cache_write(const char *path, uint64_t key, const uint8_t *arena, size_t bytes) {
    char *slash = strrchr(path, '/');
    if (slash) {
        char *dir = strndup(path, (size_t)(slash - path));
        tern_err *e = dir ? tern_mkdir_p(dir) : tern_errf(TERN_ENOMEM, "out of memory");
        free(dir);
        TERN_TRY(e);
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return tern_errf(TERN_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    header h = {.magic = "TERNPACK", .version = TERN_PACK_CACHE_VERSION, .header_bytes = HEADER_BYTES, .key = key,
                .bytes = bytes, .checksum = tern_hash64(arena, bytes, key)};
    uint8_t head[HEADER_BYTES] = {0};
    memcpy(head, &h, sizeof h);
    int ok = write(fd, head, sizeof head) == (ssize_t)sizeof head;
    for (size_t off = 0; ok && off < bytes;) {
        ssize_t n = write(fd, arena + off, bytes - off < CHUNK ? bytes - off : CHUNK);
        ok = n > 0;
        off += ok ? (size_t)n : 0;
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        tern_err *e = tern_errf(TERN_EIO, "%s: cannot write the packed-weights cache: %s", path, strerror(errno));
        unlink(tmp);
        return e;
    }
    return NULL;
}
