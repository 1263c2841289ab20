/* fit.c — memory arithmetic for `tern fit` and engine defaults (see fit.h). */
#include "engine/fit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/gemma4.h"
#include "models/gemma4_weights.h"

tern_err *tern_fit_weights(const char *model_dir, const tern_gemma4_config *c, uint64_t *text_bytes,
                           uint64_t *other_bytes) {
    *text_bytes = *other_bytes = 0;
    char *cfg_path = tern_path_join(model_dir, "config.json");
    json_t *root = NULL;
    tern_quant_config *qc = NULL;
    tern_checkpoint *ck = NULL;
    tern_gemma4_weights *gw = NULL;
    tern_err *err = cfg_path ? tern_json_load_file(cfg_path, 16u << 20, &root) : tern_errf(TERN_ENOMEM, "out of memory");
    if (!err)
        err = tern_err_wrap(tern_quant_config_parse(root, &qc), "%s", cfg_path);
    if (!err)
        err = tern_checkpoint_open(model_dir, &ck);
    if (!err)
        err = tern_gemma4_bind(c, qc, ck, &gw);
    if (!err) {
        const char *prefix = tern_layout_prefix(gw->layout);
        size_t plen = strlen(prefix);
        for (size_t i = 0; i < tern_checkpoint_count(ck); i++) {
            const tern_tensor *t = tern_checkpoint_at(ck, i);
            if (!strncmp(t->name, prefix, plen))
                *text_bytes += t->nbytes;
            else
                *other_bytes += t->nbytes;
        }
    }
    tern_gemma4_weights_free(gw);
    tern_checkpoint_close(ck);
    tern_quant_config_free(qc);
    json_decref(root);
    free(cfg_path);
    return err;
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

int64_t tern_fit_default_ctx(const tern_gemma4_config *c) {
    return c->max_position_embeddings > 0 && c->max_position_embeddings < 8192 ? c->max_position_embeddings : 8192;
}

tern_err *tern_fit_compute(const tern_gemma4_config *c, uint64_t weights, uint64_t other, int64_t ctx, int parallel,
                           uint64_t budget, int elem_bytes, int64_t chunk, int64_t step_tokens, tern_fit_plan *out) {
    memset(out, 0, sizeof *out);
    if (parallel < 1 || parallel > 4096)
        return tern_errf(TERN_EINVAL, "--parallel must be in [1, 4096], got %d", parallel);
    if (step_tokens < 0 || step_tokens > 1 << 20)
        return tern_errf(TERN_EINVAL, "--step-tokens must be in [1, 1048576], got %lld", (long long)step_tokens);
    if (ctx < 0)
        return tern_errf(TERN_EINVAL, "--ctx must be >= 1, got %lld", (long long)ctx);
    out->weights_bytes = weights;
    out->other_bytes = other;
    out->window = c->sliding_window;
    out->chunk = chunk;
    out->ctx_train = c->max_position_embeddings;
    out->ctx = ctx ? ctx : tern_fit_default_ctx(c);
    out->parallel = parallel;
    tern_kv_cost_from_config(c, elem_bytes, chunk, &out->cost);
    out->per_request = tern_kv_cost_bytes(&out->cost, out->ctx);
    out->all_rows = out->per_request > UINT64_MAX / (uint64_t)parallel ? UINT64_MAX : out->per_request * (uint64_t)parallel;
    out->budget_given = budget != 0;
    out->budget = budget ? budget : out->all_rows;
    out->rows_at_ctx = out->per_request ? (int64_t)(out->budget / out->per_request) : parallel;
    if (out->rows_at_ctx > parallel)
        out->rows_at_ctx = parallel;
    int64_t cap = c->max_position_embeddings > 0 ? c->max_position_embeddings : INT64_MAX / 2;
    out->ctx_per_row = tern_kv_cost_max_positions(&out->cost, out->budget / (uint64_t)parallel, cap);
    out->max_one_request = tern_kv_cost_max_positions(&out->cost, out->budget, cap);
    out->step_tokens = step_tokens ? step_tokens : TERN_ENGINE_STEP_TOKENS;
    out->activations = tern_gemma4_work_bytes(c, out->step_tokens);
    out->total = sat_add(sat_add(weights, out->budget), out->activations);
    return NULL;
}

uint64_t tern_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024;
}
