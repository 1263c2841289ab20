/* fuzz_safetensors.c — fuzz target for the safetensors header parser: any byte string must
 * either be rejected with an error or yield tensors whose every byte is readable in bounds. */
#include <stdint.h>
#include <string.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_safetensors *f = NULL;
    tern_err *e = tern_safetensors_parse(data, size, "fuzz.safetensors", &f);
    if (e) {
        /* Every rejection carries a message naming the source. */
        if (!e->msg || strncmp(e->msg, "fuzz.safetensors", 16) != 0)
            __builtin_trap();
        tern_err_free(e);
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < tern_safetensors_count(f); i++) {
        const tern_tensor *t = tern_safetensors_at(f, i);
        /* Validation promised data[0 .. nbytes) lies inside the input. */
        const uint8_t *p = t->data;
        if (p < data || p + t->nbytes > data + size || t->nbytes != (size_t)t->numel * tern_dtype_size(t->dtype))
            __builtin_trap();
        if (t->nbytes) {
            sink ^= p[0];
            sink ^= p[t->nbytes - 1];
        }
        if (tern_safetensors_find(f, t->name) != t)
            __builtin_trap();
    }
    for (size_t i = 0; i < tern_safetensors_metadata_count(f); i++) {
        const char *k, *v;
        if (tern_safetensors_metadata_at(f, i, &k, &v) != 0 || tern_safetensors_metadata(f, k) == NULL)
            __builtin_trap();
        sink ^= (uint8_t)v[0];
    }
    (void)sink;
    tern_safetensors_close(f);
    return 0;
}
