/* prediction.c — OpenAI's predicted outputs: the request says what it expects the output to be (a file being
 * edited, say), and the source proposes the prediction's tokens from where the output has got to.
 *
 * Where the output stands is followed in the prediction's text, not in its tokens: the model may split the same
 * text into other tokens than the prediction's tokenization did (common with sampled or unusual text), and a token
 * count would then drift for the rest of the prediction. Each output token's bytes are matched at the current
 * byte offset (a lone byte also matches the U+FFFD it turns into in text); a token that does not match is taken
 * as a substitution of the prediction's token there (drafting goes on right after it, while such guesses have
 * lately been right); after two misses in a row (text inserted, left out or rewritten) the row drafts nothing
 * until it knows where it stands again — the longest ending of the output's last bytes found in the prediction
 * (first near where it was, 6 bytes at least), or, for words changed in place, the output's last word found as
 * many words on in the prediction as the output has written since they parted: a guessed draft costs a
 * verification step for nothing. The draft is the prediction's own tokens from the next token boundary; when the
 * output stands inside one of the prediction's tokens, the rest of that token's text is tokenized on its own
 * first, so a different split costs one token, not the rest of the prediction.
 *
 * Where the model keeps splitting the text otherwise than the tokenizer does (a model that writes whole tokens
 * the merges never build), the draft is the text cut into the longest vocabulary pieces instead: each row scores
 * both splits against the output tokens that began at one of the prediction's token boundaries and drafts with
 * the one that has been right more often lately (the tokenizer's at first, the one in use on a tie). */
#include <stdlib.h>
#include <string.h>

#include "draft/draft.h"
#include "tokenizer/piece_index.h"
#include "tokenizer/tokenizer.h"

/* Output bytes looked for when rejoining: enough to place a repeated phrase, few enough to rejoin soon. */
#define REJOIN_BYTES 16
#define REJOIN_MIN 6
/* How far back before the current offset a rejoin looks first (so repeated lines are walked in order). */
#define REJOIN_BACK 256
/* A split's score: SPLIT_HIT added for each output token it foretold, 1/SPLIT_DECAY of it lost per token. */
#define SPLIT_HIT 64
#define SPLIT_DECAY 8
/* Output bytes kept since it left the prediction, to place it by words. */
#define LOST_BYTES 256

typedef struct pred_row {
    int32_t *toks;
    int64_t n;
    char *text;     /* the prediction's bytes: token i is text[off[i], off[i + 1]) */
    int64_t *off;   /* [n + 1] */
    int64_t pos;    /* the output so far corresponds to text[0, pos) */
    int64_t seen;   /* output tokens accounted for */
    int misses;     /* output tokens in a row that did not match */
    char tail[REJOIN_BYTES];
    int tail_len;
    int fit_tok, fit_longest; /* how well each split has foretold the output lately */
    int longest;              /* drafting the longest pieces (until the tokenizer's split does better) */
    int guesses;              /* how the substitution guesses have fared lately: > 0 right, < 0 wrong */
    int64_t left_at;          /* while misses > 0: the prediction's byte where the output left it */
    char lost[LOST_BYTES];    /* the output's bytes since then */
    int lost_len;             /* > LOST_BYTES: more than that */
} pred_row;

typedef struct prediction {
    tern_draft_source base;
    const tern_tokenizer *tok;
    tern_piece_index *pieces; /* made with the first prediction */
    int rows;
    pred_row *r;
} prediction;

static void row_clear(pred_row *r) {
    free(r->toks);
    free(r->text);
    free(r->off);
    memset(r, 0, sizeof *r);
}

static TERN_MUST_CHECK tern_err *row_start(tern_draft_source *s, int row, const int32_t *pred, int64_t n_pred) {
    prediction *p = (prediction *)s;
    pred_row *r = &p->r[row];
    row_clear(r);
    if (n_pred <= 0)
        return NULL;
    if (!p->pieces)
        TERN_TRY(tern_piece_index_new(p->tok, &p->pieces));
    r->toks = malloc((size_t)n_pred * sizeof *r->toks);
    r->off = malloc((size_t)(n_pred + 1) * sizeof *r->off);
    size_t cap = 64, len = 0;
    r->text = malloc(cap);
    tern_err *err = r->toks && r->off && r->text ? NULL : tern_errf(TERN_ENOMEM, "out of memory for a prediction");
    for (int64_t i = 0; !err && i < n_pred; i++) {
        size_t n = 0;
        char *piece = tern_tokenizer_token_piece(p->tok, pred[i], &n);
        if (!piece) {
            err = tern_errf(TERN_EINVAL, "prediction token %lld (id %d) has no text", (long long)i, pred[i]);
            break;
        }
        if (len + n + 1 > cap) {
            while (len + n + 1 > cap)
                cap *= 2;
            char *t = realloc(r->text, cap);
            if (!t)
                err = tern_errf(TERN_ENOMEM, "out of memory for a prediction");
            else
                r->text = t;
        }
        if (!err) {
            r->off[i] = (int64_t)len;
            memcpy(r->text + len, piece, n);
            len += n;
        }
        free(piece);
    }
    if (err) {
        row_clear(r);
        return err;
    }
    memcpy(r->toks, pred, (size_t)n_pred * sizeof *r->toks);
    r->off[n_pred] = (int64_t)len;
    r->n = n_pred;
    return NULL;
}

