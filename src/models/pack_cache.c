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

const uint8_t *tern_pack_cache_map(const char *path, uint64_t key, size_t bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    header h;
    struct stat st;
    const int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h && !memcmp(h.magic, "TERNPACK", 8) &&
                   h.version == TERN_PACK_CACHE_VERSION && h.header_bytes == HEADER_BYTES && h.key == key &&
                   h.bytes == bytes && !fstat(fd, &st) && (uint64_t)st.st_size == HEADER_BYTES + (uint64_t)bytes;
    uint8_t *base = ok ? mmap(NULL, HEADER_BYTES + bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (base == MAP_FAILED)
        return NULL;
    /* Large pages where the kernel can give them: the kernels stream these bytes at every step. */
    (void)madvise(base, HEADER_BYTES + bytes, MADV_HUGEPAGE);
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

uint8_t *tern_pack_cache_begin(const char *path, size_t bytes, tern_pack_cache_out *o) {
    memset(o, 0, sizeof *o);
    tern_err *e = tern_cache_begin_write(path, &o->tmp);
    if (!e && !(o->path = strdup(path)))
        e = tern_errf(TERN_ENOMEM, "out of memory");
    if (e) {
        TLOG_WARN("%s; the packed weights are not kept for the next start", tern_err_msg(e));
        tern_err_free(e);
        free(o->tmp);
        memset(o, 0, sizeof *o);
        return NULL;
    }
    o->bytes = bytes;
    int fd = open(o->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    /* The blocks are reserved now so that a full disk is an error here, not a SIGBUS while packing. */
    int err = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)(HEADER_BYTES + bytes));
    uint8_t *base = err ? MAP_FAILED : mmap(NULL, HEADER_BYTES + bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!err && base == MAP_FAILED)
        err = errno;
    if (fd >= 0)
        close(fd);
    if (err) {
        TLOG_WARN("%s: cannot make the packed-weights cache (%s); the packed weights are not kept for the next start",
                  o->tmp, strerror(err));
        unlink(o->tmp);
        free(o->tmp);
        free(o->path);
        memset(o, 0, sizeof *o);
        return NULL;
    }
    (void)madvise(base, HEADER_BYTES + bytes, MADV_HUGEPAGE);
    o->data = base + HEADER_BYTES;
    return o->data;
}

tern_err *tern_pack_cache_publish(tern_pack_cache_out *o, uint64_t key) {
    header h = {.magic = "TERNPACK", .version = TERN_PACK_CACHE_VERSION, .header_bytes = HEADER_BYTES, .key = key,
                .bytes = o->bytes, .checksum = tern_checksum(o->data, o->bytes, key)};
    uint8_t *base = o->data - HEADER_BYTES;
    memcpy(base, &h, sizeof h);
    (void)mprotect(base, HEADER_BYTES + o->bytes, PROT_READ); /* the packed weights are only read from now on */
    tern_err *e = NULL;
    if (rename(o->tmp, o->path)) {
        e = tern_errf(TERN_EIO, "%s: cannot write the packed-weights cache: %s", o->path, strerror(errno));
        unlink(o->tmp);
    } else {
        tern_mapped_files_add(base, HEADER_BYTES + o->bytes, o->path);
        tern_cache_prune(o->path, TERN_CACHE_MAX_AGE_DAYS);
    }
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return e;
}

void tern_pack_cache_abandon(tern_pack_cache_out *o) {
    if (!o->data)
        return;
    unlink(o->tmp);
    tern_pack_cache_unmap(o->data, o->bytes);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}
