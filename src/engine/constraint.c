/* constraint.c — the engine's grammars: the vocabulary as bytes (built once, the first time a request asks for a
 * grammar), compiled grammars cached by their text so the requests of one schema share one DFA and its masks, and
 * applying a state's mask to a row's logits (see engine_internal.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "engine/engine_internal.h"

#define MAX_CACHED 16 /* compiled grammars kept */

static TERN_MUST_CHECK tern_err *vocab_for(tern_engine *e, int special, tern_gvocab **out) {
    if (e->gvocab[special]) {
        *out = e->gvocab[special];
        return NULL;
    }
    const tern_tokenizer *tok = e->model->tok;
    const size_t V = (size_t)e->vocab, nt = tern_tokenizer_vocab_size(tok);
    uint8_t **bytes = calloc(V, sizeof *bytes), *eog = calloc(V, 1);
    uint32_t *lens = calloc(V, sizeof *lens);
    tern_err *err = bytes && eog && lens ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t t = 0; !err && t < V && t < nt; t++) {
        eog[t] = (uint8_t)tern_model_is_eog(e->model, (int32_t)t);
        /* A plain grammar shapes the reply's text, and an added token is markup the reply parser reads (a
         * "<|channel>" inside a JSON string would split the reply) or that ends generation ("<|tool_response>"). */
        if (eog[t] || (!special && tern_tokenizer_is_added(tok, (tern_token)t)))
            continue;
        size_t len = 0;
        bytes[t] = (uint8_t *)tern_tokenizer_token_piece(tok, (tern_token)t, &len);
        lens[t] = bytes[t] ? (uint32_t)len : 0;
    }
    if (!err)
        err = tern_gvocab_new(V, (const uint8_t *const *)bytes, lens, eog, &e->gvocab[special]);
    for (size_t t = 0; bytes && t < V; t++)
        free(bytes[t]);
    free(bytes), free(eog), free(lens);
    *out = e->gvocab[special];
    return err;
}

static void grammar_free(eng_grammar *g) {
    free(g->text);
    tern_gdfa_free(g->dfa);
    tern_grammar_free(g->g);
    free(g);
}

void constraint_release(eng_grammar *g) {
    if (g && atomic_fetch_sub(&g->refs, 1) == 1)
        grammar_free(g);
}

tern_err *constraint_acquire(tern_engine *e, const char *text, size_t len, int special, eng_grammar **out) {
    *out = NULL;
    const uint64_t key = tern_hash64(text, len, special ? 0x5350454349414cull : 0x504c41494eull);
    pthread_mutex_lock(&e->gram_mu);
    eng_grammar *g = e->grammars;
    while (g && !(g->key == key && g->len == len && g->special == special && !memcmp(g->text, text, len)))
        g = g->next;
    tern_err *err = NULL;
    if (!g) {
        tern_gvocab *v = NULL;
        double t0 = tern_now_s();
        g = calloc(1, sizeof *g);
        err = g && (g->text = malloc(len ? len : 1)) ? vocab_for(e, special, &v)
                                                     : tern_errf(TERN_ENOMEM, "out of memory");
        if (!err)
            err = tern_grammar_compile(text, len, &g->g);
        if (!err)
            err = tern_gdfa_new(g->g, v, &g->dfa);
        if (err) {
            if (g)
                grammar_free(g);
            pthread_mutex_unlock(&e->gram_mu);
            return err;
        }
        g->key = key;
        memcpy(g->text, text, len);
        g->len = len;
        g->special = special;
        uint64_t bytes = tern_grammar_min_bytes(g->g), L = tern_gvocab_max_len(v) ? tern_gvocab_max_len(v) : 1;
        if (bytes == UINT64_MAX) {
            grammar_free(g);
            pthread_mutex_unlock(&e->gram_mu);
            return tern_errf(TERN_EINVAL, "grammar: it accepts no text at all (every rule needs itself)");
        }
        g->min_tokens = (bytes + L - 1) / L;
        atomic_init(&g->refs, 1); /* the cache's */
        g->next = e->grammars;
        e->grammars = g;
        TLOG_DEBUG("engine: grammar of %zu bytes compiled in %.1f ms", len, (tern_now_s() - t0) * 1e3);
        /* Past the cap, the least recently used one leaves the cache (requests using it keep it alive). */
        size_t n = 0;
        eng_grammar *oldest = NULL, **oldest_pp = NULL;
        for (eng_grammar **q = &e->grammars; *q; q = &(*q)->next, n++)
            if (*q != g && (!oldest || (*q)->used < oldest->used))
                oldest = *q, oldest_pp = q;
        if (n > MAX_CACHED && oldest) {
            *oldest_pp = oldest->next;
            constraint_release(oldest);
        }
    }
    g->used = tern_now_s();
    atomic_fetch_add(&g->refs, 1);
    pthread_mutex_unlock(&e->gram_mu);
    *out = g;
    return NULL;
}

void constraint_destroy(tern_engine *e) {
    while (e->grammars) {
        eng_grammar *g = e->grammars;
        e->grammars = g->next;
        constraint_release(g);
    }
    tern_gvocab_free(e->gvocab[0]);
    tern_gvocab_free(e->gvocab[1]);
    e->gvocab[0] = e->gvocab[1] = NULL;
}

const char *constraint_mask(eng_grammar *g, int32_t state, float *logits, int64_t vocab, uint64_t *scratch) {
    if (tern_gdfa_mask(g->dfa, state, scratch))
        return "the grammar needs more states than the matcher keeps (simplify the schema or grammar)";
    int any = 0;
    for (int64_t w = 0; w < (vocab + 63) / 64; w++) {
        uint64_t m = scratch[w];
        any |= m != 0;
        if (m == ~0ull)
            continue;
        int64_t base = w * 64, end = base + 64 < vocab ? base + 64 : vocab;
        for (int64_t t = base; t < end; t++)
            if (!(m >> (t - base) & 1))
                logits[t] = -INFINITY;
    }
    return any ? NULL : "the grammar allows no token of this vocabulary here";
}