/* The index of the first token starting at or after byte b (n when none). */
static int64_t boundary_at_or_after(const pred_row *r, int64_t b) {
    int64_t lo = 0, hi = r->n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (r->off[mid] < b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void remember(pred_row *r, const char *piece, size_t n) {
    if (n >= REJOIN_BYTES) {
        memcpy(r->tail, piece + n - REJOIN_BYTES, REJOIN_BYTES);
        r->tail_len = REJOIN_BYTES;
        return;
    }
    int keep = r->tail_len + (int)n > REJOIN_BYTES ? REJOIN_BYTES - (int)n : r->tail_len;
    memmove(r->tail, r->tail + r->tail_len - keep, (size_t)keep);
    memcpy(r->tail + keep, piece, n);
    r->tail_len = keep + (int)n;
}

/* Scores the two splits on output token `id`, which matched the text at r->pos. */
static void score_splits(const prediction *p, pred_row *r, int32_t id) {
    const int64_t j = boundary_at_or_after(r, r->pos);
    if (j >= r->n || r->off[j] != r->pos)
        return; /* inside a prediction token: the output already split it otherwise */
    size_t n = 0;
    const int32_t longest = tern_piece_index_longest(p->pieces, r->text + r->pos, (size_t)(r->off[r->n] - r->pos), &n);
    r->fit_tok += (r->toks[j] == id ? SPLIT_HIT : 0) - r->fit_tok / SPLIT_DECAY;
    r->fit_longest += (longest == id ? SPLIT_HIT : 0) - r->fit_longest / SPLIT_DECAY;
    if (r->fit_tok != r->fit_longest) /* a tie (both right) keeps the split in use */
        r->longest = r->fit_longest > r->fit_tok;
}

/* The output matched the text at pos for n bytes. */
static void matched(pred_row *r, int64_t n) {
    if (r->misses == 1) /* the substitution guessed after the miss was right */
        r->guesses += SPLIT_HIT - r->guesses / SPLIT_DECAY;
    r->pos += n;
    r->misses = 0;
}

/* Moves r->pos past one output token's bytes. */
static void follow(const prediction *p, pred_row *r, int32_t id, const char *piece, size_t n) {
    const int64_t len = r->off[r->n];
    remember(r, piece, n);
    if (r->pos + (int64_t)n <= len && !memcmp(r->text + r->pos, piece, n)) {
        score_splits(p, r, id);
        matched(r, (int64_t)n);
        return;
    }
    /* A lone byte of a character the output never completed comes back from the API as U+FFFD, and so it
     * stands in a prediction made from that output. */
    static const char replacement[3] = {(char)0xef, (char)0xbf, (char)0xbd};
    if (n == 1 && (unsigned char)piece[0] >= 0x80 && r->pos + 3 <= len && !memcmp(r->text + r->pos, replacement, 3)) {
        matched(r, 3);
        return;
    }
    if (r->misses == 1) /* the substitution guessed after the last miss was wrong */
        r->guesses += -SPLIT_HIT - r->guesses / SPLIT_DECAY;
    if (!r->misses) {
        r->left_at = r->pos;
        r->lost_len = 0;
    }
    if (r->lost_len + (int64_t)n <= LOST_BYTES) {
        memcpy(r->lost + r->lost_len, piece, n);
        r->lost_len += (int)n;
    } else {
        r->lost_len = LOST_BYTES + 1;
    }
    r->misses++;
    /* A substitution: past the prediction's token that starts (or stands) here. */
    int64_t j = boundary_at_or_after(r, r->pos + 1);
    r->pos = r->off[j];
}

/* After misses in a row: where the output's last bytes are found again (near pos first, then anywhere), the
 * longest ending of them first: right after an edited stretch only its last few bytes are the prediction's. */
static void rejoin(pred_row *r) {
    const int64_t len = r->off[r->n];
    const int64_t starts[2] = {r->pos > REJOIN_BACK ? r->pos - REJOIN_BACK : 0, 0};
    for (int want = r->tail_len; want >= REJOIN_MIN; want--) {
        const char *tail = r->tail + r->tail_len - want;
        for (int t = 0; t < 2; t++) {
            const char *hit = memmem(r->text + starts[t], (size_t)(len - starts[t]), tail, (size_t)want);
            if (hit) {
                r->pos = (int64_t)(hit - r->text) + want;
                r->misses = 0;
                return;
            }
        }
    }
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* After misses in a row, when the rewritten stretch was words changed in place (the usual edit): the output's
 * last word equals the prediction's word as many words on from where the output left it, and so the output
 * stands right after that word. Checked on the text alone, so a short word is enough and no draft is risked. */
static void rejoin_by_words(pred_row *r) {
    if (r->lost_len > LOST_BYTES || !r->lost_len || is_space(r->lost[r->lost_len - 1]))
        return;
    int words = 0, last = 0; /* the output's words since it left, and where its last one starts */
    for (int i = 0; i < r->lost_len; i++)
        if (!is_space(r->lost[i]) && (!i || is_space(r->lost[i - 1]))) {
            words++;
            last = i;
        }
    if (words < 2) /* the first is the word that parted */
        return;
    const char *p = r->text;
    const int64_t len = r->off[r->n];
    int64_t at = r->left_at, start = at;
    /* A word the output left in the middle: its ending, if any, stands for the prediction's ending of it. */
    while (at < len && !is_space(p[at]))
        at++;
    for (int w = !is_space(r->lost[0]); w < words; w++) {
        while (at < len && is_space(p[at]))
            at++;
        start = at;
        while (at < len && !is_space(p[at]))
            at++;
    }
    const int64_t n = r->lost_len - last;
    if (at - start == n && !memcmp(p + start, r->lost + last, (size_t)n)) {
        r->pos = at;
        r->misses = 0;
    }
}

static TERN_MUST_CHECK tern_err *draft(tern_draft_source *s, tern_draft_ask *asks, int n) {
    prediction *p = (prediction *)s;
    for (int i = 0; i < n; i++) {
        tern_draft_ask *a = &asks[i];
        pred_row *r = &p->r[a->row];
        a->n_out = 0;
        const int64_t n_out = a->n_toks - a->n_prompt; /* the output so far, the fed token last */
        if (!r->n || n_out <= 0)
            continue;
        const int32_t *out = a->toks + a->n_prompt;
        if (n_out < r->seen) /* the row went back (cannot happen today): start over */
            r->pos = r->seen = r->misses = r->tail_len = r->fit_tok = r->fit_longest = r->longest = r->guesses = 0;
        for (int64_t t = r->seen; t < n_out; t++) {
            size_t len = 0;
            char *piece = tern_tokenizer_token_piece(p->tok, out[t], &len);
            if (!piece)
                return tern_errf(TERN_ENOMEM, "out of memory following a prediction");
            follow(p, r, out[t], piece, len);
            free(piece);
        }
        r->seen = n_out;
        if (r->misses >= 2)
            rejoin(r);
        if (r->misses >= 2)
            rejoin_by_words(r);
        /* Lost in the prediction, or after a miss where guessing a substitution has lately been wrong (an edited
         * stretch, not a token swapped): a draft would be a guess, and verifying it costs more than a plain step. */
        if (r->misses >= 2 || (r->misses == 1 && r->guesses < 0))
            continue;
        if (r->longest) { /* the model has been writing the longest pieces */
            const int64_t len = r->off[r->n];
            for (int64_t at = r->pos; at < len && a->n_out < a->k;) {
                size_t n = 0;
                const int32_t id = tern_piece_index_longest(p->pieces, r->text + at, (size_t)(len - at), &n);
                if (id == TERN_TOKEN_NONE)
                    break;
                a->out[a->n_out++] = id;
                at += (int64_t)n;
            }
            continue;
        }
        int64_t j = boundary_at_or_after(r, r->pos);
        if (j < r->n && r->off[j] > r->pos) {
            /* Inside one of the prediction's tokens: the rest of its text, tokenized on its own. */
            tern_tokens bridge = {0};
            tern_err *err = tern_tokenize(p->tok, r->text + r->pos, (size_t)(r->off[j] - r->pos), 0, 0, &bridge);
            if (err) { /* bytes that do not tokenize alone (a split character): no draft this step */
                tern_err_free(err);
                tern_tokens_free(&bridge);
                continue;
            }
            for (size_t b = 0; b < bridge.n && a->n_out < a->k; b++)
                a->out[a->n_out++] = bridge.ids[b];
            tern_tokens_free(&bridge);
        }
        while (j < r->n && a->n_out < a->k)
            a->out[a->n_out++] = r->toks[j++];
    }
    return NULL;
}

static void commit(tern_draft_source *s, int row, int64_t n_toks) { (void)s, (void)row, (void)n_toks; }

static void row_end(tern_draft_source *s, int row) { row_clear(&((prediction *)s)->r[row]); }

static void source_free(tern_draft_source *s) {
    prediction *p = (prediction *)s;
    for (int i = 0; i < p->rows; i++)
        row_clear(&p->r[i]);
    tern_piece_index_free(p->pieces);
    free(p->r);
    free(p);
}

static const tern_draft_vt vt = {"prediction", row_start, draft, commit, row_end, source_free};

tern_err *tern_draft_prediction_new(int rows, const tern_tokenizer *tok, tern_draft_source **out) {
    prediction *p = calloc(1, sizeof *p);
    if (!p || !(p->r = calloc((size_t)rows, sizeof *p->r))) {
        free(p);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    p->base = (tern_draft_source){&vt, TERN_DRAFT_PREDICTION, 0, 0};
    p->tok = tok;
    p->rows = rows;
    *out = &p->base;
    return NULL;
}
