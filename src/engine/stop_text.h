/* stop_text.h — stop strings matched on generated text, across token boundaries.
 *
 * Text arrives in pieces (one per token, complete UTF-8 characters). A stop string may straddle
 * pieces, so the matcher holds back the longest tail of the text that could still grow into a
 * stop string and releases it only once it cannot. When a stop string appears, the text before it
 * is released and the stop string and everything after it are dropped: the output never contains
 * a stop string, and never contains text that a later piece turns into one. Held-back text starts
 * at a character boundary (it is a prefix of a UTF-8 stop string), so released text is always
 * whole characters. */
#ifndef TERN_ENGINE_STOP_TEXT_H
#define TERN_ENGINE_STOP_TEXT_H

#include <stddef.h>

#include "core/status.h"

typedef struct tern_stop_text {
    const char *const *stops; /* borrowed; each non-empty */
    const size_t *lens;
    int n;
    char *held; /* text that may still become a stop string */
    size_t n_held, cap_held;
    char *out;  /* released text, valid until the next call */
    size_t cap_out;
} tern_stop_text;

/* Prepares a matcher over n stop strings (borrowed: they must outlive the matcher). Zero the struct first. */
void tern_stop_text_init(tern_stop_text *st, const char *const *stops, const size_t *lens, int n);
/* Forgets the held text (a new request). */
void tern_stop_text_reset(tern_stop_text *st);
/* Frees the buffers; the struct may be re-initialised. */
void tern_stop_text_free(tern_stop_text *st);
/* Adds a piece. *out / *out_len receive the text released now (possibly empty). Returns the index of the
 * stop string found (the earliest in the text; the first listed on a tie), or -1. Errors only on OOM. */
TERN_MUST_CHECK tern_err *tern_stop_text_push(tern_stop_text *st, const char *piece, size_t len, const char **out, size_t *out_len,
                              int *stop_index);
/* Releases whatever is held (generation ended without a stop string). */
TERN_MUST_CHECK tern_err *tern_stop_text_flush(tern_stop_text *st, const char **out, size_t *out_len);

#endif
