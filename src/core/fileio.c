/* fileio.c — whole-file reads, memory maps, paths. */
#include "core/fileio.h"
#include "core/mapped_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

tern_err *tern_mmap_open(const char *path, tern_mmap *out) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tern_errf(errno == ENOENT ? TERN_ENOTFOUND : TERN_EIO, "%s: cannot open: %s", path,
                         strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tern_errf(TERN_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tern_errf(TERN_EIO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return tern_errf(TERN_EIO, "%s: cannot mmap: %s", path, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    tern_mapped_files_add(p, out->size, path);
    return NULL;
}

void tern_mmap_release(const void *p, size_t len) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), b = ((uintptr_t)p + page - 1) / page * page;
    const uintptr_t e = ((uintptr_t)p + len) / page * page;
    if (e > b)
        (void)madvise((void *)b, e - b, MADV_DONTNEED); /* advice: if refused, the pages just stay */
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels refuse it with EINVAL */
#endif

void tern_mmap_prefault(const void *p, size_t len) {
    if (!p || !len)
        return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), b = (uintptr_t)p / page * page;
    const uintptr_t e = ((uintptr_t)p + len + page - 1) / page * page;
    if (e > b && madvise((void *)b, e - b, MADV_POPULATE_READ) != 0)
        (void)madvise((void *)b, e - b, MADV_WILLNEED); /* at least read ahead into the page cache */
}

void tern_mmap_close(tern_mmap *m) {
    if (m->data) {
        tern_mapped_files_remove(m->data);
        munmap((void *)m->data, m->size);
    }
    m->data = NULL;
    m->size = 0;
}

tern_err *tern_read_file(const char *path, size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_errf(errno == ENOENT ? TERN_ENOTFOUND : TERN_EIO, "%s: cannot open: %s", path,
                         strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap > max_bytes) {
                free(buf);
                fclose(f);
                return tern_errf(TERN_EFORMAT, "%s: larger than the %zu-byte limit", path, max_bytes);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int ioerr = ferror(f);
    fclose(f);
    if (!buf)
        return tern_errf(TERN_ENOMEM, "%s: out of memory reading file", path);
    if (ioerr) {
        free(buf);
        return tern_errf(TERN_EIO, "%s: read error", path);
    }
    if (n > max_bytes) {
        free(buf);
        return tern_errf(TERN_EFORMAT, "%s: larger than the %zu-byte limit", path, max_bytes);
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return NULL;
}

tern_err *tern_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return tern_errf(TERN_EIO, "%s: cannot create: %s", path, strerror(errno));
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    int bad = (w != len) | (fclose(f) != 0);
    if (bad)
        return tern_errf(TERN_EIO, "%s: write failed: %s", path, strerror(errno));
    return NULL;
}

char *tern_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    while (a > 1 && dir[a - 1] == '/')
        a--;
    char *p = malloc(a + 1 + b + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

int tern_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int tern_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

tern_err *tern_mkdir_p(const char *path) {
    char *p = strdup(path);
    if (!p)
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c == '/' || c == 0) {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                tern_err *e = tern_errf(TERN_EIO, "%s: cannot create directory: %s", p, strerror(errno));
                free(p);
                return e;
            }
            *s = c;
            if (!c)
                break;
        }
    }
    free(p);
    if (!tern_is_dir(path))
        return tern_errf(TERN_EIO, "%s: exists and is not a directory", path);
    return NULL;
}

tern_err *tern_dir_files(const char *dir, void (*fn)(void *ctx, const char *name, const char *path), void *ctx) {
    DIR *d = opendir(dir);
    if (!d)
        return tern_errf(TERN_EIO, "%s: %s", dir, strerror(errno));
    tern_err *err = NULL;
    for (struct dirent *e; !err && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char *p = tern_path_join(dir, e->d_name);
        if (!p)
            err = tern_errf(TERN_ENOMEM, "out of memory");
        else if (tern_is_file(p))
            fn(ctx, e->d_name, p);
        free(p);
    }
    closedir(d);
    return err;
}
