/* kv_args.c — see kv_args.h. */
#include "cli/kv_args.h"

#include <stdio.h>

const char TERN_KV_USAGE[] =
    "  --kv T       how the KV cache stores K and V: bf16, f16, f32, q8_0 or q4_0 (ggml's 8- and 4-bit blocks\n"
    "               of 32 values: about half and a quarter of bf16's memory)\n"
    "  --cache-type-k T, -ctk T / --cache-type-v T, -ctv T  K's and V's type apart, as llama.cpp names them\n";

static int one(const char *verb, const tern_opt *opts, const char *name, const char *alias, tern_kv_type *t) {
    const char *s = tern_args_get(opts, name);
    if (!s)
        s = tern_args_get(opts, alias);
    if (!s)
        return 0;
    tern_err *err = tern_kv_type_parse(s, t);
    if (!err)
        return 0;
    fprintf(stderr, "tern %s: --%s: %s\n", verb, name, tern_err_msg(err));
    tern_err_free(err);
    return 2;
}

int tern_kv_args(const char *verb, const tern_opt *opts, tern_kv_type dflt, tern_kv_type *k, tern_kv_type *v) {
    tern_kv_type both = dflt;
    if (one(verb, opts, "kv", "kv", &both))
        return 2;
    *k = *v = both;
    return one(verb, opts, "cache-type-k", "ctk", k) || one(verb, opts, "cache-type-v", "ctv", v) ? 2 : 0;
}
