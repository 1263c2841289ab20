/* piece_index.c — an open-addressing table of token ids keyed by their pieces' bytes (see piece_index.h); a lookup
 * tries the lengths pieces have, longest first. */
#include "tokenizer/piece_index.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "tokenizer/tok_internal.h"

#define MAX_PIECE 256 /* longer pieces (none in the vocabularies tern reads) are left out */

struct tern_piece_index {
    char *bytes;      /* every piece, one after the other */
    uint32_t *start;  /* [vocab + 1]: token i's piece is bytes[start[i], start[i + 1]) */
    int32_t *slot;    /* [cap] token ids, -1 empty */
    size_t cap;
    uint8_t has_len[MAX_PIECE + 1]; /* 1 if some piece has this length */
    size_t max_len;
};

static size_t piece_len(const tern_piece_index *x, int32_t id) { return x->start[id + 1] - x->start[id]; }

/* The slot holding a piece equal to s[0, n), or the empty slot where it would go. */
static size_t find(const tern_piece_index *x, const char *s, size_t n) {
    const size_t mask = x->cap - 1;
    for (size_t i = (size_t)tern_hash64(s, n, 0) & mask;; i = (i + 1) & mask) {
        int32_t id = x->slot[i];
        if (id < 0 || (piece_len(x, id) == n && !memcmp(x->bytes + x->start[id], s, n)))
            return i;
    }
}

tern_err *tern_piece_index_new(const tern_tokenizer *t, tern_piece_index **out) {
    *out = NULL;
    const size_t vocab = tern_tokenizer_vocab_size(t);
    if (vocab == 0 || vocab > INT32_MAX / 2)
        return tern_errf(TERN_EINVAL, "a vocabulary of %zu tokens cannot be indexed by piece", vocab);
    tern_piece_index *x = calloc(1, sizeof *x);
    size_t cap = 1024;
    while (cap < 2 * vocab)
        cap *= 2;
    size_t used = 0, room = vocab * 8;
    if (x) {
        x->start = malloc((vocab + 1) * sizeof *x->start);
        x->slot = malloc(cap * sizeof *x->slot);
        x->bytes = malloc(room);
        x->cap = cap;
    }
    if (!x || !x->start || !x->slot || !x->bytes) {
        tern_piece_index_free(x);
        return tern_errf(TERN_ENOMEM, "out of memory indexing the vocabulary");
    }
    memset(x->slot, 0xff, cap * sizeof *x->slot);
    for (size_t id = 0; id < vocab; id++) {
        x->start[id] = (uint32_t)used;
        size_t n = 0;
        char *p = tern_tokenizer_is_special(t, (tern_token)id) ? NULL : tern_tokenizer_token_piece(t, (tern_token)id, &n);
        if (!p || n == 0 || n > MAX_PIECE || used + n > UINT32_MAX) {
            free(p);
            continue;
        }
        if (used + n > room) {
            while (used + n > room)
                room *= 2;
            char *b = realloc(x->bytes, room);
            if (!b) {
                free(p);
                tern_piece_index_free(x);
                return tern_errf(TERN_ENOMEM, "out of memory indexing the vocabulary");
            }
            x->bytes = b;
        }
        memcpy(x->bytes + used, p, n);
        free(p);
        x->start[id] = (uint32_t)used;
        used += n;
        x->start[id + 1] = (uint32_t)used;
        int32_t *slot = &x->slot[find(x, x->bytes + x->start[id], n)];
        /* a byte-fallback token (<0xXX>) only for a piece no other token has: the tokenizer writes it only so */
        if (*slot < 0 || ((t->attr[*slot] & TA_BYTE) && !(t->attr[id] & TA_BYTE)))
            *slot = (int32_t)id;
        x->has_len[n] = 1;
        x->max_len = n > x->max_len ? n : x->max_len;
    }
    x->start[vocab] = (uint32_t)used;
    *out = x;
    return NULL;
}

tern_token tern_piece_index_longest(const tern_piece_index *x, const char *s, size_t n, size_t *len) {
    for (size_t l = n < x->max_len ? n : x->max_len; l > 0; l--) {
        if (!x->has_len[l])
            continue;
        int32_t id = x->slot[find(x, s, l)];
        if (id >= 0) {
            *len = l;
            return id;
        }
    }
    *len = 0;
    return TERN_TOKEN_NONE;
}

void tern_piece_index_free(tern_piece_index *x) {
    if (!x)
        return;
    free(x->bytes);
    free(x->start);
    free(x->slot);
    free(x);
}
