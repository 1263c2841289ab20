/* stream_choice.h — from how many tokens a pass of the int8 products requests its weight stream ahead
 * (tern_cpu_stream_tokens), chosen per CPU by measuring: the first start on a CPU whose packed weights are large
 * enough to leave its last-level cache times passes over 1, 2 and 3 tokens with and without the requests,
 * alternating, and keeps the choice in the cache folder under the CPU's identity (cpu-<signature>.stream); later
 * starts on that CPU read it. Without a measurement the cpuid default stands; TERN_STREAM_TOKENS overrides both. */
#ifndef TERN_MODELS_STREAM_CHOICE_H
#define TERN_MODELS_STREAM_CHOICE_H

#include "models/weights.h"

/* Settles tern_cpu_stream_tokens for this process from the kept choice, or by measuring w's packed weights with
 * `threads` threads (and keeping the result); does nothing once settled, when TERN_STREAM_TOKENS is set, or when
 * w's packed weights are too small to leave the cache (then the cpuid default stays). Never fails: a choice that
 * cannot be kept is measured again at the next start. */
void tern_stream_choice_settle(const tern_weights *w, int threads);

#endif
