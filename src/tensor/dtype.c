/* dtype.c — dtype names and sizes. */
#include "tensor/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_info[TERN_DT_COUNT] = {
    [TERN_DT_INVALID] = {"INVALID", 0}, [TERN_DT_F64] = {"F64", 8},  [TERN_DT_F32] = {"F32", 4},
    [TERN_DT_F16] = {"F16", 2},         [TERN_DT_BF16] = {"BF16", 2}, [TERN_DT_I64] = {"I64", 8},
    [TERN_DT_I32] = {"I32", 4},         [TERN_DT_I16] = {"I16", 2},   [TERN_DT_I8] = {"I8", 1},
    [TERN_DT_U64] = {"U64", 8},         [TERN_DT_U32] = {"U32", 4},   [TERN_DT_U16] = {"U16", 2},
    [TERN_DT_U8] = {"U8", 1},           [TERN_DT_BOOL] = {"BOOL", 1}, [TERN_DT_F8_E4M3] = {"F8_E4M3", 1},
    [TERN_DT_F8_E5M2] = {"F8_E5M2", 1},
};

size_t tern_dtype_size(tern_dtype dt) { return (unsigned)dt < TERN_DT_COUNT ? dtype_info[dt].size : 0; }

const char *tern_dtype_name(tern_dtype dt) {
    return (unsigned)dt < TERN_DT_COUNT ? dtype_info[dt].name : "INVALID";
}

tern_dtype tern_dtype_parse(const char *name) {
    for (int i = 1; i < TERN_DT_COUNT; i++)
        if (strcmp(name, dtype_info[i].name) == 0)
            return (tern_dtype)i;
    return TERN_DT_INVALID;
}
