/* safetensors.c — safetensors reading (mmap + full header validation), model directories
 * (single file or index-sharded), and the streaming writer.
 *
 * Trust model: the header is untrusted. Every tensor entry is checked against the bytes
 * actually present (offsets inside the data region, size == numel * element size, no two
 * tensors sharing bytes) before the file is handed out, so code downstream may read
 * tensor->data[0 .. nbytes) without further checks. */
#include "formats/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"

struct tern_safetensors {
    char *path;             /* path or `what`; tensors' `file` points here */
    tern_mmap map;          /* zeroed when parsed from caller memory */
    tern_tensor *tensors;   /* header order */
    size_t n;
    const tern_tensor **by_name; /* sorted by name for binary search */
    char **meta;            /* 2 * n_meta strings: key, value, key, value... */
    size_t n_meta;
    uint64_t data_start;    /* file offset of the data region (8 + header length) */
};

/* ==== helpers ==================================================================== */

static int cmp_tensor_name(const void *a, const void *b) {
    const tern_tensor *x = *(const tern_tensor *const *)a, *y = *(const tern_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* Orders by data offset so that neighbours are the only candidates for overlap. */
static int cmp_tensor_offset(const void *a, const void *b) {
    const tern_tensor *x = *(const tern_tensor *const *)a, *y = *(const tern_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Binary search in a name-sorted array of tensor pointers. */
static const tern_tensor *find_sorted(const tern_tensor *const *sorted, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid]->name, name);
        if (c == 0)
            return sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Writes "[4, 4]" for a shape into buf (always NUL-terminated). */
static const char *format_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t at = 0;
    at += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

/* Reads a JSON integer >= 0; 0 on success. jansson integers are 64-bit signed, so no real is accepted. */
static int json_nonneg(const json_t *v, int64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

/* ==== one file: parsing ========================================================== */

/* Fills *t from one header entry; errors are relative to the tensor (the caller adds its name). */
static TERN_MUST_CHECK tern_err *parse_entry(const json_t *entry, const unsigned char *region, uint64_t region_size,
                             uint64_t region_file_offset, tern_tensor *t) {
    if (!json_is_object(entry))
        return tern_errf(TERN_EFORMAT, "entry must be an object with \"dtype\", \"shape\" and \"data_offsets\"");

    const json_t *jd = json_object_get(entry, "dtype");
    if (!jd)
        return tern_errf(TERN_EFORMAT, "missing \"dtype\"");
    if (!json_is_string(jd))
        return tern_errf(TERN_EFORMAT, "\"dtype\" must be a string such as \"F32\"");
    t->dtype = tern_dtype_parse(json_string_value(jd));
    if (t->dtype == TERN_DT_INVALID)
        return tern_errf(TERN_EUNSUPPORTED, "unknown dtype \"%.40s\"", json_string_value(jd));
    size_t esize = tern_dtype_size(t->dtype);

    const json_t *js = json_object_get(entry, "shape");
    if (!js)
        return tern_errf(TERN_EFORMAT, "missing \"shape\"");
    if (!json_is_array(js))
        return tern_errf(TERN_EFORMAT, "\"shape\" must be an array of non-negative integers");
    size_t nd = json_array_size(js);
    if (nd > TERN_MAX_DIMS)
        return tern_errf(TERN_EUNSUPPORTED, "shape has %zu dimensions, more than the %d supported", nd,
                         TERN_MAX_DIMS);
    t->ndim = (int)nd;
    int64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        const json_t *jv = json_array_get(js, i);
        int64_t d;
        if (!json_is_integer(jv))
            return tern_errf(TERN_EFORMAT, "shape dimension %zu must be an integer", i);
        if (json_nonneg(jv, &d) != 0)
            return tern_errf(TERN_EFORMAT, "shape dimension %zu is %lld, must be >= 0", i,
                             (long long)json_integer_value(jv));
        t->shape[i] = d;
        /* Overflow is judged after the loop: a later 0 makes the product 0, but the shape is
         * still nonsense if any partial product left the int64 range, so reject it anyway. */
        if (d != 0 && numel > INT64_MAX / d)
            overflow = 1;
        else
            numel *= d;
    }
    char shp[TERN_MAX_DIMS * 24 + 4];
    format_shape(shp, sizeof shp, t->ndim, t->shape);
    if (overflow || (uint64_t)numel > (uint64_t)INT64_MAX / esize || (uint64_t)numel > SIZE_MAX / esize)
        return tern_errf(TERN_EFORMAT, "dtype %s x shape %s overflows the addressable size",
                         tern_dtype_name(t->dtype), shp);
    t->numel = numel;
    t->nbytes = (size_t)numel * esize;

    const json_t *jo = json_object_get(entry, "data_offsets");
    if (!jo)
        return tern_errf(TERN_EFORMAT, "missing \"data_offsets\"");
    int64_t begin, end;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || json_nonneg(json_array_get(jo, 0), &begin) != 0 ||
        json_nonneg(json_array_get(jo, 1), &end) != 0)
        return tern_errf(TERN_EFORMAT, "\"data_offsets\" must be [begin, end] with non-negative integers");
    if (begin > end)
        return tern_errf(TERN_EFORMAT, "data_offsets [%lld, %lld) have begin > end", (long long)begin,
                         (long long)end);
    if ((uint64_t)end > region_size)
        return tern_errf(TERN_EFORMAT, "data_offsets [%lld, %lld) extend beyond the data region of %llu bytes",
                         (long long)begin, (long long)end, (unsigned long long)region_size);
    if ((uint64_t)(end - begin) != (uint64_t)t->nbytes)
        return tern_errf(TERN_EFORMAT, "data_offsets [%lld, %lld) do not match dtype %s x shape %s = %zu bytes",
                         (long long)begin, (long long)end, tern_dtype_name(t->dtype), shp, t->nbytes);
    t->data = region + begin;
    t->offset = region_file_offset + (uint64_t)begin;
    /* The mapping is page-aligned, so this only fails when the writer packed tensors unaligned. */
    t->aligned = ((uintptr_t)t->data % esize) == 0;
    return NULL;
}

static TERN_MUST_CHECK tern_err *parse_metadata(tern_safetensors *f, const json_t *m) {
    if (!json_is_object(m))
        return tern_errf(TERN_EFORMAT, "\"__metadata__\" must be an object of string values");
    size_t n = json_object_size(m);
    f->meta = calloc(2 * n + 1, sizeof *f->meta);
    if (!f->meta)
        return tern_errf(TERN_ENOMEM, "out of memory");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)m, key, val) {
        if (!json_is_string(val))
            return tern_errf(TERN_EFORMAT, "\"__metadata__\" key \"%s\" must have a string value", key);
        char *k = strdup(key), *v = strdup(json_string_value(val));
        f->meta[2 * f->n_meta] = k;
        f->meta[2 * f->n_meta + 1] = v;
        f->n_meta++;
        if (!k || !v)
            return tern_errf(TERN_ENOMEM, "out of memory");
    }
    return NULL;
}

