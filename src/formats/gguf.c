/* gguf.c — GGUF v2/v3 reader: one validating walk over header, key/values and tensor infos at open,
 * then O(1) accessors. Every read of file bytes goes through the bounds-checked cursor below, and every
 * count is checked against the bytes left before anything is allocated for it, so a hostile file can
 * neither read out of bounds nor make us allocate more than a small multiple of its own size. */
#include "formats/gguf.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

/* ------------------------------------------------------------------------------------------------ */
/* Types                                                                                            */

typedef struct gguf_kv {
    char *key;
    uint32_t type;
    size_t value_off;   /* offset of the value bytes (for arrays: of the element type field) */
    /* arrays only */
    uint32_t elem_type;
    uint64_t count;
    size_t elems_off;   /* offset of element 0 */
    uint64_t *offsets;  /* string/array elements: offset of element i relative to elems_off */
} gguf_kv;

struct tern_gguf {
    tern_mmap map;      /* owned mapping (tern_gguf_open) or zeroed (tern_gguf_parse) */
    const unsigned char *base;
    size_t size;
    char *name;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_off;  /* start of the data section; may equal size (no tensor data) */
    size_t n_kv;
    gguf_kv *kvs;
    size_t *kv_hash;    /* open addressing; slot holds index + 1, 0 = empty */
    size_t kv_hash_cap;
    size_t n_tensors;
    tern_gguf_tensor *tensors;
    size_t *tensor_hash;
    size_t tensor_hash_cap;
};

/* Bounds-checked little-endian cursor over the file bytes. */
typedef struct cursor {
    const unsigned char *base;
    size_t size;
    size_t pos;
} cursor;

static size_t left(const cursor *c) { return c->size - c->pos; }

static uint32_t load_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_u64(const unsigned char *p) { return (uint64_t)load_u32(p) | (uint64_t)load_u32(p + 4) << 32; }

static int read_u32(cursor *c, uint32_t *v) {
    if (left(c) < 4)
        return -1;
    *v = load_u32(c->base + c->pos);
    c->pos += 4;
    return 0;
}

static int read_u64(cursor *c, uint64_t *v) {
    if (left(c) < 8)
        return -1;
    *v = load_u64(c->base + c->pos);
    c->pos += 8;
    return 0;
}

/* Size in bytes of a fixed-size value type; 0 for string, array and unknown types. */
static size_t scalar_size(uint32_t t) {
    switch (t) {
    case TERN_GGUF_U8: case TERN_GGUF_I8: case TERN_GGUF_BOOL: return 1;
    case TERN_GGUF_U16: case TERN_GGUF_I16: return 2;
    case TERN_GGUF_U32: case TERN_GGUF_I32: case TERN_GGUF_F32: return 4;
    case TERN_GGUF_U64: case TERN_GGUF_I64: case TERN_GGUF_F64: return 8;
    default: return 0;
    }
}

const char *tern_gguf_type_name(tern_gguf_type t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < TERN_GGUF_TYPE_COUNT ? names[t] : "unknown";
}

/* ------------------------------------------------------------------------------------------------ */
/* ggml type sizes                                                                                  */

typedef struct ggml_type_info {
    const char *name;
    uint32_t block_elems;
    uint32_t block_bytes;
} ggml_type_info;

/* Indexed by ggml type id; entries with a NULL name are retired or unknown ids. Block sizes are those of
 * ggml's block structs (scales as f16 unless noted). */
static const ggml_type_info ggml_types[] = {
    [TERN_GGML_F32] = {"f32", 1, 4},
    [TERN_GGML_F16] = {"f16", 1, 2},
    [TERN_GGML_Q4_0] = {"q4_0", 32, 2 + 16},
    [TERN_GGML_Q4_1] = {"q4_1", 32, 2 + 2 + 16},
    [TERN_GGML_Q5_0] = {"q5_0", 32, 2 + 4 + 16},
    [TERN_GGML_Q5_1] = {"q5_1", 32, 2 + 2 + 4 + 16},
    [TERN_GGML_Q8_0] = {"q8_0", 32, 2 + 32},
    [TERN_GGML_Q8_1] = {"q8_1", 32, 2 + 2 + 32},
    [TERN_GGML_Q2_K] = {"q2_K", 256, 16 + 64 + 2 + 2},
    [TERN_GGML_Q3_K] = {"q3_K", 256, 32 + 64 + 12 + 2},
    [TERN_GGML_Q4_K] = {"q4_K", 256, 2 + 2 + 12 + 128},
    [TERN_GGML_Q5_K] = {"q5_K", 256, 2 + 2 + 12 + 32 + 128},
    [TERN_GGML_Q6_K] = {"q6_K", 256, 128 + 64 + 16 + 2},
    [TERN_GGML_Q8_K] = {"q8_K", 256, 4 + 256 + 32}, /* f32 scale, int16 bsums[16] */
    [TERN_GGML_IQ2_XXS] = {"iq2_xxs", 256, 2 + 64},
    [TERN_GGML_IQ2_XS] = {"iq2_xs", 256, 2 + 64 + 8},
    [TERN_GGML_IQ3_XXS] = {"iq3_xxs", 256, 2 + 96},
    [TERN_GGML_IQ1_S] = {"iq1_s", 256, 2 + 32 + 16},
    [TERN_GGML_IQ4_NL] = {"iq4_nl", 32, 2 + 16},
    [TERN_GGML_IQ3_S] = {"iq3_s", 256, 2 + 64 + 32 + 8 + 4},
    [TERN_GGML_IQ2_S] = {"iq2_s", 256, 2 + 64 + 8 + 8},
    [TERN_GGML_IQ4_XS] = {"iq4_xs", 256, 2 + 2 + 4 + 128},
    [TERN_GGML_I8] = {"i8", 1, 1},
    [TERN_GGML_I16] = {"i16", 1, 2},
    [TERN_GGML_I32] = {"i32", 1, 4},
    [TERN_GGML_I64] = {"i64", 1, 8},
    [TERN_GGML_F64] = {"f64", 1, 8},
    [TERN_GGML_IQ1_M] = {"iq1_m", 256, 32 + 16 + 8},
    [TERN_GGML_BF16] = {"bf16", 1, 2},
    [TERN_GGML_TQ1_0] = {"tq1_0", 256, 48 + 4 + 2},
    [TERN_GGML_TQ2_0] = {"tq2_0", 256, 64 + 2},
    [TERN_GGML_MXFP4] = {"mxfp4", 32, 1 + 16}, /* e8m0 shared exponent */
};

