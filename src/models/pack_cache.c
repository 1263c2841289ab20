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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cache_dir.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/mapped_files.h"
#include "tensor/checksum.h"

#define HEADER_BYTES 4096

typedef struct header {
    char magic[8]; /* "TERNPACK" */
    uint32_t version;
    uint32_t header_bytes;
    uint64_t key, bytes, checksum;
} header;

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

typedef struct source_key {
    uint64_t key;
    int unreadable; /* a file that counts could not be looked at: the key would not tell its changes */
} source_key;

/* Adds a checkpoint file's identity to the key. The files are added, not chained: directory order varies. With the
 * size and time goes the file's head — a safetensors header, its tensors' names, dtypes and offsets — so a file
 * copied over with its time kept is still told apart. */
static void add_file_key(void *ctx, const char *name, const char *path) {
    source_key *k = ctx;
    const size_t n = strlen(name);
    const int weights = (n > 12 && !strcmp(name + n - 12, ".safetensors")) || (n > 5 && !strcmp(name + n - 5, ".gguf"));
    struct stat st;
    if (!weights && strcmp(name, "config.json") && strcmp(name, "model.safetensors.index.json"))
        return;
    if (stat(path, &st)) {
        k->unreadable = 1;
        return;
    }
    const uint64_t f[4] = {(uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec,
                           head_hash(path)};
    k->key += tern_hash64(f, sizeof f, tern_hash64(name, n, 2));
}

uint64_t tern_model_source_key(const char *model_path) {
    char real[4096];
    if (!realpath(model_path, real))
        return 0;
    /* The checkpoint as it is now: every weight and config file's name, size, modification time and head (the
     * one file, when the model is a GGUF file). */
    source_key k = {.key = tern_hash64(real, strlen(real), 1)};
    struct stat st;
    if (!stat(real, &st) && S_ISREG(st.st_mode)) {
        const char *base = strrchr(real, '/');
        add_file_key(&k, base ? base + 1 : real, real);
    } else {
        tern_err *err = tern_dir_files(real, add_file_key, &k);
        if (err) { /* a key without the files would match the checkpoint after they changed */
            TLOG_WARN("cannot list the model's files (%s): no cache is keyed to them", tern_err_msg(err));
            tern_err_free(err);
            return 0;
        }
    }
    if (k.unreadable) {
        TLOG_WARN("%s: a weight or config file cannot be looked at: no cache is keyed to the model's files", real);
        return 0;
    }
    return k.key ? k.key : 1;
}

char *tern_pack_cache_path(const char *model_path, int threads, uint64_t *source_key) {
    *source_key = 0;
    char *dir = tern_cache_dir(), real[4096];
    if (!dir || !realpath(model_path, real)) {
        free(dir);
        return NULL;
    }
    if (!(*source_key = tern_model_source_key(real))) {
        free(dir);
        return NULL; /* nothing to key the cache by: packed weights are made afresh (and not kept) */
    }
    char name[64];
    snprintf(name, sizeof name, "%016llx-t%d.pack", (unsigned long long)tern_hash64(real, strlen(real), 3), threads);
    char *path = tern_path_join(dir, name);
    free(dir);
    return path;
}

/* Writes all of [q, q + n) at file offset `at` (large writes: the page cache keeps them in large folios, which a
 * later start's mapping can use as 2 MiB pages); 0, or -1 with errno set. */
static int write_all(int fd, const uint8_t *q, size_t n, off_t at) {
    while (n) {
        const ssize_t r = pwrite(fd, q, n < ((size_t)1 << 30) ? n : (size_t)1 << 30, at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (!r)
                errno = EIO;
            return -1;
        }
        q += r;
        n -= (size_t)r;
        at += r;
    }
    return 0;
}

const uint8_t *tern_pack_cache_map(const char *path, uint64_t key, size_t bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    header h;
    struct stat st;
    const int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h && !memcmp(h.magic, "TERNPACK", 8) &&
                   h.version == TERN_PACK_CACHE_VERSION && h.header_bytes == HEADER_BYTES && h.key == key &&
                   h.bytes == bytes && !fstat(fd, &st) && (uint64_t)st.st_size == HEADER_BYTES + (uint64_t)bytes;
    uint8_t *base = ok ? mmap(NULL, HEADER_BYTES + bytes, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (base == MAP_FAILED)
        return NULL;
    /* Large pages where the kernel can give them — asked for before the pages are read in, so that a file read
     * from disk now comes into 2 MiB folios the mapping can use whole (the kernels stream these bytes at every
     * step); a file already cached in small folios keeps them. */
    (void)madvise(base, HEADER_BYTES + bytes, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_READ
    (void)madvise(base, HEADER_BYTES + bytes, MADV_POPULATE_READ); /* advice: the checksum faults them in anyway */
#endif
    if (tern_checksum(base + HEADER_BYTES, bytes, key) != h.checksum) {
        munmap(base, HEADER_BYTES + bytes);
        return NULL;
    }
    tern_cache_used(path);
    tern_mapped_files_add(base, HEADER_BYTES + bytes, path);
    return base + HEADER_BYTES;
}

void tern_pack_cache_unmap(const uint8_t *data, size_t bytes) {
    if (data) {
        tern_mapped_files_remove(data - HEADER_BYTES);
        munmap((void *)(data - HEADER_BYTES), HEADER_BYTES + bytes);
    }
}

tern_err *tern_pack_cache_save(const char *path, const uint8_t *data, size_t bytes, uint64_t key) {
    char *tmp = NULL;
    tern_err *begun = tern_cache_begin_write(path, &tmp);
    if (begun) {
        tern_err *e = tern_errf(TERN_EIO, "%s; the packed weights are not kept for the next start",
                                tern_err_msg(begun));
        tern_err_free(begun);
        free(tmp);
        return e;
    }
    header h = {.magic = "TERNPACK", .version = TERN_PACK_CACHE_VERSION, .header_bytes = HEADER_BYTES, .key = key,
                .bytes = bytes, .checksum = tern_checksum(data, bytes, key)};
    uint8_t head[HEADER_BYTES] = {0};
    memcpy(head, &h, sizeof h);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = fd < 0 || write_all(fd, head, HEADER_BYTES, 0) || write_all(fd, data, bytes, HEADER_BYTES)
                  ? errno
                  : 0;
    if (fd >= 0 && close(fd) && !err)
        err = errno;
    if (!err && rename(tmp, path))
        err = errno;
    tern_err *e = NULL;
    if (err) {
        e = tern_errf(TERN_EIO, "%s: cannot write the packed-weights cache (%s); the packed weights are not kept for "
                      "the next start", path, strerror(err));
        unlink(tmp);
    } else {
        tern_cache_prune(path, TERN_CACHE_MAX_AGE_DAYS);
    }
    free(tmp);
    return e;
}