/* Rejects tensors that share bytes: after sorting by offset only neighbours can overlap,
 * comparing each with the furthest end seen so far. Zero-sized tensors occupy nothing. */
static TERN_MUST_CHECK tern_err *check_overlaps(tern_safetensors *f) {
    if (f->n < 2)
        return NULL;
    const tern_tensor **order = malloc(f->n * sizeof *order);
    if (!order)
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; i < f->n; i++)
        order[i] = &f->tensors[i];
    qsort(order, f->n, sizeof *order, cmp_tensor_offset);
    const tern_tensor *furthest = NULL;
    tern_err *e = NULL;
    for (size_t i = 0; i < f->n && !e; i++) {
        const tern_tensor *t = order[i];
        if (t->nbytes == 0)
            continue;
        if (furthest && t->offset < furthest->offset + furthest->nbytes) {
            uint64_t a = furthest->offset - f->data_start, b = t->offset - f->data_start;
            e = tern_errf(TERN_EFORMAT, "tensors %s [%llu, %llu) and %s [%llu, %llu) overlap", furthest->name,
                          (unsigned long long)a, (unsigned long long)(a + furthest->nbytes), t->name,
                          (unsigned long long)b, (unsigned long long)(b + t->nbytes));
        }
        if (!furthest || t->offset + t->nbytes > furthest->offset + furthest->nbytes)
            furthest = t;
    }
    free(order);
    return e;
}

