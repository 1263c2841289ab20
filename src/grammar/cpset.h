/* cpset.h — sets of Unicode code points as ranges, shared by the grammar compiler (a GBNF character class) and the
 * JSON Schema converter (a regex class, the characters a string may hold). Normalized sets are sorted, merged, and
 * hold no surrogates (they have no UTF-8 form, so no grammar can match them). Allocation failure is sticky: `oom`
 * is set and the set stops growing; the caller checks it once at the end. */
#ifndef TERN_GRAMMAR_CPSET_H
#define TERN_GRAMMAR_CPSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct tern_cprange {
    uint32_t lo, hi; /* inclusive */
} tern_cprange;

typedef struct tern_cpset {
    tern_cprange *r;
    size_t n, cap;
    int oom;
} tern_cpset;

/* Adds lo..hi (nothing when lo > hi); the set is no longer normalized. */
void tern_cpset_add(tern_cpset *s, uint32_t lo, uint32_t hi);
/* Sorts and merges the ranges, and cuts out the surrogates. */
void tern_cpset_norm(tern_cpset *s);
/* out (empty) = the complement of s among all code points but the surrogates, normalized. */
void tern_cpset_invert(const tern_cpset *s, tern_cpset *out);
/* 1 when cp is in s. */
int tern_cpset_has(const tern_cpset *s, uint32_t cp);
/* s minus lo..hi (normalized in, normalized out). */
void tern_cpset_remove(tern_cpset *s, uint32_t lo, uint32_t hi);
/* Frees the ranges and empties the set. */
void tern_cpset_free(tern_cpset *s);

#endif
