/* gguf.h — reader for GGUF v2/v3 files (little-endian): metadata key/values and tensor infos.
 *
 * The file is mmapped (or borrowed from the caller's buffer) and validated once at open: every
 * key, value, array and tensor info is bounds-checked, so later accessors never read outside the
 * buffer. Nothing is copied except keys and tensor names (NUL-terminated for lookups); string
 * values point into the mapping (they are not NUL-terminated in the file, hence tern_gguf_str).
 * Arrays of strings get an offset index built during the validation walk, so element i is O(1)
 * even for a 262144-token vocabulary. */
#ifndef TERN_FORMATS_GGUF_H
#define TERN_FORMATS_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Value types as stored in the file. */
typedef enum tern_gguf_type {
    TERN_GGUF_U8 = 0,
    TERN_GGUF_I8 = 1,
    TERN_GGUF_U16 = 2,
    TERN_GGUF_I16 = 3,
    TERN_GGUF_U32 = 4,
    TERN_GGUF_I32 = 5,
    TERN_GGUF_F32 = 6,
    TERN_GGUF_BOOL = 7,
    TERN_GGUF_STRING = 8,
    TERN_GGUF_ARRAY = 9,
    TERN_GGUF_U64 = 10,
    TERN_GGUF_I64 = 11,
    TERN_GGUF_F64 = 12,
    TERN_GGUF_TYPE_COUNT
} tern_gguf_type;

/* ggml tensor element types (the numbering is fixed by the file format; gaps are retired types). */
typedef enum tern_ggml_type {
    TERN_GGML_F32 = 0,
    TERN_GGML_F16 = 1,
    TERN_GGML_Q4_0 = 2,
    TERN_GGML_Q4_1 = 3,
    TERN_GGML_Q5_0 = 6,
    TERN_GGML_Q5_1 = 7,
    TERN_GGML_Q8_0 = 8,
    TERN_GGML_Q8_1 = 9,
    TERN_GGML_Q2_K = 10,
    TERN_GGML_Q3_K = 11,
    TERN_GGML_Q4_K = 12,
    TERN_GGML_Q5_K = 13,
    TERN_GGML_Q6_K = 14,
    TERN_GGML_Q8_K = 15,
    TERN_GGML_IQ2_XXS = 16,
    TERN_GGML_IQ2_XS = 17,
    TERN_GGML_IQ3_XXS = 18,
    TERN_GGML_IQ1_S = 19,
    TERN_GGML_IQ4_NL = 20,
    TERN_GGML_IQ3_S = 21,
    TERN_GGML_IQ2_S = 22,
    TERN_GGML_IQ4_XS = 23,
    TERN_GGML_I8 = 24,
    TERN_GGML_I16 = 25,
    TERN_GGML_I32 = 26,
    TERN_GGML_I64 = 27,
    TERN_GGML_F64 = 28,
    TERN_GGML_IQ1_M = 29,
    TERN_GGML_BF16 = 30,
    TERN_GGML_TQ1_0 = 34,
    TERN_GGML_TQ2_0 = 35,
    TERN_GGML_MXFP4 = 39,
} tern_ggml_type;

#define TERN_GGUF_MAX_DIMS 4
#define TERN_GGUF_DEFAULT_ALIGNMENT 32
#define TERN_GGUF_MAX_NESTING 4 /* arrays of arrays, at most this many levels deep */

/* A string inside the file: `len` bytes at `ptr`, not NUL-terminated. */
typedef struct tern_gguf_str {
    const char *ptr;
    size_t len;
} tern_gguf_str;

/* A view of an array value; valid while the tern_gguf lives. */
typedef struct tern_gguf_array {
    tern_gguf_type elem_type;
    uint64_t count;
    const unsigned char *data;  /* first element */
    const uint64_t *offsets;    /* string/array elements: start of element i relative to data; NULL: walk */
    const char *key;            /* for error messages */
} tern_gguf_array;

/* One tensor info. `name` is a NUL-terminated copy; dims[i] for i >= n_dims are 1. */
typedef struct tern_gguf_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t dims[TERN_GGUF_MAX_DIMS]; /* dims[0] is the fastest-varying (row length) */
    uint32_t ggml_type;
    uint64_t offset;   /* relative to the data section */
    uint64_t n_elems;  /* product of dims (checked for overflow) */
} tern_gguf_tensor;

typedef struct tern_gguf tern_gguf;

/* Opens and validates `path` (mmapped read-only); errors name the path and the offending offset/key. */
TERN_MUST_CHECK tern_err *tern_gguf_open(const char *path, tern_gguf **out);
/* Validates a GGUF held in memory; `data` is borrowed and must outlive *out; `name` prefixes errors. */
TERN_MUST_CHECK tern_err *tern_gguf_parse(const void *data, size_t size, const char *name, tern_gguf **out);
/* Frees the reader (and unmaps the file if tern_gguf_open mapped it); NULL is fine. */
void tern_gguf_close(tern_gguf *g);

/* The format version (2 or 3). */
uint32_t tern_gguf_version(const tern_gguf *g);
/* The name given at open/parse (the path for files). */
const char *tern_gguf_name(const tern_gguf *g);
/* The data-section alignment (general.alignment or 32). */
uint32_t tern_gguf_alignment(const tern_gguf *g);
/* Byte offset of the data section in the file. */
uint64_t tern_gguf_data_offset(const tern_gguf *g);