int tern_ggml_type_block(uint32_t ggml_type, uint32_t *block_elems, uint32_t *block_bytes) {
    if (ggml_type >= sizeof ggml_types / sizeof ggml_types[0] || !ggml_types[ggml_type].name)
        return 0;
    if (block_elems)
        *block_elems = ggml_types[ggml_type].block_elems;
    if (block_bytes)
        *block_bytes = ggml_types[ggml_type].block_bytes;
    return 1;
}

const char *tern_ggml_type_name(uint32_t ggml_type) {
    if (ggml_type >= sizeof ggml_types / sizeof ggml_types[0] || !ggml_types[ggml_type].name)
        return "unknown";
    return ggml_types[ggml_type].name;
}

tern_err *tern_ggml_nbytes(uint32_t ggml_type, uint64_t row, uint64_t n_elems, uint64_t *out) {
    uint32_t be, bb;
    if (!tern_ggml_type_block(ggml_type, &be, &bb))
        return tern_errf(TERN_EUNSUPPORTED, "ggml type %" PRIu32 " is unknown to this build", ggml_type);
    if (row % be != 0)
        return tern_errf(TERN_EFORMAT, "row length %" PRIu64 " is not a multiple of the %s block length %" PRIu32,
                         row, ggml_types[ggml_type].name, be);
    if (n_elems % be != 0) /* implied by the row check when row > 0; guards row == 0 */
        return tern_errf(TERN_EFORMAT, "%" PRIu64 " elements are not a whole number of %s blocks", n_elems,
                         ggml_types[ggml_type].name);
    uint64_t blocks = n_elems / be;
    if (blocks > UINT64_MAX / bb)
        return tern_errf(TERN_EFORMAT, "%" PRIu64 " %s elements overflow a 64-bit byte size", n_elems,
                         ggml_types[ggml_type].name);
    *out = blocks * bb;
    return NULL;
}

/* ------------------------------------------------------------------------------------------------ */
/* Hash tables over NUL-terminated names (keys, tensor names)                                       */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t hash_cap_for(size_t n) {
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    return cap;
}

/* Inserts index `idx` for `name`; returns the index already holding an equal name, or -1 after inserting. */
static long hash_insert(size_t *slots, size_t cap, const char *name, size_t idx, const char *(*name_of)(const void *, size_t),
                        const void *owner) {
    size_t at = (size_t)hash_name(name) & (cap - 1);
    while (slots[at]) {
        size_t other = slots[at] - 1;
        if (!strcmp(name_of(owner, other), name))
            return (long)other;
        at = (at + 1) & (cap - 1);
    }
    slots[at] = idx + 1;
    return -1;
}

static long hash_find(const size_t *slots, size_t cap, const char *name, const char *(*name_of)(const void *, size_t),
                      const void *owner) {
    if (!slots)
        return -1;
    size_t at = (size_t)hash_name(name) & (cap - 1);
    while (slots[at]) {
        size_t idx = slots[at] - 1;
        if (!strcmp(name_of(owner, idx), name))
            return (long)idx;
        at = (at + 1) & (cap - 1);
    }
    return -1;
}

static const char *kv_name_of(const void *owner, size_t i) { return ((const tern_gguf *)owner)->kvs[i].key; }
static const char *tensor_name_of(const void *owner, size_t i) { return ((const tern_gguf *)owner)->tensors[i].name; }

/* ------------------------------------------------------------------------------------------------ */
/* Validating walk                                                                                  */

