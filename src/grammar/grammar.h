/* grammar.h — grammars that constrain what a model may write, as llama.cpp users write them (GBNF), compiled to a
 * byte-level pushdown automaton, and the matcher that follows a reply byte by byte.
 *
 *   GBNF text ──▶ tern_grammar_compile ──▶ rules of byte-range elements (every character class turned into the
 *   UTF-8 byte sequences of its code points, repetitions and groups into helper rules; undefined rules and left
 *   recursion refused)
 *
 * A matcher state is a set of stacks (llama.cpp's formulation): each stack lists the grammar positions still to
 * match, its top always a byte-range element; an empty stack means the text so far is a complete sentence. A byte
 * advances every stack whose top accepts it and drops the rest; no stack left means the text can no longer be
 * completed. Working on bytes, not code points, lets a token end in the middle of a UTF-8 sequence (byte-fallback
 * tokens) with nothing pending outside the stacks. */
#ifndef TERN_GRAMMAR_GRAMMAR_H
#define TERN_GRAMMAR_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Grammar elements. A rule is alternatives separated by ALT and ended by END; an alternative is a sequence of REF
 * (another rule) and BYTES elements (a set of byte ranges: the first range in a BYTES element, further ranges of
 * the same set in the BYTES_ALT elements after it). */
typedef enum { TERN_GE_END = 0, TERN_GE_ALT, TERN_GE_REF, TERN_GE_BYTES, TERN_GE_BYTES_ALT } tern_gelem_type;

typedef struct tern_gelem {
    uint8_t type;
    uint8_t lo, hi;  /* BYTES / BYTES_ALT: the range lo..hi */
    uint32_t rule;   /* REF: the rule */
} tern_gelem;

typedef struct tern_grammar tern_grammar;

/* Most stacks a matcher state may hold: a grammar ambiguous enough to need more is refused while matching. */
#define TERN_GRAMMAR_MAX_STACKS 1024
/* Deepest stack: a recursion deeper than this (nesting in a JSON value, say) ends the sentence's possibilities. */
#define TERN_GRAMMAR_MAX_DEPTH 512

/* Compiles GBNF text (rules `name ::= ...`, alternatives `|`, "literals" with \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH
 * escapes, [classes] and [^negated] with ranges, ( groups ), the . wildcard, * + ? {m} {m,} {m,n}, # comments) whose
 * start rule is `root` (or `start` when given and root is absent). Errors (TERN_EINVAL) name the line and column:
 * syntax, an undefined rule, left recursion, a repetition bound over 1000; a grammar past the size limits once its
 * repetitions are expanded is TERN_EUNSUPPORTED. */
TERN_MUST_CHECK tern_err *tern_grammar_compile(const char *text, size_t len, tern_grammar **out);
/* Frees; NULL is fine. */
void tern_grammar_free(tern_grammar *g);
/* The element array and the start index of each rule (for the matcher and the mask). */
const tern_gelem *tern_grammar_elems(const tern_grammar *g);
size_t tern_grammar_n_elems(const tern_grammar *g);
uint32_t tern_grammar_rule_start(const tern_grammar *g, uint32_t rule);
uint32_t tern_grammar_root(const tern_grammar *g);

/* Bytes of the shortest sentence the grammar accepts; UINT64_MAX when it accepts none. */
uint64_t tern_grammar_min_bytes(const tern_grammar *g);

/* ---- matching --------------------------------------------------------------------------------------------- */

/* A set of stacks. Stacks are stored back to back in `pos` (each stack: its length, then its positions, bottom
 * first); `n` stacks, `len` int32 values used. */
typedef struct tern_gstate {
    int32_t *pos;
    size_t len, cap;
    int n;
} tern_gstate;

/* The start state: the root rule's alternatives, expanded. */
TERN_MUST_CHECK tern_err *tern_gstate_init(const tern_grammar *g, tern_gstate *s);
/* Frees the buffers; a zeroed state is fine. */
void tern_gstate_free(tern_gstate *s);
/* *dst = *src (dst's buffers reused). 0, or -1 when out of memory. */
int tern_gstate_copy(tern_gstate *dst, const tern_gstate *src);
/* Advances by one byte into *out (out must not be in). Returns 0, or -1 when out of memory or too many stacks;
 * out->n == 0 means the byte is not allowed. */
int tern_gstate_byte(const tern_grammar *g, const tern_gstate *in, uint8_t b, tern_gstate *out);
/* Advances *s by bytes[0, n) in place (scratch reused from *tmp); 1 if every byte was allowed, 0 if one was not
 * (the state is then empty), -1 on out of memory. */
int tern_gstate_bytes(const tern_grammar *g, tern_gstate *s, const uint8_t *bytes, size_t n, tern_gstate *tmp);
/* 1 if the text so far is a complete sentence (some stack is empty). */
int tern_gstate_complete(const tern_gstate *s);
/* 1 if nothing can follow (every stack is empty: complete, and only complete). */
int tern_gstate_final(const tern_gstate *s);

#endif
