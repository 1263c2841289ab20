/* token_dfa.h — which tokens may come next under a grammar, fast enough for every decode step of a 262,144-token
 * vocabulary.
 *
 * The matcher's states (sets of stacks, grammar.h) are interned into a lazily built DFA: each distinct state gets an
 * id, and a byte's transition from it is computed once and then read from a 256-entry table. The vocabulary is kept
 * sorted by bytes with each token's common prefix with the one before it, so a mask is one pass over the sorted
 * tokens that restarts each token where it parts from the previous one (a walk of the vocabulary's trie) — a table
 * lookup per trie edge, whole subtrees skipped where the state dies — and the mask of a state is kept once made.
 * Inside a JSON string, say, every content byte leads back to the same state, so after the first few requests
 * almost every lookup is cached (the approach of XGrammar and llguidance: most tokens decided once per state).
 *
 * Thread safety: a DFA is shared by the requests of one grammar and used from the sampling threads; every call
 * takes its lock. */
#ifndef TERN_GRAMMAR_TOKEN_DFA_H
#define TERN_GRAMMAR_TOKEN_DFA_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "grammar/grammar.h"

/* A vocabulary as bytes: what each token writes, and which tokens end generation. */
typedef struct tern_gvocab tern_gvocab;

/* n tokens; bytes[i] / lens[i] what token i writes (lens[i] 0: the token never matches a grammar), eog[i] 1 for the
 * tokens that end a reply (allowed exactly when the text is a complete sentence). Everything is copied. */
TERN_MUST_CHECK tern_err *tern_gvocab_new(size_t n, const uint8_t *const *bytes, const uint32_t *lens, const uint8_t *eog,
                          tern_gvocab **out);
/* Frees; NULL is fine. */
void tern_gvocab_free(tern_gvocab *v);
/* Tokens. */
size_t tern_gvocab_size(const tern_gvocab *v);
/* Bytes of the longest token. */
uint32_t tern_gvocab_max_len(const tern_gvocab *v);

typedef struct tern_gdfa tern_gdfa;

/* Most states a DFA keeps; a reply that needs more fails its request with an error naming the grammar as too
 * complex. */
#define TERN_GDFA_MAX_STATES 200000

/* A DFA for grammar g over vocabulary v (both must outlive it). */
TERN_MUST_CHECK tern_err *tern_gdfa_new(const tern_grammar *g, const tern_gvocab *v, tern_gdfa **out);
/* Frees; NULL is fine. */
void tern_gdfa_free(tern_gdfa *d);
/* The start state's id, or -1 when out of memory / states. */
int32_t tern_gdfa_start(tern_gdfa *d);
/* The state after token `tok` from state s: its id, -2 when the grammar does not allow the token there, -1 out of
 * memory / states. An end-of-generation token is allowed (and leaves s) when s is complete. */
int32_t tern_gdfa_token(tern_gdfa *d, int32_t s, int32_t tok);
/* Allowed tokens from state s as bits (mask[i / 64] bit i % 64, (size + 63) / 64 words written). 0, or -1 out of
 * memory / states. */
int tern_gdfa_mask(tern_gdfa *d, int32_t s, uint64_t *mask);
/* 1 if the text up to state s is a complete sentence; 2 if nothing may follow it (only an end token). */
int tern_gdfa_complete(tern_gdfa *d, int32_t s);
/* States made so far, and masks kept (for the benchmark and the log). */
void tern_gdfa_stats(tern_gdfa *d, size_t *states, size_t *masks);

#endif