/* Reads a length-prefixed string; `what` names it in errors ("key", "tensor name", ...). */
static TERN_MUST_CHECK tern_err *read_string(cursor *c, const char *what, tern_gguf_str *out) {
    size_t at = c->pos;
    uint64_t len;
    if (read_u64(c, &len))
        return tern_errf(TERN_EFORMAT, "%s at offset %zu: truncated length (file ends after %zu bytes)", what, at,
                         c->size);
    if (len > left(c))
        return tern_errf(TERN_EFORMAT, "%s at offset %zu: length %" PRIu64 " exceeds the %zu bytes left in the file",
                         what, at, len, left(c));
    out->ptr = (const char *)c->base + c->pos;
    out->len = (size_t)len;
    c->pos += (size_t)len;
    return NULL;
}

/* A NUL-terminated copy of a key or tensor name; empty names and embedded NULs are format errors. */
static TERN_MUST_CHECK tern_err *dup_name(const tern_gguf_str *s, const char *what, size_t at, char **out) {
    if (s->len == 0)
        return tern_errf(TERN_EFORMAT, "%s at offset %zu is empty", what, at);
    if (memchr(s->ptr, 0, s->len))
        return tern_errf(TERN_EFORMAT, "%s at offset %zu contains a NUL byte", what, at);
    char *d = malloc(s->len + 1);
    if (!d)
        return tern_errf(TERN_ENOMEM, "out of memory copying a %zu-byte %s", s->len, what);
    memcpy(d, s->ptr, s->len);
    d[s->len] = 0;
    *out = d;
    return NULL;
}

static TERN_MUST_CHECK tern_err *walk_value(cursor *c, uint32_t type, int depth, uint64_t **offsets_out, uint32_t *elem_type_out,
                            uint64_t *count_out, size_t *elems_off_out);

/* Walks an array value (cursor at its element-type field). With offsets_out, records where each string or
 * array element starts (relative to element 0), so accessors need no walk. */
static TERN_MUST_CHECK tern_err *walk_array(cursor *c, int depth, uint64_t **offsets_out, uint32_t *elem_type_out, uint64_t *count_out,
                            size_t *elems_off_out) {
    size_t at = c->pos;
    uint32_t et;
    uint64_t count;
    if (read_u32(c, &et) || read_u64(c, &count))
        return tern_errf(TERN_EFORMAT, "array at offset %zu: truncated header (file ends after %zu bytes)", at,
                         c->size);
    if (et >= TERN_GGUF_TYPE_COUNT)
        return tern_errf(TERN_EFORMAT, "array at offset %zu: unknown element type %" PRIu32, at, et);
    if (et == TERN_GGUF_ARRAY && depth + 1 >= TERN_GGUF_MAX_NESTING)
        return tern_errf(TERN_EFORMAT, "array at offset %zu: arrays nested deeper than %d levels", at,
                         TERN_GGUF_MAX_NESTING);
    /* The smallest possible element: its fixed size, a string's 8-byte length, an array's 12-byte header. */
    size_t min_elem = et == TERN_GGUF_STRING ? 8 : et == TERN_GGUF_ARRAY ? 12 : scalar_size(et);
    if (count > left(c) / min_elem)
        return tern_errf(TERN_EFORMAT,
                         "array at offset %zu: count %" PRIu64 " of %s elements overflows the %zu bytes left in the file",
                         at, count, tern_gguf_type_name(et), left(c));
    size_t elems_off = c->pos;
    if (elem_type_out)
        *elem_type_out = et;
    if (count_out)
        *count_out = count;
    if (elems_off_out)
        *elems_off_out = elems_off;
    if (et != TERN_GGUF_STRING && et != TERN_GGUF_ARRAY) {
        c->pos += (size_t)count * min_elem; /* checked above */
        return NULL;
    }
    uint64_t *offs = NULL;
    if (offsets_out && count) {
        offs = malloc((size_t)count * sizeof *offs); /* count <= file size / 8: bounded */
        if (!offs)
            return tern_errf(TERN_ENOMEM, "array at offset %zu: out of memory indexing %" PRIu64 " elements", at, count);
    }
    for (uint64_t i = 0; i < count; i++) {
        if (offs)
            offs[i] = c->pos - elems_off;
        tern_err *e;
        if (et == TERN_GGUF_STRING) {
            /* Inlined string skip: this loop runs once per vocabulary token and merge. */
            uint64_t len;
            if (left(c) < 8) {
                e = tern_errf(TERN_EFORMAT, "truncated string length at offset %zu", c->pos);
            } else if ((len = load_u64(c->base + c->pos)) > left(c) - 8) {
                e = tern_errf(TERN_EFORMAT, "string at offset %zu: length %" PRIu64 " exceeds the %zu bytes left",
                              c->pos, len, left(c) - 8);
            } else {
                c->pos += 8 + (size_t)len;
                continue;
            }
        } else {
            e = walk_value(c, TERN_GGUF_ARRAY, depth + 1, NULL, NULL, NULL, NULL);
            if (!e)
                continue;
        }
        free(offs);
        return tern_err_wrap(e, "array at offset %zu: element %" PRIu64 " of %" PRIu64, at, i, count);
    }
    if (offsets_out)
        *offsets_out = offs;
    return NULL;
}

