/* fuzz_grammar.c — fuzz target for the GBNF compiler and the matcher: any text compiles or fails cleanly (no crash,
 * no out-of-bounds access, no leak, no endless expansion); a grammar that compiles is matched against the input's
 * own bytes, and its DFA builds masks over a small vocabulary made of pieces of the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/token_dfa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_grammar *g = NULL;
    tern_err *err = tern_grammar_compile((const char *)data, size, &g);
    if (err) {
        if (g)
            abort();
        tern_err_free(err);
        return 0;
    }
    tern_gstate s, tmp = {0};
    if ((err = tern_gstate_init(g, &s))) {
        tern_err_free(err);
        tern_grammar_free(g);
        return 0;
    }
    size_t n = size < 256 ? size : 256;
    if (tern_gstate_bytes(g, &s, data, n, &tmp) == 1 && s.n == 0)
        abort(); /* "every byte allowed" leaves a live state */
    (void)tern_gstate_complete(&s);
    (void)tern_grammar_min_bytes(g);
    /* A vocabulary of the input's 1- to 4-byte pieces, and one end token. */
    enum { V = 33 };
    const uint8_t *bytes[V];
    uint32_t lens[V];
    uint8_t eog[V] = {0};
    for (int i = 0; i < V - 1; i++) {
        size_t at = size ? (size_t)i * 7 % size : 0;
        bytes[i] = data + at;
        lens[i] = size ? (uint32_t)((size - at) < (size_t)(1 + i % 4) ? size - at : (size_t)(1 + i % 4)) : 0;
    }
    bytes[V - 1] = NULL, lens[V - 1] = 0, eog[V - 1] = 1;
    tern_gvocab *v = NULL;
    tern_gdfa *d = NULL;
    if (!tern_gvocab_new(V, bytes, lens, eog, &v) && !tern_gdfa_new(g, v, &d)) {
        uint64_t mask[1];
        int32_t st = tern_gdfa_start(d);
        for (int step = 0; step < 8 && st >= 0; step++) {
            if (tern_gdfa_mask(d, st, mask))
                break;
            int32_t pick = -1;
            for (int t = 0; t < V - 1 && pick < 0; t++)
                if (mask[0] >> ((t + step) % (V - 1)) & 1)
                    pick = (t + step) % (V - 1);
            if (pick < 0)
                break;
            st = tern_gdfa_token(d, st, pick);
            if (st == -2)
                abort(); /* the mask allowed it */
        }
    }
    tern_gdfa_free(d);
    tern_gvocab_free(v);
    tern_gstate_free(&s);
    tern_gstate_free(&tmp);
    tern_grammar_free(g);
    return 0;
}
