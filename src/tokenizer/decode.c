/* decode.c — ids -> text. Each token becomes bytes on its own (its "piece": ▁ -> space, byte-level stand-ins
 * -> bytes, <0xXX> -> one byte, special tokens verbatim or dropped), then a small UTF-8 assembler releases only
 * complete characters: a character split over several byte-fallback tokens comes out when its last byte
 * arrives, and bytes that can never form a character become U+FFFD. Whole-sequence decoding is the stream
 * run to the end, so both always agree. */
#include <stdlib.h>
#include <string.h>

#include "core/sbuf.h"
#include "tokenizer/tok_internal.h"

struct tern_detok_stream {
    const tern_tokenizer *t;
    int render_special;
    int seen_text;               /* a non-special piece was produced (leading-space strip is done) */
    unsigned char pending[4];    /* the start of an unfinished character */
    size_t n_pending;
    sbuf piece;                  /* scratch: pending + this token's bytes */
    sbuf out;                    /* complete text returned to the caller */
};

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Appends the bytes of token `id` to b; *is_text says whether it counts as text (not a special token). */
static int append_piece(const tern_tokenizer *t, tern_token id, int render_special, sbuf *b, int *is_text) {
    const char *s = t->pool + t->text_off[id];
    size_t n = t->text_len[id];
    uint16_t a = t->attr[id];
    *is_text = 0;
    if (a & (TA_CONTROL | TA_UNKNOWN))
        return render_special ? sbuf_add(b, s, n) : 0;
    *is_text = 1;
    if (a & TA_USER)
        return sbuf_add(b, s, n);
    if ((a & TA_BYTE) && n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' && hexval(s[3]) >= 0 &&
        hexval(s[4]) >= 0) {
        unsigned char byte = (unsigned char)(hexval(s[3]) * 16 + hexval(s[4]));
        return sbuf_add(b, &byte, 1);
    }
    switch (t->piece) {
    case PIECE_RAW:
        return sbuf_add(b, s, n);
    case PIECE_METASPACE:
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                if (sbuf_add(b, " ", 1))
                    return -1;
                i += 3;
            } else {
                size_t k = 1;
                while (i + k < n && !(i + k + 3 <= n && !memcmp(s + i + k, "\xe2\x96\x81", 3)))
                    k++;
                if (sbuf_add(b, s + i, k))
                    return -1;
                i += k;
            }
        }
        return 0;
    case PIECE_BYTELEVEL:
        for (size_t i = 0; i < n;) {
            const unsigned char *u = (const unsigned char *)s + i;
            int k = tern_utf8_check(u, n - i);
            if (k <= 0) { /* not valid UTF-8 in the vocabulary: pass the byte through */
                if (sbuf_add(b, u, 1))
                    return -1;
                i++;
                continue;
            }
            const uint32_t cp = tern_utf8_cp(u, k);
            int byte = tok_bytelevel_byte(cp);
            if (byte >= 0) {
                unsigned char c = (unsigned char)byte;
                if (sbuf_add(b, &c, 1))
                    return -1;
            } else if (sbuf_add(b, u, (size_t)k)) {
                return -1;
            }
            i += (size_t)k;
        }
        return 0;
    }
    return 0;
}

tern_err *tern_detok_stream_new(const tern_tokenizer *t, int render_special, tern_detok_stream **out) {
    *out = calloc(1, sizeof **out);
    if (!*out)
        return tern_errf(TERN_ENOMEM, "out of memory");
    (*out)->t = t;
    (*out)->render_special = render_special;
    return NULL;
}

void tern_detok_stream_free(tern_detok_stream *s) {
    if (!s)
        return;
    free(s->piece.p);
    free(s->out.p);
    free(s);
}

static const char REPLACEMENT[3] = {(char)0xef, (char)0xbf, (char)0xbd}; /* U+FFFD */

tern_err *tern_detok_stream_push(tern_detok_stream *s, tern_token id, const char **text, size_t *len) {
    const tern_tokenizer *t = s->t;
    s->out.len = 0;
    *text = "";
    *len = 0;
    if (id < 0 || id >= t->n_vocab)
        return tern_errf(TERN_EINVAL, "token id %d out of range [0, %d)", (int)id, (int)t->n_vocab);
    s->piece.len = 0;
    int is_text;
    if (sbuf_add(&s->piece, s->pending, s->n_pending) || append_piece(t, id, s->render_special, &s->piece, &is_text))
        return tern_errf(TERN_ENOMEM, "out of memory");
    size_t i = 0;
    if (is_text && !s->seen_text) {
        s->seen_text = 1;
        if (t->strip_leading_space && s->piece.len > s->n_pending && s->piece.p[s->n_pending] == ' ') {
            memmove(s->piece.p + s->n_pending, s->piece.p + s->n_pending + 1, s->piece.len - s->n_pending - 1);
            s->piece.len--;
        }
    }
    const unsigned char *p = (const unsigned char *)s->piece.p;
    size_t n = s->piece.len, run = 0; /* p[run, i) is valid text not yet copied out */
    while (i < n) {
        int k = tern_utf8_check(p + i, n - i);
        if (k == 0)
            break; /* an unfinished character: wait for the next token */
        if (k < 0) {
            if (sbuf_add(&s->out, p + run, i - run) || sbuf_add(&s->out, REPLACEMENT, 3))
                return tern_errf(TERN_ENOMEM, "out of memory");
            run = i + (size_t)-k;
        }
        i += (size_t)(k > 0 ? k : -k);
    }
    if (sbuf_add(&s->out, p + run, i - run))
        return tern_errf(TERN_ENOMEM, "out of memory");
    s->n_pending = n - i; /* at most 3: tern_utf8_check returns 0 only for a valid prefix shorter than 4 */
    memcpy(s->pending, p + i, s->n_pending);
    *text = s->out.p ? s->out.p : "";
    *len = s->out.len;
    return NULL;
}

void tern_detok_stream_flush(tern_detok_stream *s, const char **text, size_t *len) {
    s->out.len = 0;
    if (s->n_pending && sbuf_add(&s->out, REPLACEMENT, 3))
        s->out.len = 0;
    s->n_pending = 0;
    s->seen_text = 0;
    *text = s->out.p ? s->out.p : "";
    *len = s->out.len;
}

tern_err *tern_detokenize(const tern_tokenizer *t, const tern_token *ids, size_t n, int render_special, char **out,
                          size_t *out_len) {
    *out = NULL;
    if (out_len)
        *out_len = 0;
    tern_detok_stream s = {.t = t, .render_special = render_special};
    sbuf all = {0};
    tern_err *e = NULL;
    if (sbuf_add(&all, "", 0))
        e = tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; !e && i < n; i++) {
        const char *txt;
        size_t len;
        e = tern_detok_stream_push(&s, ids[i], &txt, &len);
        if (!e && sbuf_add(&all, txt, len))
            e = tern_errf(TERN_ENOMEM, "out of memory");
    }
    if (!e) {
        const char *txt;
        size_t len;
        tern_detok_stream_flush(&s, &txt, &len);
        if (sbuf_add(&all, txt, len))
            e = tern_errf(TERN_ENOMEM, "out of memory");
    }
    free(s.piece.p);
    free(s.out.p);
    if (e) {
        free(all.p);
        return e;
    }
    *out = all.p;
    if (out_len)
        *out_len = all.len;
    return NULL;
}

char *tern_tokenizer_token_piece(const tern_tokenizer *t, tern_token id, size_t *len) {
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    sbuf b = {0};
    int is_text;
    if (sbuf_add(&b, "", 0) || append_piece(t, id, 1, &b, &is_text)) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.p;
}