/* Walks one value of `type`; for arrays, reports the element type, count, element offset and index. */
static TERN_MUST_CHECK tern_err *walk_value(cursor *c, uint32_t type, int depth, uint64_t **offsets_out, uint32_t *elem_type_out,
                            uint64_t *count_out, size_t *elems_off_out) {
    if (type == TERN_GGUF_STRING) {
        tern_gguf_str s;
        return read_string(c, "string value", &s);
    }
    if (type == TERN_GGUF_ARRAY)
        return walk_array(c, depth, offsets_out, elem_type_out, count_out, elems_off_out);
    size_t n = scalar_size(type);
    if (!n)
        return tern_errf(TERN_EFORMAT, "unknown value type %" PRIu32 " at offset %zu", type, c->pos);
    if (left(c) < n)
        return tern_errf(TERN_EFORMAT, "truncated %s value at offset %zu (file ends after %zu bytes)",
                         tern_gguf_type_name(type), c->pos, c->size);
    c->pos += n;
    return NULL;
}

static TERN_MUST_CHECK tern_err *parse_kvs(tern_gguf *g, cursor *c) {
    g->kv_hash_cap = hash_cap_for(g->n_kv);
    g->kv_hash = calloc(g->kv_hash_cap, sizeof *g->kv_hash);
    g->kvs = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kvs);
    if (!g->kv_hash || !g->kvs)
        return tern_errf(TERN_ENOMEM, "out of memory for %zu key/values", g->n_kv);
    for (size_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kvs[i];
        size_t at = c->pos;
        tern_gguf_str key;
        TERN_TRY(tern_err_wrap(read_string(c, "key", &key), "key/value %zu of %zu", i, g->n_kv));
        TERN_TRY(tern_err_wrap(dup_name(&key, "key", at, &kv->key), "key/value %zu of %zu", i, g->n_kv));
        if (read_u32(c, &kv->type))
            return tern_errf(TERN_EFORMAT, "key '%s': truncated value type at offset %zu", kv->key, c->pos);
        if (kv->type >= TERN_GGUF_TYPE_COUNT)
            return tern_errf(TERN_EFORMAT, "key '%s': unknown value type %" PRIu32 " at offset %zu", kv->key,
                             kv->type, c->pos - 4);
        kv->value_off = c->pos;
        TERN_TRY(tern_err_wrap(walk_value(c, kv->type, 0, &kv->offsets, &kv->elem_type, &kv->count, &kv->elems_off),
                               "key '%s'", kv->key));
        long dup = hash_insert(g->kv_hash, g->kv_hash_cap, kv->key, i, kv_name_of, g);
        if (dup >= 0)
            return tern_errf(TERN_EFORMAT, "duplicate key '%s' (key/values %ld and %zu)", kv->key, dup, i);
    }
    return NULL;
}

static TERN_MUST_CHECK tern_err *read_alignment(tern_gguf *g) {
    g->alignment = TERN_GGUF_DEFAULT_ALIGNMENT;
    if (tern_gguf_find(g, "general.alignment") < 0)
        return NULL;
    uint32_t a;
    TERN_TRY(tern_gguf_get_u32(g, "general.alignment", &a));
    if (a == 0 || (a & (a - 1)) != 0)
        return tern_errf(TERN_EFORMAT, "general.alignment %" PRIu32 " is not a power of two", a);
    g->alignment = a;
    return NULL;
}

static TERN_MUST_CHECK tern_err *parse_tensor_infos(tern_gguf *g, cursor *c) {
    g->tensor_hash_cap = hash_cap_for(g->n_tensors);
    g->tensor_hash = calloc(g->tensor_hash_cap, sizeof *g->tensor_hash);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->tensor_hash || !g->tensors)
        return tern_errf(TERN_ENOMEM, "out of memory for %zu tensor infos", g->n_tensors);
    for (size_t i = 0; i < g->n_tensors; i++) {
        tern_gguf_tensor *t = &g->tensors[i];
        size_t at = c->pos;
        tern_gguf_str name;
        char *copy = NULL;
        TERN_TRY(tern_err_wrap(read_string(c, "tensor name", &name), "tensor info %zu of %zu", i, g->n_tensors));
        TERN_TRY(tern_err_wrap(dup_name(&name, "tensor name", at, &copy), "tensor info %zu of %zu", i, g->n_tensors));
        t->name = copy;
        if (read_u32(c, &t->n_dims))
            return tern_errf(TERN_EFORMAT, "tensor '%s': truncated dimension count at offset %zu", t->name, c->pos);
        if (t->n_dims > TERN_GGUF_MAX_DIMS)
            return tern_errf(TERN_EFORMAT, "tensor '%s': %" PRIu32 " dimensions (at most %d)", t->name, t->n_dims,
                             TERN_GGUF_MAX_DIMS);
        uint64_t n = 1;
        for (int d = 0; d < TERN_GGUF_MAX_DIMS; d++) {
            t->dims[d] = 1;
            if ((uint32_t)d >= t->n_dims)
                continue;
            if (read_u64(c, &t->dims[d]))
                return tern_errf(TERN_EFORMAT, "tensor '%s': truncated dimension %d at offset %zu", t->name, d, c->pos);
            /* ggml counts elements in int64: the product must fit there. */
            if (t->dims[d] > (uint64_t)INT64_MAX || (t->dims[d] && n > (uint64_t)INT64_MAX / t->dims[d]))
                return tern_errf(TERN_EFORMAT, "tensor '%s': dimension %d (%" PRIu64 ") overflows the element count",
                                 t->name, d, t->dims[d]);
            n *= t->dims[d];
        }
        t->n_elems = n;
        if (read_u32(c, &t->ggml_type) || read_u64(c, &t->offset))
            return tern_errf(TERN_EFORMAT, "tensor '%s': truncated type/offset at offset %zu", t->name, c->pos);
        if (t->offset % g->alignment != 0)
            return tern_errf(TERN_EFORMAT, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                             t->name, t->offset, g->alignment);
        long dup = hash_insert(g->tensor_hash, g->tensor_hash_cap, t->name, i, tensor_name_of, g);
        if (dup >= 0)
            return tern_errf(TERN_EFORMAT, "duplicate tensor name '%s' (tensor infos %ld and %zu)", t->name, dup, i);
    }
    return NULL;
}

