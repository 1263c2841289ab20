/* bench_draft.h — `tern bench --draft-model DIR | --draft-ngram --prompts FILE`: what a draft source buys on chat
 * prompts, measured beside plain decoding in the same run. */
#ifndef TERN_CLI_BENCH_DRAFT_H
#define TERN_CLI_BENCH_DRAFT_H

#include <stdint.h>

#include "tern/tern.h"

/* Each line of `prompts` is a user message, rendered with the model's chat template and answered (up to n tokens,
 * sampled as sp says) without and with drafting on one engine (eo: its draft options); greedy and seeded replies are
 * checked identical, and the acceptance (drafted tokens kept) and the decode speed-up over all prompts are printed
 * (JSON with `json`). Returns the process exit code. */
int tern_bench_draft(const char *model, const tern_engine_opts *eo, const tern_sampling_params *sp, const char *prompts,
                     int64_t n, int threads, int json);

#endif