/* Validates the image data[0..size) into f; errors are relative to the file. */
static TERN_MUST_CHECK tern_err *parse_image(tern_safetensors *f, const unsigned char *data, size_t size) {
    if (size < 8)
        return tern_errf(TERN_EFORMAT, "file is %zu bytes, shorter than the 8-byte header length", size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | data[i];
    if (hlen > TERN_ST_MAX_HEADER)
        return tern_errf(TERN_EFORMAT, "header length %llu exceeds the %u-byte limit", (unsigned long long)hlen,
                         TERN_ST_MAX_HEADER);
    if (hlen > size - 8)
        return tern_errf(TERN_EFORMAT, "header length %llu exceeds the %zu bytes after the length field",
                         (unsigned long long)hlen, size - 8);

    /* Writers pad the header to 8 bytes with spaces; tolerate NUL padding too. */
    const char *hdr = (const char *)data + 8;
    size_t hn = (size_t)hlen;
    while (hn && (hdr[hn - 1] == ' ' || hdr[hn - 1] == '\0' || hdr[hn - 1] == '\n' || hdr[hn - 1] == '\t' ||
                  hdr[hn - 1] == '\r'))
        hn--;
    /* Not tern_json_load_buf: it allows \u0000 in strings, which would silently cut names short. */
    json_error_t je;
    json_t *root = json_loadb(hdr, hn, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tern_errf(TERN_EFORMAT, "header is not valid JSON (line %d, column %d): %s", je.line, je.column,
                         je.text);
    tern_err *e = NULL;
    if (!json_is_object(root)) {
        e = tern_errf(TERN_EFORMAT, "header is not a JSON object");
        goto done;
    }

    f->data_start = 8 + hlen;
    const unsigned char *region = data + 8 + hlen;
    uint64_t region_size = (uint64_t)size - 8 - hlen;
    size_t cap = json_object_size(root);
    f->tensors = calloc(cap ? cap : 1, sizeof *f->tensors);
    if (!f->tensors) {
        e = tern_errf(TERN_ENOMEM, "out of memory");
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((e = parse_metadata(f, val)))
                goto done;
            continue;
        }
        tern_tensor *t = &f->tensors[f->n];
        t->file = f->path;
        if ((e = parse_entry(val, region, region_size, 8 + hlen, t))) {
            e = tern_err_wrap(e, "tensor %s", key);
            goto done;
        }
        if (!(t->name = strdup(key))) {
            e = tern_errf(TERN_ENOMEM, "out of memory");
            goto done;
        }
        f->n++;
    }
    if ((e = check_overlaps(f)))
        goto done;

    f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    if (!f->by_name) {
        e = tern_errf(TERN_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < f->n; i++)
        f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, f->n, sizeof *f->by_name, cmp_tensor_name);
    /* jansson already rejected duplicate keys; this guards the binary search's precondition. */
    for (size_t i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            e = tern_errf(TERN_EFORMAT, "tensor %s appears twice", f->by_name[i]->name);
            goto done;
        }
done:
    json_decref(root);
    return e;
}

static TERN_MUST_CHECK tern_err *safetensors_new(const char *what, tern_safetensors **out) {
    *out = NULL;
    tern_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(what ? what : "<memory>"))) {
        free(f);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    *out = f;
    return NULL;
}

tern_err *tern_safetensors_parse(const void *data, size_t size, const char *what, tern_safetensors **out) {
    tern_safetensors *f;
    TERN_TRY(safetensors_new(what, &f));
    tern_err *e = parse_image(f, data, size);
    if (e) {
        e = tern_err_wrap(e, "%s", f->path);
        tern_safetensors_close(f);
        return e;
    }
    *out = f;
    return NULL;
}

tern_err *tern_safetensors_open(const char *path, tern_safetensors **out) {
    tern_safetensors *f;
    TERN_TRY(safetensors_new(path, &f));
    tern_err *e = tern_mmap_open(path, &f->map);
    if (!e && (e = parse_image(f, f->map.data, f->map.size)))
        e = tern_err_wrap(e, "%s", f->path);
    if (e) {
        tern_safetensors_close(f);
        return e;
    }
    *out = f;
    return NULL;
}

size_t tern_safetensors_count(const tern_safetensors *f) { return f->n; }

