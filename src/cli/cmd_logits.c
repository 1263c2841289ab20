/* cmd_logits.c — `tern logits`: the parity interface. Runs the ids through the model in f32
 * (weights as stored, f32 activations and KV cache) and writes little-endian float32 logits
 * [positions][vocab] (post soft-cap), optionally the final normed hidden state [positions][H]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ids.h"
#include "cli/kv_args.h"
#include "core/fileio.h"
#include "core/threadpool.h"
#include "models/model.h"

static const char *usage =
    "usage: tern logits [-m] MODEL_DIR --ids 2,105,... [--positions all|last] [--out FILE] [--hidden-out FILE]\n"
    "                   [--threads N] [--kv T | -ctk T -ctv T]\n"
    "Prints the argmax per position; --out writes float32 [positions][vocab] (post soft-cap).\n";

int cmd_logits(int argc, char **argv) {
    tern_opt opts[] = {{"ids", 1, 0}, {"positions", 1, 0}, {"out", 1, 0}, {"hidden-out", 1, 0},
                       {"threads", 1, 0}, {"model", 1, 0}, {"help", 0, 0}, TERN_KV_OPTS, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("logits", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    const char *ids_s = tern_args_get(opts, "ids"), *which = tern_args_get(opts, "positions");
    int64_t threads;
    tern_kv_type kt, vt;
    if (np != 1 || !ids_s || (which && strcmp(which, "all") && strcmp(which, "last")) ||
        tern_kv_args("logits", opts, TERN_KV_F32, &kt, &vt) ||
        tern_args_int("logits", opts, "threads", 0, 0, 1024, &threads)) {
        fputs(usage, stderr);
        return 2;
    }
    int all = !which || !strcmp(which, "all");
    int32_t *ids = NULL;
    int64_t n = 0;
    tern_lm *m = NULL;
    tern_kv *kv = NULL;
    tern_pool *pool = NULL;
    float *logits = NULL, *hidden = NULL;
    tern_err *err = tern_parse_ids(ids_s, &ids, &n);
    if (!err)
        err = tern_lm_load(pos[0], (int)threads, &m);
    if (!err)
        err = tern_pool_create((int)threads, &pool);
    if (!err)
        err = tern_lm_kv_create(m, 1, n, n, kt, vt, &kv);
    const tern_lm_desc *c = m ? tern_lm_desc_of(m) : NULL;
    int64_t n_out = all ? n : 1;
    if (!err) {
        logits = malloc((size_t)(n_out * c->vocab) * sizeof *logits);
        hidden = malloc((size_t)(n_out * c->hidden) * sizeof *hidden);
        if (!logits || !hidden)
            err = tern_errf(TERN_ENOMEM, "out of memory for %lld x %lld logits", (long long)n_out,
                            (long long)c->vocab);
    }
    if (!err) {
        int seq = 0;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = all ? TERN_OUT_ALL : TERN_OUT_LAST};
        err = tern_lm_forward(m, kv, pool, &b, logits, hidden);
    }
    if (!err && tern_args_get(opts, "out"))
        err = tern_write_file(tern_args_get(opts, "out"), logits, (size_t)(n_out * c->vocab) * sizeof *logits);
    if (!err && tern_args_get(opts, "hidden-out"))
        err = tern_write_file(tern_args_get(opts, "hidden-out"), hidden, (size_t)(n_out * c->hidden) * sizeof *hidden);
    if (!err) {
        printf("argmax:");
        for (int64_t p = 0; p < n_out; p++) {
            const float *row = logits + p * c->vocab;
            int64_t best = 0;
            for (int64_t v = 1; v < c->vocab; v++)
                if (row[v] > row[best])
                    best = v;
            printf(" %lld", (long long)best);
        }
        printf("\n");
    }
    free(logits);
    free(hidden);
    free(ids);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_lm_free(m);
    if (err) {
        fprintf(stderr, "tern logits: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