/* Places the data section and checks every tensor of a known type lies inside the file. */
static TERN_MUST_CHECK tern_err *check_data_section(tern_gguf *g, size_t infos_end) {
    uint64_t a = g->alignment;
    uint64_t start = ((uint64_t)infos_end + a - 1) / a * a;
    if (start > g->size) {
        if (g->n_tensors > 0)
            return tern_errf(TERN_EFORMAT, "data section would start at offset %" PRIu64 ", past the end of the file (%zu bytes)",
                             start, g->size);
        start = g->size; /* metadata-only file without trailing padding */
    }
    g->data_off = start;
    uint64_t avail = g->size - start;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const tern_gguf_tensor *t = &g->tensors[i];
        if (!tern_ggml_type_block(t->ggml_type, NULL, NULL))
            continue; /* refused on data access, not here: the file may carry types we never read */
        uint64_t nbytes;
        TERN_TRY(tern_err_wrap(tern_ggml_nbytes(t->ggml_type, t->dims[0], t->n_elems, &nbytes), "tensor '%s'", t->name));
        if (t->offset > avail || nbytes > avail - t->offset)
            return tern_errf(TERN_EFORMAT,
                             "tensor '%s': data [%" PRIu64 ", %" PRIu64 ") of the data section lies beyond the end of the file "
                             "(the data section holds %" PRIu64 " bytes)",
                             t->name, t->offset, t->offset + nbytes, avail);
    }
    return NULL;
}

static TERN_MUST_CHECK tern_err *parse_all(tern_gguf *g) {
    cursor c = {g->base, g->size, 0};
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0)
        return tern_errf(TERN_EFORMAT, "not a GGUF file (bad magic: expected \"GGUF\")");
    c.pos = 4;
    if (read_u32(&c, &g->version))
        return tern_errf(TERN_EFORMAT, "truncated header (file is %zu bytes)", g->size);
    if (g->version != 2 && g->version != 3) {
        if (g->version == 0x02000000u || g->version == 0x03000000u)
            return tern_errf(TERN_EUNSUPPORTED, "big-endian GGUF files are not supported");
        return tern_errf(TERN_EUNSUPPORTED, "unsupported GGUF version %" PRIu32 " (this reader handles 2 and 3)",
                         g->version);
    }
    uint64_t n_tensors, n_kv;
    if (read_u64(&c, &n_tensors) || read_u64(&c, &n_kv))
        return tern_errf(TERN_EFORMAT, "truncated header (file is %zu bytes)", g->size);
    /* Smallest encodings: a key/value is 8+1 (key) + 4 (type) + 1 (u8) bytes; a tensor info 8+1 (name) +
     * 4 (n_dims = 0) + 4 (type) + 8 (offset). Counts beyond what the file could hold are rejected before
     * anything is allocated for them. */
    size_t rest = left(&c);
    if (n_kv > rest / 14)
        return tern_errf(TERN_EFORMAT, "key/value count %" PRIu64 " is absurd for a file of %zu bytes", n_kv, g->size);
    if (n_tensors > rest / 25 || n_tensors > (rest - n_kv * 14) / 25)
        return tern_errf(TERN_EFORMAT, "tensor count %" PRIu64 " is absurd for a file of %zu bytes", n_tensors, g->size);
    g->n_kv = (size_t)n_kv;
    g->n_tensors = (size_t)n_tensors;
    TERN_TRY(parse_kvs(g, &c));
    TERN_TRY(read_alignment(g));
    TERN_TRY(parse_tensor_infos(g, &c));
    return check_data_section(g, c.pos);
}

static TERN_MUST_CHECK tern_err *finish_open(tern_gguf *g, const char *name, tern_gguf **out) {
    g->name = strdup(name ? name : "gguf");
    tern_err *e = g->name ? parse_all(g) : tern_errf(TERN_ENOMEM, "out of memory");
    if (e) {
        e = tern_err_wrap(e, "%s", name ? name : "gguf");
        tern_gguf_close(g);
        return e;
    }
    *out = g;
    return NULL;
}

tern_err *tern_gguf_parse(const void *data, size_t size, const char *name, tern_gguf **out) {
    *out = NULL;
    tern_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return tern_errf(TERN_ENOMEM, "out of memory");
    g->base = data;
    g->size = data ? size : 0;
    return finish_open(g, name, out);
}

