/* batch.c — committing a forward's rows, and the names of the profile's phases. */
#include "models/batch.h"

tern_err *tern_batch_commit(tern_kv *kv, const tern_batch *b) {
    for (int r = 0; r < b->n_rows; r++)
        TERN_TRY(tern_kv_set_len(kv, b->seq[r], tern_batch_row_pos(b, kv, r) + b->n_tok[r]));
    return NULL;
}

const char *tern_phase_name(tern_phase ph) {
    static const char *const names[TERN_PH_COUNT] = {"setup", "embed", "qkv", "attn-prep", "attention", "o",
                                                      "gate/up", "down", "moe", "ple", "residual", "head"};
    return ph >= 0 && ph < TERN_PH_COUNT ? names[ph] : "?";
}
