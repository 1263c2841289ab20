/* dtype.h — element types of stored tensors (safetensors names) and their sizes. */
#ifndef TERN_TENSOR_DTYPE_H
#define TERN_TENSOR_DTYPE_H

#include <stddef.h>

typedef enum tern_dtype {
    TERN_DT_INVALID = 0,
    TERN_DT_F64,
    TERN_DT_F32,
    TERN_DT_F16,
    TERN_DT_BF16,
    TERN_DT_I64,
    TERN_DT_I32,
    TERN_DT_I16,
    TERN_DT_I8,
    TERN_DT_U64,
    TERN_DT_U32,
    TERN_DT_U16,
    TERN_DT_U8,
    TERN_DT_BOOL,
    TERN_DT_F8_E4M3,
    TERN_DT_F8_E5M2,
    TERN_DT_COUNT
} tern_dtype;

/* Bytes per element (0 for TERN_DT_INVALID). */
size_t tern_dtype_size(tern_dtype dt);
/* The safetensors name ("F32", "BF16", ...). */
const char *tern_dtype_name(tern_dtype dt);
/* Parses a safetensors dtype name; TERN_DT_INVALID if unknown. */
tern_dtype tern_dtype_parse(const char *name);

#endif