tern_err *tern_gguf_open(const char *path, tern_gguf **out) {
    *out = NULL;
    tern_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *e = tern_mmap_open(path, &g->map);
    if (e) {
        free(g);
        return e;
    }
    g->base = g->map.data;
    g->size = g->map.size;
    return finish_open(g, path, out);
}

void tern_gguf_close(tern_gguf *g) {
    if (!g)
        return;
    for (size_t i = 0; g->kvs && i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].offsets);
    }
    for (size_t i = 0; g->tensors && i < g->n_tensors; i++)
        free((char *)g->tensors[i].name);
    free(g->kvs);
    free(g->kv_hash);
    free(g->tensors);
    free(g->tensor_hash);
    free(g->name);
    tern_mmap_close(&g->map);
    free(g);
}

/* ------------------------------------------------------------------------------------------------ */
/* Accessors                                                                                        */

uint32_t tern_gguf_version(const tern_gguf *g) { return g->version; }
const char *tern_gguf_name(const tern_gguf *g) { return g->name; }
uint32_t tern_gguf_alignment(const tern_gguf *g) { return g->alignment; }
uint64_t tern_gguf_data_offset(const tern_gguf *g) { return g->data_off; }
size_t tern_gguf_kv_count(const tern_gguf *g) { return g->n_kv; }
const char *tern_gguf_kv_key(const tern_gguf *g, size_t i) { return i < g->n_kv ? g->kvs[i].key : NULL; }
tern_gguf_type tern_gguf_kv_type(const tern_gguf *g, size_t i) {
    return i < g->n_kv ? (tern_gguf_type)g->kvs[i].type : TERN_GGUF_TYPE_COUNT;
}

long tern_gguf_find(const tern_gguf *g, const char *key) {
    return key ? hash_find(g->kv_hash, g->kv_hash_cap, key, kv_name_of, g) : -1;
}

static TERN_MUST_CHECK tern_err *lookup(const tern_gguf *g, const char *key, const gguf_kv **out) {
    long i = tern_gguf_find(g, key);
    if (i < 0)
        return tern_errf(TERN_ENOTFOUND, "%s: key '%s' not found", g->name, key ? key : "(null)");
    *out = &g->kvs[i];
    return NULL;
}

static TERN_MUST_CHECK tern_err *wrong_type(const tern_gguf *g, const gguf_kv *kv, const char *want) {
    return tern_errf(TERN_EFORMAT, "%s: key '%s': expected %s, found %s", g->name, kv->key, want,
                     tern_gguf_type_name((tern_gguf_type)kv->type));
}

/* Reads a scalar of integer type `t` at p: signed values go to *s (is_signed = 1), unsigned to *u. */
static int load_int(uint32_t t, const unsigned char *p, int64_t *s, uint64_t *u, int *is_signed) {
    *is_signed = 0;
    switch (t) {
    case TERN_GGUF_U8: *u = p[0]; return 0;
    case TERN_GGUF_U16: *u = (uint64_t)p[0] | (uint64_t)p[1] << 8; return 0;
    case TERN_GGUF_U32: *u = load_u32(p); return 0;
    case TERN_GGUF_U64: *u = load_u64(p); return 0;
    case TERN_GGUF_I8: *s = (int8_t)p[0]; break;
    case TERN_GGUF_I16: *s = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case TERN_GGUF_I32: *s = (int32_t)load_u32(p); break;
    case TERN_GGUF_I64: *s = (int64_t)load_u64(p); break;
    default: return -1;
    }
    *is_signed = 1;
    return 0;
}

/* Reads an integer value as int64/uint64 with range [lo, hi] (signed view) or [0, uhi] (unsigned view). */
static TERN_MUST_CHECK tern_err *get_int(const tern_gguf *g, const char *key, const char *want, int64_t lo, uint64_t hi, int64_t *s_out,
                         uint64_t *u_out) {
    const gguf_kv *kv;
    TERN_TRY(lookup(g, key, &kv));
    int64_t s = 0;
    uint64_t u = 0;
    int is_signed;
    if (load_int(kv->type, g->base + kv->value_off, &s, &u, &is_signed))
        return wrong_type(g, kv, want);
    if (is_signed ? (s < lo || (s >= 0 && (uint64_t)s > hi)) : u > hi) {
        if (is_signed)
            return tern_errf(TERN_EFORMAT, "%s: key '%s': value %" PRId64 " does not fit in %s", g->name, key, s, want);
        return tern_errf(TERN_EFORMAT, "%s: key '%s': value %" PRIu64 " does not fit in %s", g->name, key, u, want);
    }
    if (s_out)
        *s_out = is_signed ? s : (int64_t)u;
    if (u_out)
        *u_out = is_signed ? (uint64_t)s : u;
    return NULL;
}

tern_err *tern_gguf_get_u32(const tern_gguf *g, const char *key, uint32_t *out) {
    uint64_t v;
    TERN_TRY(get_int(g, key, "u32", 0, UINT32_MAX, NULL, &v));
    *out = (uint32_t)v;
    return NULL;
}

