/* fuzz_prediction.c — fuzz target for OpenAI predicted outputs as a draft source (draft/prediction.c): the
 * prediction is whatever text a request sends, the output whatever the model writes, and the source follows one in
 * the other by bytes, substitutions, misses and rejoins. Gemma 4's vocabulary (the real one: byte fallback, long
 * pieces) splits the texts. Input: a settings byte (draft length 1..8; whether the output is a text the tokenizer
 * splits, as when the model writes what the tokenizer would, or raw token ids, as a model may write any token), the
 * prediction, 0x00, the output. The engine's part is played as the scheduler plays it: ask with the tokens so far,
 * keep the drafts that match the output and the output's next token, commit. Checked: every draft is at most the
 * length asked and only real token ids; a full-agreement output (the prediction itself, split by the tokenizer) is
 * drafted at least once whenever the prediction has more than one token. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draft/draft.h"
#include "tokenizer/tokenizer.h"

#define MAX_OUT 512

static tern_tokenizer *tok;
static tern_draft_source *src; /* one for the process, as an engine keeps its sources: its piece index is built once */

static void check(int ok) {
    if (!ok)
        __builtin_trap();
}

/* Drives one row through the whole output; the tokens the source drafted that the output kept. */
static int64_t run(tern_draft_source *s, const int32_t *pred, int64_t n_pred, const int32_t *out, int64_t n_out, int k) {
    int32_t toks[MAX_OUT + 1], draft[8];
    toks[0] = 2; /* the prompt: one token */
    if (s->vt->row_start(s, 0, pred, n_pred))
        return -1; /* out of memory */
    int64_t done = 0, kept = 0;
    while (done < n_out) {
        memcpy(toks + 1, out, sizeof *out * (size_t)done);
        tern_draft_ask a = {.row = 0, .toks = toks, .n_toks = 1 + done, .n_prompt = 1, .k = k, .out = draft};
        tern_err *e = s->vt->draft(s, &a, 1);
        if (e) {
            tern_err_free(e);
            a.n_out = 0;
        }
        check(a.n_out >= 0 && a.n_out <= k);
        int n = 0;
        for (int i = 0; i < a.n_out; i++)
            check(draft[i] >= 0 && (size_t)draft[i] < tern_tokenizer_vocab_size(tok));
        while (n < a.n_out && done + n < n_out && draft[n] == out[done + n])
            n++;
        kept += n;
        done += n + 1; /* the verification's own token comes with the kept drafts */
        if (done > n_out)
            done = n_out;
        s->vt->commit(s, 0, 1 + done);
    }
    s->vt->row_end(s, 0);
    return kept;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) {
        char path[4096];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gemma-4.gguf", TERN_TESTDATA_DIR);
        tern_err *e = tern_tokenizer_load(path, &tok);
        check(e == NULL);
        e = tern_draft_prediction_new(1, tok, &src);
        check(e == NULL);
    }
    if (size < 1)
        return 0;
    const int k = 1 + (data[0] & 7), raw_ids = data[0] >> 3 & 1;
    const char *body = (const char *)data + 1;
    const size_t n_body = size - 1;
    const char *sep = memchr(body, 0, n_body);
    const size_t n_text = sep ? (size_t)(sep - body) : n_body;
    const char *rest = sep ? sep + 1 : body + n_body;
    const size_t n_rest = n_body - n_text - (sep ? 1 : 0);

    tern_tokens pred = {0}, out = {0};
    tern_err *e = tern_tokenize(tok, body, n_text, 0, 0, &pred);
    if (!e && raw_ids) {
        for (size_t i = 0; !e && i + 3 <= n_rest && out.n < MAX_OUT; i += 3)
            e = tern_tokens_push(&out, (int32_t)(((uint32_t)(uint8_t)rest[i] << 16 | (uint32_t)(uint8_t)rest[i + 1] << 8 |
                                                  (uint8_t)rest[i + 2]) % (uint32_t)tern_tokenizer_vocab_size(tok)));
    } else if (!e) {
        e = tern_tokenize(tok, rest, n_rest, 0, 0, &out);
    }
    tern_draft_source *s = src;
    if (!e) {
        const int64_t n_out = (int64_t)out.n < MAX_OUT ? (int64_t)out.n : MAX_OUT;
        run(s, pred.ids, (int64_t)pred.n, out.ids, n_out, k);
        /* The prediction written out as it is: what it foretells is drafted. */
        const int64_t n_same = (int64_t)pred.n < MAX_OUT ? (int64_t)pred.n : MAX_OUT;
        const int64_t kept = run(s, pred.ids, (int64_t)pred.n, pred.ids, n_same, k);
        check(kept < 0 || n_same < 2 || kept > 0);
    }
    tern_err_free(e);
    tern_tokens_free(&pred);
    tern_tokens_free(&out);
    return 0;
}