const tern_tensor *tern_safetensors_at(const tern_safetensors *f, size_t i) {
    return i < f->n ? &f->tensors[i] : NULL;
}

const tern_tensor *tern_safetensors_find(const tern_safetensors *f, const char *name) {
    return find_sorted(f->by_name, f->n, name);
}

const char *tern_safetensors_metadata(const tern_safetensors *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0)
            return f->meta[2 * i + 1];
    return NULL;
}

size_t tern_safetensors_metadata_count(const tern_safetensors *f) { return f->n_meta; }

int tern_safetensors_metadata_at(const tern_safetensors *f, size_t i, const char **key, const char **value) {
    if (i >= f->n_meta)
        return -1;
    *key = f->meta[2 * i];
    *value = f->meta[2 * i + 1];
    return 0;
}

const char *tern_safetensors_path(const tern_safetensors *f) { return f->path; }

void tern_safetensors_close(tern_safetensors *f) {
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        free((char *)f->tensors[i].name);
    free(f->tensors);
    free(f->by_name);
    if (f->meta)
        for (size_t i = 0; i < 2 * f->n_meta; i++)
            free(f->meta[i]);
    free(f->meta);
    tern_mmap_close(&f->map);
    free(f->path);
    free(f);
}

/* ==== model directory ============================================================= */

struct tern_checkpoint {
    tern_safetensors **files;
    size_t n_files;
    const tern_tensor **sorted; /* every tensor of every file, by name */
    size_t n;
    tern_tensor *own;           /* tern_checkpoint_of_tensors: the tensors, and what holds their bytes */
    void (*release)(void *);
    void *holder;
};

#define INDEX_NAME "model.safetensors.index.json"

/* Builds the merged name-sorted view; a name in two files is an error naming both. */
static TERN_MUST_CHECK tern_err *checkpoint_merge(tern_checkpoint *c) {
    size_t total = 0;
    for (size_t i = 0; i < c->n_files; i++)
        total += tern_safetensors_count(c->files[i]);
    c->sorted = malloc((total ? total : 1) * sizeof *c->sorted);
    if (!c->sorted)
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->n_files; i++)
        for (size_t j = 0; j < tern_safetensors_count(c->files[i]); j++)
            c->sorted[c->n++] = tern_safetensors_at(c->files[i], j);
    qsort(c->sorted, c->n, sizeof *c->sorted, cmp_tensor_name);
    for (size_t i = 1; i < c->n; i++)
        if (strcmp(c->sorted[i - 1]->name, c->sorted[i]->name) == 0)
            return tern_errf(TERN_EFORMAT, "tensor %s is stored in two shards: %s and %s", c->sorted[i]->name,
                             c->sorted[i - 1]->file, c->sorted[i]->file);
    return NULL;
}

static TERN_MUST_CHECK tern_err *checkpoint_add_file(tern_checkpoint *c, const char *path) {
    tern_safetensors *f;
    TERN_TRY(tern_safetensors_open(path, &f));
    c->files[c->n_files++] = f;
    return NULL;
}

