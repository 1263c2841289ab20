/* fuzz_gguf.c — fuzz target for the GGUF reader: parse arbitrary bytes, then touch every key, the first and
 * last element of every array (and of nested arrays), and every tensor's data, so an accessor that trusted
 * an unvalidated length would read out of bounds under the sanitizers. Files that carry tokenizer.ggml.*
 * metadata are also loaded as tokenizers and used once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

static void touch_array(const tern_gguf_array *a, int depth) {
    if (a->count == 0 || depth > TERN_GGUF_MAX_NESTING)
        return;
    uint64_t idx[2] = {0, a->count - 1};
    for (int k = 0; k < 2; k++) {
        tern_gguf_str s;
        int64_t i64;
        double d;
        float f;
        tern_gguf_array sub;
        tern_err_free(tern_gguf_array_i64(a, idx[k], &i64));
        tern_err_free(tern_gguf_array_f64(a, idx[k], &d));
        tern_err_free(tern_gguf_array_f32(a, idx[k], &f));
        tern_err *e = tern_gguf_array_str(a, idx[k], &s);
        if (!e && s.len) {
            volatile char c = s.ptr[s.len - 1];
            (void)c;
        }
        tern_err_free(e);
        e = tern_gguf_array_sub(a, idx[k], &sub);
        if (!e)
            touch_array(&sub, depth + 1);
        tern_err_free(e);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_gguf *g;
    tern_err *e = tern_gguf_parse(data, size, "fuzz.gguf", &g);
    if (e) {
        tern_err_free(e);
        return 0;
    }
    for (size_t i = 0; i < tern_gguf_kv_count(g); i++) {
        const char *key = tern_gguf_kv_key(g, i);
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f;
        double d;
        int b;
        char *dup = NULL;
        tern_gguf_array a;
        tern_err_free(tern_gguf_get_u32(g, key, &u32));
        tern_err_free(tern_gguf_get_i32(g, key, &i32));
        tern_err_free(tern_gguf_get_u64(g, key, &u64));
        tern_err_free(tern_gguf_get_i64(g, key, &i64));
        tern_err_free(tern_gguf_get_f32(g, key, &f));
        tern_err_free(tern_gguf_get_f64(g, key, &d));
        tern_err_free(tern_gguf_get_bool(g, key, &b));
        tern_err_free(tern_gguf_get_str_dup(g, key, &dup));
        free(dup);
        e = tern_gguf_get_array(g, key, &a);
        if (!e)
            touch_array(&a, 0);
        tern_err_free(e);
    }
    for (size_t i = 0; i < tern_gguf_tensor_count(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        const void *p;
        size_t n;
        e = tern_gguf_tensor_data(g, t, &p, &n);
        if (!e && n) {
            volatile unsigned char c = ((const unsigned char *)p)[0] ^ ((const unsigned char *)p)[n - 1];
            (void)c;
        }
        tern_err_free(e);
        if (tern_gguf_find_tensor(g, t->name) != t)
            __builtin_trap(); /* every tensor must be found by its own name */
    }
    tern_tokenizer *tok;
    e = tern_tokenizer_from_gguf(g, &tok);
    tern_gguf_close(g); /* the tokenizer must not point into the file */
    if (e) {
        tern_err_free(e);
        return 0;
    }
    tern_tokens ids = {0};
    static const char text[] = "ab a\n<s> \xc3\xa9\xff";
    if (!tern_tokenize(tok, text, sizeof text - 1, 1, 1, &ids)) {
        char *out;
        for (size_t i = 0; i < ids.n; i++)
            if (ids.ids[i] < 0 || (size_t)ids.ids[i] >= tern_tokenizer_vocab_size(tok))
                __builtin_trap();
        if (!tern_detokenize(tok, ids.ids, ids.n, 1, &out, NULL))
            free(out);
    }
    tern_tokens_free(&ids);
    tern_tokenizer_free(tok);
    return 0;
}
