/* gguf_tensors.c — a GGUF file's tensors renamed into a checkpoint (see gguf_tensors.h). */
#include "models/gguf_tensors.h"

#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tensor/qblock.h"

static tern_qblock qblock_of(uint32_t ggml_type) {
    switch (ggml_type) {
    case TERN_GGML_Q4_0: return TERN_QB_Q4_0;
    case TERN_GGML_Q4_1: return TERN_QB_Q4_1;
    case TERN_GGML_Q5_0: return TERN_QB_Q5_0;
    case TERN_GGML_Q5_1: return TERN_QB_Q5_1;
    case TERN_GGML_Q8_0: return TERN_QB_Q8_0;
    case TERN_GGML_Q4_K: return TERN_QB_Q4_K;
    case TERN_GGML_Q5_K: return TERN_QB_Q5_K;
    case TERN_GGML_Q6_K: return TERN_QB_Q6_K;
    default: return TERN_QB_NONE;
    }
}

static TERN_MUST_CHECK tern_err *tensor_of(const tern_gguf *g, const tern_gguf_tensor *t, char *name, tern_tensor *out) {
    tern_dtype dt = TERN_DT_U8;
    const tern_qblock qb = qblock_of(t->ggml_type);
    switch (t->ggml_type) {
    case TERN_GGML_F32: dt = TERN_DT_F32; break;
    case TERN_GGML_F16: dt = TERN_DT_F16; break;
    case TERN_GGML_BF16: dt = TERN_DT_BF16; break;
    default:
        if (!qb)
            return tern_errf(TERN_EUNSUPPORTED, "%s: tensor %s is %s; this build reads f32, f16, bf16, q4_0, q4_1, "
                             "q5_0, q5_1, q8_0, q4_K, q5_K and q6_K", tern_gguf_name(g), t->name,
                             tern_ggml_type_name(t->ggml_type));
    }
    const void *data;
    size_t nbytes;
    TERN_TRY(tern_gguf_tensor_data(g, t, &data, &nbytes));
    memset(out, 0, sizeof *out);
    out->name = name;
    out->dtype = dt;
    out->qblock = qb;
    out->ndim = (int)t->n_dims;
    out->numel = (int64_t)t->n_elems;
    for (uint32_t d = 0; d < t->n_dims; d++) /* GGUF lists the fastest dimension first */
        out->shape[d] = (int64_t)t->dims[t->n_dims - 1 - d];
    out->data = data;
    out->nbytes = nbytes;
    out->file = tern_gguf_name(g);
    out->offset = tern_gguf_data_offset(g) + t->offset;
    out->aligned = ((uintptr_t)data % tern_dtype_size(dt)) == 0;
    return NULL;
}

/* Names of the renamed tensors, freed with the checkpoint. */
typedef struct holder {
    tern_gguf *g;
    char **names;
    size_t n;
} holder;

static void release_holder(void *p) {
    holder *h = p;
    for (size_t i = 0; i < h->n; i++)
        free(h->names[i]);
    free(h->names);
    tern_gguf_close(h->g);
    free(h);
}

tern_err *tern_gguf_checkpoint(tern_gguf *g, tern_gguf_rename_fn rename, void *ctx, const char *what,
                               tern_checkpoint **ck) {
    *ck = NULL;
    const size_t n = tern_gguf_tensor_count(g);
    holder *h = calloc(1, sizeof *h);
    tern_tensor *ts = calloc(n ? n : 1, sizeof *ts);
    tern_err *e = NULL;
    if (!h || !ts || !(h->names = calloc(n ? n : 1, sizeof *h->names)))
        e = tern_errf(TERN_ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; !e && i < n; i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        int oom = 0;
        char *name = rename(t->name, ctx, &oom);
        if (!name) {
            if (oom)
                e = tern_errf(TERN_ENOMEM, "out of memory");
            continue;
        }
        if (!*name) {
            free(name);
            e = tern_errf(TERN_EUNSUPPORTED, "%s: tensor %s is not one tern knows for %s", tern_gguf_name(g), t->name,
                          what);
            break;
        }
        h->names[h->n++] = name;
        e = tensor_of(g, t, name, &ts[k]);
        k += !e;
    }
    if (e) {
        free(ts);
        if (h) {
            h->g = g;
            release_holder(h);
        } else
            tern_gguf_close(g);
        return e;
    }
    h->g = g;
    return tern_checkpoint_of_tensors(ts, k, release_holder, h, ck);
}

int64_t tern_gguf_tensor_dim(const tern_gguf *g, const char *name, uint32_t d) {
    const tern_gguf_tensor *t = tern_gguf_find_tensor(g, name);
    return t && d < t->n_dims ? (int64_t)t->dims[t->n_dims - 1 - d] : -1;
}

tern_err *tern_gguf_u32_in(const tern_gguf *g, const char *key, uint32_t lo, uint32_t hi, uint32_t *out) {
    TERN_TRY(tern_gguf_get_u32(g, key, out));
    if (*out < lo || *out > hi)
        return tern_errf(TERN_EFORMAT, "%s: %u is outside [%u, %u]", key, *out, lo, hi);
    return NULL;
}
