/* st_sharded.c — sharded safetensors writing (see st_sharded.h). */
#include "formats/st_sharded.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"

struct tern_sharded_writer {
    char *dir;
    const char *format;
    tern_st_spec *specs;
    char **names;       /* owned copies of the spec names */
    uint64_t *bytes;    /* per tensor */
    int *shard;         /* per tensor */
    size_t n, next;     /* next: index of the first tensor not yet fully written */
    uint64_t left;      /* bytes still owed to tensor `next` */
    int nshards, open_shard;
    tern_st_writer *cur;
    uint64_t total;
};

static void shard_name(const tern_sharded_writer *w, int s, char *buf, size_t len) {
    if (w->nshards == 1)
        snprintf(buf, len, "model.safetensors");
    else
        snprintf(buf, len, "model-%05d-of-%05d.safetensors", s + 1, w->nshards);
}

static TERN_MUST_CHECK tern_err *open_shard(tern_sharded_writer *w, int s) {
    size_t first = 0, count = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->shard[i] == s) {
            if (!count)
                first = i;
            count++;
        }
    char file[64];
    shard_name(w, s, file, sizeof file);
    char *path = tern_path_join(w->dir, file);
    if (!path)
        return tern_errf(TERN_ENOMEM, "out of memory");
    const char *meta[] = {"format", w->format, NULL};
    tern_err *e = tern_st_writer_open(path, w->specs + first, count, meta, &w->cur);
    free(path);
    w->open_shard = s;
    return e;
}

static void sharded_free(tern_sharded_writer *w) {
    if (!w)
        return;
    for (size_t i = 0; w->names && i < w->n; i++)
        free(w->names[i]);
    free(w->names);
    free(w->specs);
    free(w->bytes);
    free(w->shard);
    free(w->dir);
    free(w);
}

tern_err *tern_sharded_open(const char *dir, const tern_st_spec *specs, size_t n, uint64_t shard_bytes,
                            const char *format, tern_sharded_writer **out) {
    *out = NULL;
    tern_sharded_writer *w = calloc(1, sizeof *w);
    if (!w)
        return tern_errf(TERN_ENOMEM, "out of memory");
    w->n = n;
    w->format = format;
    w->dir = strdup(dir);
    w->specs = malloc((n ? n : 1) * sizeof *w->specs);
    w->names = calloc(n ? n : 1, sizeof *w->names);
    w->bytes = malloc((n ? n : 1) * sizeof *w->bytes);
    w->shard = malloc((n ? n : 1) * sizeof *w->shard);
    if (!w->dir || !w->specs || !w->names || !w->bytes || !w->shard) {
        sharded_free(w);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    uint64_t limit = shard_bytes ? shard_bytes : (4ull << 30), in_shard = 0;
    int s = 0;
    for (size_t i = 0; i < n; i++) {
        w->specs[i] = specs[i];
        if (!(w->names[i] = strdup(specs[i].name))) {
            sharded_free(w);
            return tern_errf(TERN_ENOMEM, "out of memory");
        }
        w->specs[i].name = w->names[i];
        uint64_t b = tern_dtype_size(specs[i].dtype);
        for (int d = 0; d < specs[i].ndim; d++)
            b *= (uint64_t)specs[i].shape[d];
        w->bytes[i] = b;
        if (in_shard && in_shard + b > limit) {
            s++;
            in_shard = 0;
        }
        w->shard[i] = s;
        in_shard += b;
        w->total += b;
    }
    w->nshards = s + 1;
    w->left = n ? w->bytes[0] : 0;
    tern_err *e = tern_mkdir_p(dir);
    if (!e)
        e = open_shard(w, 0);
    if (e) {
        sharded_free(w);
        return e;
    }
    *out = w;
    return NULL;
}

/* Moves past completed (and empty) tensors, switching shard files at shard boundaries. */
static TERN_MUST_CHECK tern_err *advance(tern_sharded_writer *w) {
    while (w->next < w->n && w->left == 0) {
        w->next++;
        if (w->next == w->n)
            break;
        w->left = w->bytes[w->next];
        if (w->shard[w->next] != w->open_shard) {
            tern_st_writer *cur = w->cur;
            w->cur = NULL;
            TERN_TRY(tern_st_writer_close(cur));
            TERN_TRY(open_shard(w, w->shard[w->next]));
        }
    }
    return NULL;
}

tern_err *tern_sharded_write(tern_sharded_writer *w, const void *data, size_t len) {
    const unsigned char *p = data;
    while (len) {
        TERN_TRY(advance(w));
        if (w->next >= w->n)
            return tern_errf(TERN_EINVAL, "%s: more tensor bytes written than declared", w->dir);
        size_t take = len < w->left ? len : (size_t)w->left;
        TERN_TRY(tern_st_writer_write(w->cur, p, take));
        p += take;
        len -= take;
        w->left -= take;
    }
    return NULL;
}

tern_err *tern_sharded_close(tern_sharded_writer *w) {
    tern_err *e = advance(w);
    if (!e && w->next < w->n)
        e = tern_errf(TERN_EINVAL, "%s: tensor %s is missing %llu bytes", w->dir, w->names[w->next],
                      (unsigned long long)w->left);
    if (w->cur) {
        tern_err *ce = tern_st_writer_close(w->cur);
        if (!e)
            e = ce;
        else
            tern_err_free(ce);
    }
    if (!e && w->nshards > 1) {
        json_t *root = json_object(), *map = json_object();
        json_object_set_new(root, "metadata", json_pack("{s:I}", "total_size", (json_int_t)w->total));
        for (size_t i = 0; i < w->n; i++) {
            char file[64];
            shard_name(w, w->shard[i], file, sizeof file);
            json_object_set_new(map, w->names[i], json_string(file));
        }
        json_object_set_new(root, "weight_map", map);
        char *path = tern_path_join(w->dir, "model.safetensors.index.json");
        e = path ? tern_json_save_file(root, path) : tern_errf(TERN_ENOMEM, "out of memory");
        free(path);
        json_decref(root);
    }
    sharded_free(w);
    return e;
}
