/* draft_args.h — the speculative-decoding options tern serve and tern run share: which drafter, how many tokens. */
#ifndef TERN_CLI_DRAFT_ARGS_H
#define TERN_CLI_DRAFT_ARGS_H

#include "cli/args.h"
#include "tern/tern.h"

/* The option entries, for a verb's option table. */
#define TERN_DRAFT_OPTS                                                                                          \
    {"draft-model", 1, 0}, {"draft-head", 1, 0}, {"draft-ngram", 0, 0}, {"draft-max", 1, 0}, {"draft-min", 1, 0},   \
        {"draft-fixed", 0, 0}

/* Their lines of a verb's usage text. */
extern const char TERN_DRAFT_USAGE[];

/* Reads them into the engine options (draft_model points into argv); 0, or 2 after printing what is wrong. */
int tern_draft_args(const char *verb, const tern_opt *opts, tern_engine_opts *eo);

#endif
