/* piece_index.h — the vocabulary looked up by the bytes its tokens decode to: the longest token whose piece starts
 * a text. A model does not always split text as the tokenizer would (sampled or unusual text, a model that writes
 * whole tokens the merges never build); where it has not, the longest piece is how it most often did. */
#ifndef TERN_TOKENIZER_PIECE_INDEX_H
#define TERN_TOKENIZER_PIECE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

typedef struct tern_piece_index tern_piece_index;

/* Indexes every non-special token's piece (a piece several ids share: the lowest id that is not a byte-fallback
 * <0xXX> token). The index is immutable and does not refer to the tokenizer once made. */
TERN_MUST_CHECK tern_err *tern_piece_index_new(const tern_tokenizer *t, tern_piece_index **out);
/* The longest indexed token whose piece is a prefix of s[0, n) and its piece's length, or TERN_TOKEN_NONE. */
tern_token tern_piece_index_longest(const tern_piece_index *x, const char *s, size_t n, size_t *len);
/* Frees; NULL is fine. */
void tern_piece_index_free(tern_piece_index *x);

#endif
