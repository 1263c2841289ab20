/* fuzz_tokenizer_json.c — fuzz target for the tokenizer.json loader: arbitrary bytes as tokenizer.json;
 * whatever loads must then encode and decode a fixed mix of text (spaces, newlines, digits, non-ASCII,
 * invalid UTF-8, special-looking text) with ids in range and valid UTF-8 out. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static void check(int ok) {
    if (!ok)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_tokenizer *t;
    tern_err *e = tern_tokenizer_load_hf_buf((const char *)data, size, NULL, 0, "fuzz.json", &t);
    if (e) {
        check(t == NULL && e->msg != NULL);
        tern_err_free(e);
        return 0;
    }
    static const char text[] = "Hello  world 123\n\n<s> <bos> a-b--c \xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80 \xff\xfe\x80 "
                               "\xe2\x96\x81x\tz";
    for (int flags = 0; flags < 4; flags++) {
        tern_tokens ids = {0};
        e = tern_tokenize(t, text, sizeof text - 1, flags & 1, flags >> 1, &ids);
        if (e) { /* only a regex engine failure may surface here; never a crash */
            tern_err_free(e);
            continue;
        }
        for (size_t i = 0; i < ids.n; i++)
            check(ids.ids[i] >= 0 && (size_t)ids.ids[i] < tern_tokenizer_vocab_size(t));
        char *out;
        size_t len;
        check(tern_detokenize(t, ids.ids, ids.n, flags & 1, &out, &len) == NULL);
        free(out);
        tern_tokens_free(&ids);
    }
    tern_tokenizer_free(t);
    return 0;
}