/* A shard name must stay inside the model directory: a plain file name, no path. */
static int shard_name_ok(const char *s) {
    return *s && strchr(s, '/') == NULL && strchr(s, '\\') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static TERN_MUST_CHECK tern_err *checkpoint_open_sharded(tern_checkpoint *c, const char *dir, const char *index_path) {
    json_t *root;
    TERN_TRY(tern_json_load_file(index_path, TERN_ST_MAX_HEADER, &root));
    tern_err *e = NULL;
    const char **shards = NULL;
    char *path = NULL;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(root)) {
        e = tern_errf(TERN_EFORMAT, "%s: not a JSON object", index_path);
        goto done;
    }
    if (!json_is_object(wm)) {
        e = tern_errf(TERN_EFORMAT, "%s: missing \"weight_map\" object (tensor name -> shard file)", index_path);
        goto done;
    }
    size_t n = json_object_size(wm);
    if (n == 0) {
        e = tern_errf(TERN_EFORMAT, "%s: \"weight_map\" lists no tensors", index_path);
        goto done;
    }

    /* Validate every entry and collect the distinct shard names (sorted for lookup). */
    shards = malloc(n * sizeof *shards);
    if (!shards) {
        e = tern_errf(TERN_ENOMEM, "out of memory");
        goto done;
    }
    size_t ns = 0;
    const char *tname;
    json_t *jshard;
    json_object_foreach(wm, tname, jshard) {
        if (!json_is_string(jshard)) {
            e = tern_errf(TERN_EFORMAT, "%s: weight_map: tensor %s: shard must be a file name string", index_path,
                          tname);
            goto done;
        }
        const char *s = json_string_value(jshard);
        if (!shard_name_ok(s)) {
            e = tern_errf(TERN_EFORMAT, "%s: weight_map: tensor %s: shard path \"%s\" escapes the model directory",
                          index_path, tname, s);
            goto done;
        }
        shards[ns++] = s;
    }
    qsort(shards, ns, sizeof *shards, cmp_str);
    size_t uniq = 0;
    for (size_t i = 0; i < ns; i++)
        if (uniq == 0 || strcmp(shards[uniq - 1], shards[i]) != 0)
            shards[uniq++] = shards[i];
    ns = uniq;

    c->files = calloc(ns, sizeof *c->files);
    if (!c->files) {
        e = tern_errf(TERN_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        free(path);
        if (!(path = tern_path_join(dir, shards[i]))) {
            e = tern_errf(TERN_ENOMEM, "out of memory");
            goto done;
        }
        if (!tern_is_file(path)) {
            e = tern_errf(TERN_ENOTFOUND, "%s: shard file %s is missing", index_path, path);
            goto done;
        }
        if ((e = checkpoint_add_file(c, path)))
            goto done;
    }

    /* Each tensor must be where the index says it is. */
    json_object_foreach(wm, tname, jshard) {
        const char *s = json_string_value(jshard);
        const char **hit = bsearch(&s, shards, ns, sizeof *shards, cmp_str);
        tern_safetensors *f = c->files[hit - shards];
        if (!tern_safetensors_find(f, tname)) {
            e = tern_errf(TERN_ENOTFOUND, "%s: tensor %s is listed in shard %s, but %s does not contain it",
                          index_path, tname, s, tern_safetensors_path(f));
            goto done;
        }
    }
    e = checkpoint_merge(c);
done:
    free(path);
    free(shards);
    json_decref(root);
    return e;
}

static int has_st_suffix(const char *name) {
    size_t n = strlen(name), k = strlen(".safetensors");
    return n > k && strcmp(name + n - k, ".safetensors") == 0;
}

/* No index and no model.safetensors: accept exactly one *.safetensors file in the directory. */
static TERN_MUST_CHECK tern_err *find_single_file(const char *dir, char **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return tern_errf(errno == ENOENT ? TERN_ENOTFOUND : TERN_EIO, "%s: cannot open directory: %s", dir,
                         strerror(errno));
    char *first = NULL;
    size_t count = 0;
    char others[512] = "";
    struct dirent *de;
    tern_err *e = NULL;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !has_st_suffix(de->d_name))
            continue;
        char *p = tern_path_join(dir, de->d_name);
        if (!p) {
            e = tern_errf(TERN_ENOMEM, "out of memory");
            break;
        }
        if (!tern_is_file(p)) {
            free(p);
            continue;
        }
        size_t at = strlen(others);
        snprintf(others + at, sizeof others - at, "%s%s", count ? ", " : "", de->d_name);
        if (count++ == 0)
            first = p;
        else
            free(p);
    }
    closedir(d);
    if (!e && count == 0)
        e = tern_errf(TERN_ENOTFOUND, "%s: no " INDEX_NAME ", model.safetensors or other *.safetensors file", dir);
    if (!e && count > 1)
        e = tern_errf(TERN_EFORMAT,
                      "%s: several .safetensors files (%s) and no " INDEX_NAME " to say which form the model", dir,
                      others);
    if (e) {
        free(first);
        return e;
    }
    *out = first;
    return NULL;
}

