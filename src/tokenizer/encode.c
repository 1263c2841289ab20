/* encode.c — text -> ids: split out added/special tokens (leftmost, longest first), run each plain segment
 * through normalizers, pre-tokenizers and the model, and add the BOS/EOS the configuration asks for. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

tern_err *tern_tokens_push(tern_tokens *list, tern_token id) {
    if (list->n == list->cap) {
        size_t nc = list->cap ? list->cap * 2 : 64;
        tern_token *ni = realloc(list->ids, nc * sizeof *ni);
        if (!ni)
            return tern_errf(TERN_ENOMEM, "out of memory for %zu token ids", nc);
        list->ids = ni;
        list->cap = nc;
    }
    list->ids[list->n++] = id;
    return NULL;
}

void tern_tokens_free(tern_tokens *list) {
    free(list->ids);
    memset(list, 0, sizeof *list);
}

typedef struct enc_ctx {
    const tern_tokenizer *t;
    tok_work *work;
    tok_pieces pieces, scratch;
    tern_tokens *out;
} enc_ctx;

/* Runs one stretch of plain text (no added tokens in it) through the pipeline. */
static TERN_MUST_CHECK tern_err *encode_segment(enc_ctx *c, const char *s, size_t n, int first) {
    if (n == 0)
        return NULL;
    const tern_tokenizer *t = c->t;
    char *norm = NULL;
    size_t norm_len = n;
    if (t->n_norms) {
        TERN_TRY(tok_normalize(t, s, n, &norm, &norm_len));
        s = norm;
    }
    tern_err *e = tok_pretokenize(t, s, norm_len, first, &c->pieces, &c->scratch);
    for (size_t i = 0; !e && i < c->pieces.n; i++)
        e = tok_model_encode(t, c->work, c->pieces.buf + c->pieces.start[i], c->pieces.plen[i], c->out);
    free(norm);
    return e;
}

static int is_space(unsigned char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f'; }

/* The added token starting at text[pos], longest first; -1 if none may match here. */
static int32_t match_added(const tern_tokenizer *t, const char *text, size_t len, size_t pos, int parse_special,
                           size_t *mlen) {
    if (!t->added_first[(unsigned char)text[pos]])
        return -1;
    for (size_t k = 0; k < t->n_added_lens; k++) {
        size_t L = t->added_lens[k];
        if (L > len - pos)
            continue;
        int32_t id = tok_vocab_find(t, text + pos, L);
        if (id < 0)
            continue;
        uint16_t a = t->attr[id];
        if ((a & TA_USER) || (parse_special && (a & (TA_CONTROL | TA_UNKNOWN)))) {
            *mlen = L;
            return id;
        }
    }
    return -1;
}

static TERN_MUST_CHECK tern_err *encode_all(enc_ctx *c, const char *text, size_t len, int add_special, int parse_special) {
    const tern_tokenizer *t = c->t;
    if (add_special)
        for (size_t i = 0; i < t->n_prefix; i++)
            TERN_TRY(tern_tokens_push(c->out, t->prefix[i]));
    size_t seg = 0, pos = 0;
    while (pos < len) {
        size_t mlen;
        int32_t id = t->n_added_lens ? match_added(t, text, len, pos, parse_special, &mlen) : -1;
        if (id < 0) {
            pos++;
            continue;
        }
        size_t end = pos;
        if (t->attr[id] & TA_LSTRIP)
            while (end > seg && is_space((unsigned char)text[end - 1]))
                end--;
        TERN_TRY(encode_segment(c, text + seg, end - seg, seg == 0));
        TERN_TRY(tern_tokens_push(c->out, id));
        pos += mlen;
        if (t->attr[id] & TA_RSTRIP)
            while (pos < len && is_space((unsigned char)text[pos]))
                pos++;
        seg = pos;
    }
    TERN_TRY(encode_segment(c, text + seg, len - seg, seg == 0));
    if (add_special)
        for (size_t i = 0; i < t->n_suffix; i++)
            TERN_TRY(tern_tokens_push(c->out, t->suffix[i]));
    return NULL;
}

tern_err *tern_tokenize(const tern_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                        tern_tokens *out) {
    if (!t || !out || (!text && len))
        return tern_errf(TERN_EINVAL, "tern_tokenize: NULL argument");
    enc_ctx c = {t, tok_work_new(), {0}, {0}, out};
    if (!c.work)
        return tern_errf(TERN_ENOMEM, "out of memory");
    size_t start_n = out->n;
    tern_err *e = encode_all(&c, text ? text : "", len, add_special, parse_special);
    if (e)
        out->n = start_n; /* all or nothing */
    tok_work_free(c.work);
    tok_pieces_free(&c.pieces);
    tok_pieces_free(&c.scratch);
    return e;
}

tern_err *tern_pretokenize(const tern_tokenizer *t, const char *text, size_t len,
                           void (*piece)(void *ctx, const char *s, size_t n), void *ctx) {
    if (!t || !piece || (!text && len))
        return tern_errf(TERN_EINVAL, "tern_pretokenize: NULL argument");
    char *norm = NULL;
    size_t norm_len = len;
    if (t->n_norms && len)
        TERN_TRY(tok_normalize(t, text, len, &norm, &norm_len));
    tok_pieces pieces = {0}, scratch = {0};
    tern_err *e = len ? tok_pretokenize(t, norm ? norm : text, norm_len, 1, &pieces, &scratch) : NULL;
    for (size_t i = 0; !e && i < pieces.n; i++)
        piece(ctx, pieces.buf + pieces.start[i], pieces.plen[i]);
    free(norm);
    tok_pieces_free(&pieces);
    tok_pieces_free(&scratch);
    return e;
}