tern_err *tern_gguf_get_i32(const tern_gguf *g, const char *key, int32_t *out) {
    int64_t v;
    TERN_TRY(get_int(g, key, "i32", INT32_MIN, INT32_MAX, &v, NULL));
    *out = (int32_t)v;
    return NULL;
}

tern_err *tern_gguf_get_u64(const tern_gguf *g, const char *key, uint64_t *out) {
    return get_int(g, key, "u64", 0, UINT64_MAX, NULL, out);
}

tern_err *tern_gguf_get_i64(const tern_gguf *g, const char *key, int64_t *out) {
    return get_int(g, key, "i64", INT64_MIN, INT64_MAX, out, NULL);
}

static double load_f32(const unsigned char *p) {
    uint32_t bits = load_u32(p);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static double load_f64(const unsigned char *p) {
    uint64_t bits = load_u64(p);
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

tern_err *tern_gguf_get_f32(const tern_gguf *g, const char *key, float *out) {
    const gguf_kv *kv;
    TERN_TRY(lookup(g, key, &kv));
    const unsigned char *p = g->base + kv->value_off;
    if (kv->type == TERN_GGUF_F32) {
        *out = (float)load_f32(p);
        return NULL;
    }
    if (kv->type == TERN_GGUF_F64) {
        double d = load_f64(p);
        if (isnan(d) || (double)(float)d == d) {
            *out = (float)d;
            return NULL;
        }
        return tern_errf(TERN_EFORMAT, "%s: key '%s': f64 value %.17g is not exactly representable as f32", g->name,
                         key, d);
    }
    return wrong_type(g, kv, "f32");
}

tern_err *tern_gguf_get_f64(const tern_gguf *g, const char *key, double *out) {
    const gguf_kv *kv;
    TERN_TRY(lookup(g, key, &kv));
    const unsigned char *p = g->base + kv->value_off;
    if (kv->type == TERN_GGUF_F32)
        *out = load_f32(p);
    else if (kv->type == TERN_GGUF_F64)
        *out = load_f64(p);
    else
        return wrong_type(g, kv, "f64");
    return NULL;
}

tern_err *tern_gguf_get_bool(const tern_gguf *g, const char *key, int *out) {
    const gguf_kv *kv;
    TERN_TRY(lookup(g, key, &kv));
    if (kv->type != TERN_GGUF_BOOL)
        return wrong_type(g, kv, "bool");
    *out = g->base[kv->value_off] != 0;
    return NULL;
}

/* A validated string at p (its length prefix checked during the open walk). */
static tern_gguf_str str_at(const unsigned char *p) {
    tern_gguf_str s = {(const char *)p + 8, (size_t)load_u64(p)};
    return s;
}

tern_err *tern_gguf_get_str(const tern_gguf *g, const char *key, tern_gguf_str *out) {
    const gguf_kv *kv;
    TERN_TRY(lookup(g, key, &kv));
    if (kv->type != TERN_GGUF_STRING)
        return wrong_type(g, kv, "string");
    *out = str_at(g->base + kv->value_off);
    return NULL;
}

tern_err *tern_gguf_get_str_dup(const tern_gguf *g, const char *key, char **out) {
    tern_gguf_str s;
    *out = NULL;
    TERN_TRY(tern_gguf_get_str(g, key, &s));
    if (memchr(s.ptr, 0, s.len))
        return tern_errf(TERN_EFORMAT, "%s: key '%s': string contains a NUL byte", g->name, key);
    char *d = malloc(s.len + 1);
    if (!d)
        return tern_errf(TERN_ENOMEM, "out of memory");
    memcpy(d, s.ptr, s.len);
    d[s.len] = 0;
    *out = d;
    return NULL;
}

tern_err *tern_gguf_get_array(const tern_gguf *g, const char *key, tern_gguf_array *out) {
    const gguf_kv *kv;
    TERN_TRY(lookup(g, key, &kv));
    if (kv->type != TERN_GGUF_ARRAY)
        return wrong_type(g, kv, "array");
    out->elem_type = (tern_gguf_type)kv->elem_type;
    out->count = kv->count;
    out->data = g->base + kv->elems_off;
    out->offsets = kv->offsets;
    out->key = kv->key;
    return NULL;
}

/* The end of one value of `type` at p. Only for bytes validated at open (lengths are trusted; nesting is
 * bounded by TERN_GGUF_MAX_NESTING). */
static const unsigned char *skip_trusted(uint32_t type, const unsigned char *p) {
    size_t fixed = scalar_size(type);
    if (fixed)
        return p + fixed;
    if (type == TERN_GGUF_STRING)
        return p + 8 + (size_t)load_u64(p);
    uint32_t et = load_u32(p);
    uint64_t n = load_u64(p + 4);
    p += 12;
    fixed = scalar_size(et);
    if (fixed)
        return p + (size_t)n * fixed;
    for (uint64_t k = 0; k < n; k++)
        p = skip_trusted(et, p);
    return p;
}

/* Start of element i of a (validated) array. */
static const unsigned char *elem_at(const tern_gguf_array *a, uint64_t i) {
    size_t fixed = scalar_size(a->elem_type);
    if (fixed)
        return a->data + (size_t)i * fixed;
    if (a->offsets)
        return a->data + a->offsets[i];
    const unsigned char *p = a->data; /* nested view without an index: walk */
    for (uint64_t k = 0; k < i; k++)
        p = skip_trusted(a->elem_type, p);
    return p;
}

static TERN_MUST_CHECK tern_err *check_index(const tern_gguf_array *a, uint64_t i) {
    if (i >= a->count)
        return tern_errf(TERN_EINVAL, "key '%s': index %" PRIu64 " out of range (array has %" PRIu64 " elements)",
                         a->key ? a->key : "?", i, a->count);
    return NULL;
}

tern_err *tern_gguf_array_str(const tern_gguf_array *a, uint64_t i, tern_gguf_str *out) {
    TERN_TRY(check_index(a, i));
    if (a->elem_type != TERN_GGUF_STRING)
        return tern_errf(TERN_EFORMAT, "key '%s': expected an array of string, found an array of %s",
                         a->key ? a->key : "?", tern_gguf_type_name(a->elem_type));
    *out = str_at(elem_at(a, i));
    return NULL;
}

tern_err *tern_gguf_array_i64(const tern_gguf_array *a, uint64_t i, int64_t *out) {
    TERN_TRY(check_index(a, i));
    int64_t s;
    uint64_t u;
    int is_signed;
    if (load_int(a->elem_type, elem_at(a, i), &s, &u, &is_signed))
        return tern_errf(TERN_EFORMAT, "key '%s': expected an array of integers, found an array of %s",
                         a->key ? a->key : "?", tern_gguf_type_name(a->elem_type));
    if (!is_signed && u > (uint64_t)INT64_MAX)
        return tern_errf(TERN_EFORMAT, "key '%s': element %" PRIu64 " (%" PRIu64 ") does not fit in i64",
                         a->key ? a->key : "?", i, u);
    *out = is_signed ? s : (int64_t)u;
    return NULL;
}

tern_err *tern_gguf_array_f64(const tern_gguf_array *a, uint64_t i, double *out) {
    TERN_TRY(check_index(a, i));
    const unsigned char *p = elem_at(a, i);
    int64_t s;
    uint64_t u;
    int is_signed;
    if (a->elem_type == TERN_GGUF_F32)
        *out = load_f32(p);
    else if (a->elem_type == TERN_GGUF_F64)
        *out = load_f64(p);
    else if (a->elem_type == TERN_GGUF_BOOL)
        *out = p[0] != 0;
    else if (!load_int(a->elem_type, p, &s, &u, &is_signed))
        *out = is_signed ? (double)s : (double)u;
    else
        return tern_errf(TERN_EFORMAT, "key '%s': expected a numeric array, found an array of %s", a->key ? a->key : "?",
                         tern_gguf_type_name(a->elem_type));
    return NULL;
}

tern_err *tern_gguf_array_f32(const tern_gguf_array *a, uint64_t i, float *out) {
    TERN_TRY(check_index(a, i));
    if (a->elem_type != TERN_GGUF_F32)
        return tern_errf(TERN_EFORMAT, "key '%s': expected an array of f32, found an array of %s", a->key ? a->key : "?",
                         tern_gguf_type_name(a->elem_type));
    *out = (float)load_f32(elem_at(a, i));
    return NULL;
}

tern_err *tern_gguf_array_sub(const tern_gguf_array *a, uint64_t i, tern_gguf_array *out) {
    TERN_TRY(check_index(a, i));
    if (a->elem_type != TERN_GGUF_ARRAY)
        return tern_errf(TERN_EFORMAT, "key '%s': expected an array of arrays, found an array of %s",
                         a->key ? a->key : "?", tern_gguf_type_name(a->elem_type));
    const unsigned char *p = elem_at(a, i);
    out->elem_type = (tern_gguf_type)load_u32(p);
    out->count = load_u64(p + 4);
    out->data = p + 12;
    out->offsets = NULL;
    out->key = a->key;
    return NULL;
}

size_t tern_gguf_tensor_count(const tern_gguf *g) { return g->n_tensors; }

const tern_gguf_tensor *tern_gguf_tensor_at(const tern_gguf *g, size_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const tern_gguf_tensor *tern_gguf_find_tensor(const tern_gguf *g, const char *name) {
    long i = name ? hash_find(g->tensor_hash, g->tensor_hash_cap, name, tensor_name_of, g) : -1;
    return i < 0 ? NULL : &g->tensors[i];
}

tern_err *tern_gguf_tensor_data(const tern_gguf *g, const tern_gguf_tensor *t, const void **data, size_t *nbytes) {
    uint64_t n;
    TERN_TRY(tern_err_wrap(tern_ggml_nbytes(t->ggml_type, t->dims[0], t->n_elems, &n), "%s: tensor '%s'", g->name,
                           t->name));
    uint64_t avail = g->size - g->data_off;
    if (t->offset > avail || n > avail - t->offset) /* checked at open; kept for tensors built by hand */
        return tern_errf(TERN_EFORMAT, "%s: tensor '%s': data lies beyond the end of the file", g->name, t->name);
    *data = g->base + g->data_off + t->offset;
    *nbytes = (size_t)n;
    return NULL;
}