tern_err *tern_checkpoint_open(const char *dir, tern_checkpoint **out) {
    *out = NULL;
    if (!tern_is_dir(dir))
        return tern_errf(TERN_ENOTFOUND, "%s: not a directory", dir);
    tern_checkpoint *c = calloc(1, sizeof *c);
    char *index_path = tern_path_join(dir, INDEX_NAME), *single = tern_path_join(dir, "model.safetensors");
    tern_err *e = NULL;
    if (!c || !index_path || !single) {
        e = tern_errf(TERN_ENOMEM, "out of memory");
    } else if (tern_is_file(index_path)) {
        e = checkpoint_open_sharded(c, dir, index_path);
    } else {
        if (!tern_is_file(single)) {
            free(single);
            e = find_single_file(dir, &single);
        }
        if (!e && !(c->files = calloc(1, sizeof *c->files)))
            e = tern_errf(TERN_ENOMEM, "out of memory");
        if (!e)
            e = checkpoint_add_file(c, single);
        if (!e)
            e = checkpoint_merge(c);
    }
    free(index_path);
    free(single);
    if (e) {
        tern_checkpoint_close(c);
        return e;
    }
    *out = c;
    return NULL;
}

size_t tern_checkpoint_count(const tern_checkpoint *c) { return c->n; }

const tern_tensor *tern_checkpoint_at(const tern_checkpoint *c, size_t i) { return i < c->n ? c->sorted[i] : NULL; }

const tern_tensor *tern_checkpoint_find(const tern_checkpoint *c, const char *name) {
    return find_sorted(c->sorted, c->n, name);
}

const char *tern_checkpoint_metadata(const tern_checkpoint *c, const char *key) {
    for (size_t i = 0; i < c->n_files; i++) {
        const char *v = tern_safetensors_metadata(c->files[i], key);
        if (v)
            return v;
    }
    return NULL;
}

size_t tern_checkpoint_file_count(const tern_checkpoint *c) { return c->n_files; }

const tern_safetensors *tern_checkpoint_file(const tern_checkpoint *c, size_t i) {
    return i < c->n_files ? c->files[i] : NULL;
}