/* Number of key/value pairs. */
size_t tern_gguf_kv_count(const tern_gguf *g);
/* Key of pair i (i < kv_count), NUL-terminated. */
const char *tern_gguf_kv_key(const tern_gguf *g, size_t i);
/* Type of pair i's value. */
tern_gguf_type tern_gguf_kv_type(const tern_gguf *g, size_t i);
/* Index of `key`, or -1 if absent. O(1) (hash lookup). */
long tern_gguf_find(const tern_gguf *g, const char *key);
/* The type name ("u32", "string", "array", ...); "unknown" out of range. */
const char *tern_gguf_type_name(tern_gguf_type t);

/* Typed getters. Absent key -> TERN_ENOTFOUND; wrong type or a value that does not fit -> TERN_EFORMAT.
 * Integer getters accept any integer type whose value fits exactly; floats accept f32, or f64 exactly
 * representable as f32 (f64 getter: f32 or f64); bool accepts only bool. */
TERN_MUST_CHECK tern_err *tern_gguf_get_str(const tern_gguf *g, const char *key, tern_gguf_str *out);
/* Like tern_gguf_get_str, but a malloc'd NUL-terminated copy (fails if the string holds a NUL byte). */
TERN_MUST_CHECK tern_err *tern_gguf_get_str_dup(const tern_gguf *g, const char *key, char **out);
TERN_MUST_CHECK tern_err *tern_gguf_get_u32(const tern_gguf *g, const char *key, uint32_t *out);
TERN_MUST_CHECK tern_err *tern_gguf_get_i32(const tern_gguf *g, const char *key, int32_t *out);
TERN_MUST_CHECK tern_err *tern_gguf_get_u64(const tern_gguf *g, const char *key, uint64_t *out);
TERN_MUST_CHECK tern_err *tern_gguf_get_i64(const tern_gguf *g, const char *key, int64_t *out);
TERN_MUST_CHECK tern_err *tern_gguf_get_f32(const tern_gguf *g, const char *key, float *out);
TERN_MUST_CHECK tern_err *tern_gguf_get_f64(const tern_gguf *g, const char *key, double *out);
TERN_MUST_CHECK tern_err *tern_gguf_get_bool(const tern_gguf *g, const char *key, int *out);
/* The array stored under `key`; absent -> TERN_ENOTFOUND, not an array -> TERN_EFORMAT. */
TERN_MUST_CHECK tern_err *tern_gguf_get_array(const tern_gguf *g, const char *key, tern_gguf_array *out);

/* Element i of a string array (i < count, else TERN_EINVAL; wrong element type -> TERN_EFORMAT). */
TERN_MUST_CHECK tern_err *tern_gguf_array_str(const tern_gguf_array *a, uint64_t i, tern_gguf_str *out);
/* Element i of an integer array whose value fits in int64 (u64 above INT64_MAX fails). */
TERN_MUST_CHECK tern_err *tern_gguf_array_i64(const tern_gguf_array *a, uint64_t i, int64_t *out);
/* Element i of any numeric array (integers, f32, f64, bool) as a double. */
TERN_MUST_CHECK tern_err *tern_gguf_array_f64(const tern_gguf_array *a, uint64_t i, double *out);
/* Element i of an f32 array. */
TERN_MUST_CHECK tern_err *tern_gguf_array_f32(const tern_gguf_array *a, uint64_t i, float *out);
/* Element i of an array of arrays, as a view (its elements are found by walking). */
TERN_MUST_CHECK tern_err *tern_gguf_array_sub(const tern_gguf_array *a, uint64_t i, tern_gguf_array *out);

/* Number of tensor infos. */
size_t tern_gguf_tensor_count(const tern_gguf *g);
/* Tensor info i (i < tensor_count), or NULL. */
const tern_gguf_tensor *tern_gguf_tensor_at(const tern_gguf *g, size_t i);
/* Tensor info by name, or NULL. O(1). */
const tern_gguf_tensor *tern_gguf_find_tensor(const tern_gguf *g, const char *name);
/* The tensor's bytes inside the file. Unknown/unsized ggml type, a row length that is not a whole number of
 * blocks, or data past the end of the file -> error naming the tensor. */
TERN_MUST_CHECK tern_err *tern_gguf_tensor_data(const tern_gguf *g, const tern_gguf_tensor *t, const void **data, size_t *nbytes);

/* Fills the block length (elements) and block size (bytes) of a ggml type and returns 1; returns 0 if this
 * build does not know the type's size. */
int tern_ggml_type_block(uint32_t ggml_type, uint32_t *block_elems, uint32_t *block_bytes);
/* The ggml type name ("f32", "q4_K", ...) or "unknown". */
const char *tern_ggml_type_name(uint32_t ggml_type);
/* Bytes of a tensor of this type with row length `row` and `n_elems` elements in total (row must be a
 * multiple of the block length). Errors: unknown type, partial block, overflow. */
TERN_MUST_CHECK tern_err *tern_ggml_nbytes(uint32_t ggml_type, uint64_t row, uint64_t n_elems, uint64_t *out);

#endif
