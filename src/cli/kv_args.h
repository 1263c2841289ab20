/* kv_args.h — the KV cache type options every verb that runs the model shares: --kv for K and V together, and
 * llama.cpp's --cache-type-k / -ctk and --cache-type-v / -ctv for each. */
#ifndef TERN_CLI_KV_ARGS_H
#define TERN_CLI_KV_ARGS_H

#include "cli/args.h"
#include "tensor/kv_type.h"

/* The option entries, for a verb's option table. */
#define TERN_KV_OPTS {"kv", 1, 0}, {"cache-type-k", 1, 0}, {"ctk", 1, 0}, {"cache-type-v", 1, 0}, {"ctv", 1, 0}

/* Their lines of a verb's usage text. */
extern const char TERN_KV_USAGE[];

/* The K and V types the options name (--cache-type-k/-v over --kv; dflt for what none names); 0, or 2 after
 * printing what is wrong. */
int tern_kv_args(const char *verb, const tern_opt *opts, tern_kv_type dflt, tern_kv_type *k, tern_kv_type *v);

#endif