tern_err *tern_checkpoint_of_tensors(tern_tensor *tensors, size_t n, void (*release)(void *), void *holder,
                                     tern_checkpoint **out) {
    *out = NULL;
    tern_checkpoint *c = calloc(1, sizeof *c);
    if (!c || !(c->sorted = malloc((n ? n : 1) * sizeof *c->sorted))) {
        free(c);
        free(tensors);
        if (release)
            release(holder);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    c->own = tensors;
    c->release = release;
    c->holder = holder;
    for (size_t i = 0; i < n; i++)
        c->sorted[c->n++] = &tensors[i];
    qsort(c->sorted, c->n, sizeof *c->sorted, cmp_tensor_name);
    for (size_t i = 1; i < c->n; i++)
        if (strcmp(c->sorted[i - 1]->name, c->sorted[i]->name) == 0) {
            tern_err *e = tern_errf(TERN_EFORMAT, "tensor %s is stored twice", c->sorted[i]->name);
            tern_checkpoint_close(c);
            return e;
        }
    *out = c;
    return NULL;
}

void tern_checkpoint_close(tern_checkpoint *c) {
    if (!c)
        return;
    if (c->release)
        c->release(c->holder);
    free(c->own);
    for (size_t i = 0; i < c->n_files; i++)
        tern_safetensors_close(c->files[i]);
    free(c->files);
    free(c->sorted);
    free(c);
}

/* ==== streaming writer ============================================================ */

struct tern_st_writer {
    char *path, *tmp_path; /* data goes to tmp_path, renamed to path on a complete close */
    FILE *fp;
    uint64_t total, written;
    int failed;            /* a write error happened; close removes the partial file */
    size_t n;
    char **names;          /* to name the incomplete tensor in close's error */
    uint64_t *ends;        /* end offset of each tensor in the data region */
};

static void writer_free(tern_st_writer *w) {
    if (!w)
        return;
    if (w->names)
        for (size_t i = 0; i < w->n; i++)
            free(w->names[i]);
    free(w->names);
    free(w->ends);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

/* Builds the header JSON exactly as the Python library lays it out: compact, __metadata__
 * first, then each tensor as {"dtype", "shape", "data_offsets"} in the order given. */
static TERN_MUST_CHECK tern_err *writer_header(const tern_st_spec *specs, size_t n, const char *const *kv, const uint64_t *ends,
                               char **out) {
    *out = NULL;
    json_t *root = json_object();
    tern_err *e = NULL;
    if (!root)
        return tern_errf(TERN_ENOMEM, "out of memory");
    if (kv) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m) != 0) {
            e = tern_errf(TERN_ENOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; kv[i]; i += 2) {
            if (!kv[i + 1]) {
                e = tern_errf(TERN_EINVAL, "metadata key \"%s\" has no value", kv[i]);
                goto done;
            }
            if (json_object_get(m, kv[i])) {
                e = tern_errf(TERN_EINVAL, "metadata key \"%s\" given twice", kv[i]);
                goto done;
            }
            json_t *v = json_string(kv[i + 1]);
            if (!v || json_object_set_new(m, kv[i], v) != 0) {
                e = tern_errf(TERN_EINVAL, "metadata key \"%s\": key and value must be valid UTF-8", kv[i]);
                goto done;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        const tern_st_spec *s = &specs[i];
        json_t *t = json_object(), *shape = json_array(), *offs = json_array();
        int bad = !t || !shape || !offs;
        bad |= t && json_object_set_new(t, "dtype", json_string(tern_dtype_name(s->dtype))) != 0;
        for (int d = 0; d < s->ndim && !bad; d++)
            bad |= json_array_append_new(shape, json_integer(s->shape[d])) != 0;
        bad |= !bad && json_array_append_new(offs, json_integer((json_int_t)(i ? ends[i - 1] : 0))) != 0;
        bad |= !bad && json_array_append_new(offs, json_integer((json_int_t)ends[i])) != 0;
        bad |= !bad && json_object_set(t, "shape", shape) != 0;
        bad |= !bad && json_object_set(t, "data_offsets", offs) != 0;
        json_decref(shape);
        json_decref(offs);
        if (bad) {
            json_decref(t);
            e = tern_errf(TERN_ENOMEM, "out of memory");
            goto done;
        }
        if (json_object_set_new(root, s->name, t) != 0) {
            e = tern_errf(TERN_EINVAL, "tensor name \"%s\" is not valid UTF-8", s->name);
            goto done;
        }
    }
    if (!(*out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        e = tern_errf(TERN_ENOMEM, "out of memory");
done:
    json_decref(root);
    return e;
}

/* Checks the specs and computes each tensor's end offset. */
static TERN_MUST_CHECK tern_err *writer_plan(const tern_st_spec *specs, size_t n, uint64_t *ends) {
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const tern_st_spec *s = &specs[i];
        if (!s->name)
            return tern_errf(TERN_EINVAL, "tensor %zu has no name", i);
        if (strcmp(s->name, "__metadata__") == 0)
            return tern_errf(TERN_EINVAL, "tensor %zu: \"__metadata__\" is reserved", i);
        size_t esize = tern_dtype_size(s->dtype);
        if (esize == 0)
            return tern_errf(TERN_EINVAL, "tensor %s: invalid dtype %d", s->name, (int)s->dtype);
        if (s->ndim < 0 || s->ndim > TERN_MAX_DIMS)
            return tern_errf(TERN_EINVAL, "tensor %s: ndim %d is outside [0, %d]", s->name, s->ndim,
                             TERN_MAX_DIMS);
        uint64_t bytes = esize;
        for (int d = 0; d < s->ndim; d++) {
            if (s->shape[d] < 0)
                return tern_errf(TERN_EINVAL, "tensor %s: shape dimension %d is %lld, must be >= 0", s->name, d,
                                 (long long)s->shape[d]);
            uint64_t dim = (uint64_t)s->shape[d];
            if (dim && bytes > (uint64_t)INT64_MAX / dim)
                return tern_errf(TERN_EINVAL, "tensor %s: size overflows", s->name);
            bytes *= dim;
        }
        if (bytes > (uint64_t)INT64_MAX - at)
            return tern_errf(TERN_EINVAL, "tensor %s: total size overflows", s->name);
        at += bytes;
        ends[i] = at;
    }
    /* Names must be unique; sort a copy of the pointers to find repeats. */
    if (n > 1) {
        const char **names = malloc(n * sizeof *names);
        if (!names)
            return tern_errf(TERN_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            names[i] = specs[i].name;
        qsort(names, n, sizeof *names, cmp_str);
        tern_err *e = NULL;
        for (size_t i = 1; i < n && !e; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                e = tern_errf(TERN_EINVAL, "tensor name %s is given twice", names[i]);
        free(names);
        if (e)
            return e;
    }
    return NULL;
}

tern_err *tern_st_writer_open(const char *path, const tern_st_spec *specs, size_t n, const char *const *metadata_kv,
                              tern_st_writer **out) {
    *out = NULL;
    tern_st_writer *w = calloc(1, sizeof *w);
    char *header = NULL;
    tern_err *e = NULL;
    if (!w || !(w->path = strdup(path)) || !(w->tmp_path = malloc(strlen(path) + 9)) ||
        !(w->ends = calloc(n ? n : 1, sizeof *w->ends)) || !(w->names = calloc(n ? n : 1, sizeof *w->names))) {
        e = tern_errf(TERN_ENOMEM, "out of memory");
        goto fail;
    }
    sprintf(w->tmp_path, "%s.partial", path);
    if ((e = writer_plan(specs, n, w->ends)) || (e = writer_header(specs, n, metadata_kv, w->ends, &header)))
        goto fail;
    for (size_t i = 0; i < n; i++, w->n++)
        if (!(w->names[i] = strdup(specs[i].name))) {
            e = tern_errf(TERN_ENOMEM, "out of memory");
            goto fail;
        }
    w->total = n ? w->ends[n - 1] : 0;

    /* Pad with spaces so the data region starts 8-aligned, as the reference writer does. */
    size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7;
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    if (!(w->fp = fopen(w->tmp_path, "wb"))) {
        e = tern_errf(TERN_EIO, "%s: cannot create: %s", w->tmp_path, strerror(errno));
        goto fail;
    }
    int bad = fwrite(lenbuf, 1, 8, w->fp) != 8 || fwrite(header, 1, hlen, w->fp) != hlen;
    for (size_t i = hlen; i < padded && !bad; i++)
        bad = fputc(' ', w->fp) == EOF;
    if (bad) {
        e = tern_errf(TERN_EIO, "%s: write failed: %s", w->tmp_path, strerror(errno));
        goto fail;
    }
    free(header);
    *out = w;
    return NULL;
fail:
    free(header);
    if (w && w->fp) {
        fclose(w->fp);
        remove(w->tmp_path);
    }
    writer_free(w);
    return tern_err_wrap(e, "%s", path);
}

tern_err *tern_st_writer_write(tern_st_writer *w, const void *data, size_t len) {
    if (w->failed)
        return tern_errf(TERN_EINVAL, "%s: an earlier write failed", w->path);
    if ((uint64_t)len > w->total - w->written) {
        w->failed = 1;
        return tern_errf(TERN_EINVAL, "%s: writing %zu more bytes would exceed the %llu declared (%llu written)",
                         w->path, len, (unsigned long long)w->total, (unsigned long long)w->written);
    }
    if (len && fwrite(data, 1, len, w->fp) != len) {
        w->failed = 1;
        return tern_errf(TERN_EIO, "%s: write failed: %s", w->tmp_path, strerror(errno));
    }
    w->written += len;
    return NULL;
}

tern_err *tern_st_writer_close(tern_st_writer *w) {
    if (!w)
        return NULL;
    tern_err *e = NULL;
    int close_bad = fclose(w->fp) != 0;
    if (w->failed) {
        e = tern_errf(TERN_EINVAL, "%s: not written: an earlier write failed", w->path);
    } else if (w->written < w->total) {
        size_t i = 0;
        while (i + 1 < w->n && w->ends[i] <= w->written)
            i++;
        e = tern_errf(TERN_EINVAL, "%s: only %llu of the %llu declared bytes were written (tensor %s is incomplete)",
                      w->path, (unsigned long long)w->written, (unsigned long long)w->total, w->names[i]);
    } else if (close_bad) {
        e = tern_errf(TERN_EIO, "%s: write failed: %s", w->tmp_path, strerror(errno));
    } else if (rename(w->tmp_path, w->path) != 0) {
        e = tern_errf(TERN_EIO, "%s: cannot rename %s into place: %s", w->path, w->tmp_path, strerror(errno));
    }
    if (e)
        remove(w->tmp_path);
    writer_free(w);
    return e;
}
