/* bpe.c — the models: turn one pre-token into ids.
 *
 * Both run the same loop over a linked list of symbols with a heap of candidate pairs, so a piece
 * of n symbols costs O(n log n), however long (a 1 MB line of Gemma text is a single piece):
 *   MODEL_BPE — merge the adjacent pair with the lowest merge rank, leftmost on ties (Hugging Face BPE,
 *               llama.cpp's BPE session); symbols are bytes (byte-level) or characters;
 *   MODEL_SPM — merge the adjacent pair whose concatenation is the token with the highest score, leftmost
 *               on ties (SentencePiece BPE as in llama.cpp's SPM session).
 * A stale heap entry is recognised on pop (a side was merged away or changed) and skipped. Symbols that
 * never became tokens fall back to <0xXX> byte tokens or to <unk>. */
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "tokenizer/tok_internal.h"

typedef struct sym {
    uint32_t b, n;      /* byte span in the piece; n == 0: merged away */
    int32_t id;         /* token id, -1 unknown */
    int32_t prev, next; /* neighbours, -1 at the ends */
} sym;

/* A candidate merge, 16 bytes so a heap of a million stays cache-friendly. The key orders candidates:
 * high 32 bits the priority (BPE rank, or the SPM score mapped to an order-preserving integer, lower is
 * better), low 32 bits the left symbol's index (leftmost wins ties). */
typedef struct cand {
    uint64_t key;
    int32_t right;
    uint32_t right_end; /* end offset of the right symbol when pushed: it changes if that symbol grows */
} cand;

struct tok_work {
    sym *syms;
    size_t cap_syms;
    cand *heap;         /* 4-ary min-heap: shallower than binary, children share cache lines */
    size_t n_heap, cap_heap;
    char *text;         /* byte-level stand-in text for whole-piece lookups */
    size_t cap_text;
};

tok_work *tok_work_new(void) { return calloc(1, sizeof(tok_work)); }

void tok_work_free(tok_work *w) {
    if (!w)
        return;
    free(w->syms);
    free(w->heap);
    free(w->text);
    free(w);
}

static TERN_MUST_CHECK tern_err *heap_push(tok_work *w, cand c) {
    if (w->n_heap == w->cap_heap) {
        size_t nc = w->cap_heap ? w->cap_heap * 2 : 256;
        cand *nh = realloc(w->heap, nc * sizeof *nh);
        if (!nh)
            return tern_errf(TERN_ENOMEM, "out of memory");
        w->heap = nh;
        w->cap_heap = nc;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (c.key >= w->heap[p].key)
            break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
    return NULL;
}

static cand heap_pop(tok_work *w) {
    cand top = w->heap[0];
    cand last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t first = 4 * i + 1, m = i;
        uint64_t best = last.key;
        for (size_t c = first; c < first + 4 && c < n; c++)
            if (w->heap[c].key < best) {
                best = w->heap[c].key;
                m = c;
            }
        if (m == i)
            break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

/* Maps a score to a 32-bit integer that sorts the higher score first. */
static uint32_t score_key(float score) {
    uint32_t u;
    memcpy(&u, &score, 4);
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u; /* order-preserving: higher score -> larger u */
    return ~u;                                     /* ... and the heap wants the best smallest */
}

/* The merged id for the adjacent pair (L, R), or -1; *prio receives its priority. */
static int32_t pair_result(const tern_tokenizer *t, const char *s, const sym *L, const sym *R, uint32_t *prio) {
    if (t->model == MODEL_BPE) {
        int32_t res;
        int32_t rank = tok_merges_find(t, L->id, R->id, &res);
        if (rank < 0)
            return -1;
        *prio = (uint32_t)rank;
        return res;
    }
    int32_t id = tok_vocab_find(t, s + L->b, (size_t)L->n + R->n);
    if (id >= 0)
        *prio = t->score ? score_key(t->score[id]) : 0;
    return id;
}

/* Pushes the candidate for the pair (l, r) if the model has one. */
static TERN_MUST_CHECK tern_err *try_pair(const tern_tokenizer *t, tok_work *w, const char *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0)
        return NULL;
    const sym *L = &w->syms[l], *R = &w->syms[r];
    uint32_t prio;
    if (pair_result(t, s, L, R, &prio) < 0)
        return NULL;
    cand c = {(uint64_t)prio << 32 | (uint32_t)l, r, R->b + R->n};
    return heap_push(w, c);
}

/* A popped candidate is out of date if either side was merged away, they are no longer neighbours, or the
 * right side grew (the left side only changes by absorbing its right neighbour, which kills that one). */
static int stale(const tok_work *w, const cand *c, int32_t left) {
    const sym *L = &w->syms[left], *R = &w->syms[c->right];
    return L->n == 0 || R->n == 0 || L->next != c->right || R->b + R->n != c->right_end;
}

/* Emits the ids of an unknown symbol: byte tokens, or <unk> (fused with a preceding <unk> when asked). */
static TERN_MUST_CHECK tern_err *emit_unknown(const tern_tokenizer *t, const unsigned char *p, size_t n, int *prev_unk,
                              tern_tokens *out) {
    if (t->byte_fallback) {
        int all = 1;
        for (size_t i = 0; i < n; i++)
            all &= t->byte_id[p[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < n; i++)
                TERN_TRY(tern_tokens_push(out, t->byte_id[p[i]]));
            *prev_unk = 0;
            return NULL;
        }
    }
    if (t->unk < 0)
        return NULL; /* nothing to stand for it: dropped, as llama.cpp does */
    if (!(t->fuse_unk && *prev_unk))
        TERN_TRY(tern_tokens_push(out, t->unk));
    *prev_unk = 1;
    return NULL;
}

/* Runs the merge loop over one chunk of a piece; prev_unk carries <unk> fusing across chunks. */
static TERN_MUST_CHECK tern_err *encode_chunk(const tern_tokenizer *t, tok_work *w, const char *s, size_t n, int *prev_unk,
                              tern_tokens *out) {
    const unsigned char *u = (const unsigned char *)s;
    /* Initial symbols: bytes (byte-level) or UTF-8 characters (a stray byte is a symbol of its own). */
    if (n > INT32_MAX)
        return tern_errf(TERN_EINVAL, "piece of %zu bytes is too long", n);
    if (w->cap_syms < n) {
        sym *ns = realloc(w->syms, n * sizeof *ns);
        if (!ns)
            return tern_errf(TERN_ENOMEM, "out of memory for %zu symbols", n);
        w->syms = ns;
        w->cap_syms = n;
    }
    int32_t count = 0;
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        int32_t id;
        if (t->byte_level) {
            id = t->bytelevel_id[u[i]];
        } else {
            int k = tern_utf8_check(u + i, n - i);
            len = k > 0 ? (size_t)k : 1;
            id = tok_vocab_find(t, s + i, len);
        }
        w->syms[count] = (sym){(uint32_t)i, (uint32_t)len, id, count - 1, -1};
        if (count > 0)
            w->syms[count - 1].next = count;
        count++;
        i += len;
    }

    w->n_heap = 0;
    for (int32_t i = 0; i + 1 < count; i++)
        TERN_TRY(try_pair(t, w, s, i, i + 1));
    while (w->n_heap) {
        cand c = heap_pop(w);
        int32_t left = (int32_t)(uint32_t)c.key;
        if (stale(w, &c, left))
            continue;
        sym *L = &w->syms[left], *R = &w->syms[c.right];
        uint32_t prio;
        int32_t result = pair_result(t, s, L, R, &prio);
        if (result < 0)
            continue; /* cannot happen for a current candidate; kept so a bug cannot corrupt the list */
        L->n += R->n;
        L->id = result;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0)
            w->syms[R->next].prev = left;
        TERN_TRY(try_pair(t, w, s, L->prev, left));
        TERN_TRY(try_pair(t, w, s, left, L->next));
    }

    for (int32_t i = 0; i >= 0 && i < count; i = w->syms[i].next) {
        const sym *x = &w->syms[i];
        if (x->id >= 0) {
            TERN_TRY(tern_tokens_push(out, x->id));
            *prev_unk = 0;
        } else {
            TERN_TRY(emit_unknown(t, u + x->b, x->n, prev_unk, out));
        }
    }
    return NULL;
}

