/* draft_args.c — see draft_args.h. */
#include "cli/draft_args.h"

#include <stdio.h>
#include <string.h>

const char TERN_DRAFT_USAGE[] =
    "  --draft-model DIR  speculative decoding with a drafter checkpoint (a Gemma 4 assistant, which reads\n"
    "               the model's cache); the output is unchanged, only faster. --draft-head full|centroid\n"
    "               picks its head (default: the checkpoint's)\n"
    "  --draft-ngram  speculative decoding by prompt lookup where there is no drafter (requests with an\n"
    "               OpenAI 'prediction' draft from it in any case)\n"
    "  --draft-max N  most tokens drafted per request and step (default 8; 0: no speculation at all)\n"
    "  --draft-min N  fewer proposed tokens than this are not verified (default 1)\n"
    "  --draft-fixed  draft --draft-max tokens every step, never pausing where drafting does not pay\n";

int tern_draft_args(const char *verb, const tern_opt *opts, tern_engine_opts *eo) {
    const char *head = tern_args_get(opts, "draft-head");
    int64_t max, min;
    if (head && strcmp(head, "full") && strcmp(head, "centroid")) {
        fprintf(stderr, "tern %s: --draft-head must be full or centroid, got '%s'\n", verb, head);
        return 2;
    }
    if (tern_args_int(verb, opts, "draft-max", 8, 0, 64, &max) || tern_args_int(verb, opts, "draft-min", 1, 1, 64, &min))
        return 2;
    eo->draft_model = tern_args_get(opts, "draft-model");
    eo->draft_head = !head ? 0 : !strcmp(head, "full") ? 1 : 2;
    eo->draft_ngram = tern_args_get(opts, "draft-ngram") != NULL;
    eo->draft_max = max ? (int)max : -1;
    eo->draft_min = (int)min;
    eo->draft_fixed = tern_args_get(opts, "draft-fixed") != NULL;
    return 0;
}