/* Whether a chunk may end just before the ▁ at s[i] (prev = start of the character before it). */
static int may_cut(const tern_tokenizer *t, const unsigned char *s, size_t prev, size_t i) {
    int k = tern_utf8_check(s + prev, i - prev);
    if (k <= 0 || (size_t)k != i - prev)
        return 0;
    const uint32_t cp = tern_utf8_cp(s + prev, k);
    if (cp == 0x2581)
        return 0; /* inside a run of ▁: runs merge into multi-space tokens */
    size_t lo = 0, hi = t->n_no_split_after;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->no_split_after[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return !(lo < t->n_no_split_after && t->no_split_after[lo] == cp);
}

tern_err *tok_model_encode(const tern_tokenizer *t, tok_work *w, const char *s, size_t n, tern_tokens *out) {
    if (n == 0)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    if (t->ignore_merges || t->newline_whole) {
        int32_t id = -1;
        if (t->byte_level && t->ignore_merges) {
            if (n > (SIZE_MAX - 1) / 4)
                return tern_errf(TERN_EINVAL, "piece too long");
            if (w->cap_text < n * 4) {
                char *nt = realloc(w->text, n * 4);
                if (!nt)
                    return tern_errf(TERN_ENOMEM, "out of memory");
                w->text = nt;
                w->cap_text = n * 4;
            }
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                m += tern_utf8_put(tok_bytelevel_cp(u[i]), w->text + m);
            id = tok_vocab_find(t, w->text, m);
        } else if (t->ignore_merges) {
            id = tok_vocab_find(t, s, n);
        } else {
            size_t k = 0;
            while (k < n && s[k] == '\n')
                k++;
            if (k == n)
                id = tok_vocab_find(t, s, n);
        }
        /* Only a plain vocabulary entry: special text must not slip in through a whole-piece lookup. */
        if (id >= 0 && !(t->attr[id] & (TA_CONTROL | TA_UNKNOWN)))
            return tern_tokens_push(out, id);
    }

    int prev_unk = 0;
    if (!t->space_split)
        return encode_chunk(t, w, s, n, &prev_unk, out);
    size_t begin = 0, prev = 0;
    for (size_t i = 0; i < n;) {
        int k = tern_utf8_check(u + i, n - i);
        size_t len = k > 0 ? (size_t)k : 1;
        if (i > begin && len == 3 && !memcmp(s + i, "\xe2\x96\x81", 3) && may_cut(t, u, prev, i)) {
            TERN_TRY(encode_chunk(t, w, s + begin, i - begin, &prev_unk, out));
            begin = i;
        }
        prev = i;
        i += len;
    }
    return encode_chunk(t, w, s + begin, n - begin, &prev_unk, out);
}
