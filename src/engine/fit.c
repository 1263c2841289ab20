/* fit.c — memory arithmetic for `tern fit` and engine defaults (see fit.h). */
#include "engine/fit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cgroup.h"

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

int64_t tern_fit_default_ctx(const tern_lm_desc *d) {
    return d->ctx_train > 0 && d->ctx_train < 8192 ? d->ctx_train : 8192;
}

int64_t tern_fit_ring_extra(const tern_lm_desc *d, int64_t chunk) {
    return d->span_both_ways > chunk ? d->span_both_ways : chunk;
}

int64_t tern_fit_default_step_tokens(const tern_lm_desc *d, int64_t chunk, int parallel, int draft_max) {
    const int64_t need = tern_fit_ring_extra(d, chunk) + (int64_t)parallel * (draft_max + 1);
    return d->span_both_ways && need > TERN_ENGINE_STEP_TOKENS ? need : TERN_ENGINE_STEP_TOKENS;
}

tern_err *tern_fit_compute(const tern_lm_spec *spec, int64_t ctx, int parallel, uint64_t budget, tern_kv_type k_type,
                           tern_kv_type v_type, int64_t chunk, int64_t step_tokens, tern_fit_plan *out) {
    const tern_lm_desc *d = tern_lm_spec_desc(spec);
    memset(out, 0, sizeof *out);
    TERN_TRY(tern_kv_check_types(d->kv, d->n_kv, k_type, v_type));
    if (parallel < 1 || parallel > 4096)
        return tern_errf(TERN_EINVAL, "--parallel must be in [1, 4096], got %d", parallel);
    if (step_tokens < 0 || step_tokens > 1 << 20)
        return tern_errf(TERN_EINVAL, "--step-tokens must be in [1, 1048576], got %lld", (long long)step_tokens);
    if (ctx < 0)
        return tern_errf(TERN_EINVAL, "--ctx must be >= 1, got %lld", (long long)ctx);
    out->weights_bytes = d->weights_bytes;
    out->copy_bytes = d->copy_bytes;
    out->other_bytes = d->other_bytes;
    out->decode_bytes = d->decode_bytes;
    out->experts = d->experts;
    out->experts_used = d->experts_used;
    out->window = d->sliding_window;
    chunk = chunk ? chunk : TERN_ENGINE_PREFILL_CHUNK;
    out->chunk = tern_fit_ring_extra(d, chunk);
    out->ctx_train = d->ctx_train;
    out->ctx = ctx ? ctx : tern_fit_default_ctx(d);
    out->parallel = parallel;
    tern_kv_cost_from_desc(d, k_type, v_type, out->chunk, &out->cost);
    out->per_request = tern_kv_cost_bytes(&out->cost, out->ctx);
    out->all_rows = out->per_request > UINT64_MAX / (uint64_t)parallel ? UINT64_MAX : out->per_request * (uint64_t)parallel;
    out->budget_given = budget != 0;
    out->budget = budget ? budget : out->all_rows;
    out->rows_at_ctx = out->per_request ? (int64_t)(out->budget / out->per_request) : parallel;
    if (out->rows_at_ctx > parallel)
        out->rows_at_ctx = parallel;
    int64_t cap = d->ctx_train > 0 ? d->ctx_train : INT64_MAX / 2;
    out->ctx_per_row = tern_kv_cost_max_positions(&out->cost, out->budget / (uint64_t)parallel, cap);
    out->max_one_request = tern_kv_cost_max_positions(&out->cost, out->budget, cap);
    out->step_tokens = step_tokens ? step_tokens : tern_fit_default_step_tokens(d, chunk, parallel, TERN_ENGINE_DRAFT_MAX);
    out->activations = tern_lm_spec_work_bytes(spec, out->step_tokens);
    out->total = sat_add(sat_add(d->weights_bytes, out->budget), out->activations);
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
    uint64_t avail = (uint64_t)kb * 1024;
    /* in a container, what its memory limit leaves (file pages, such as the mapped weights, can be dropped) */
    tern_cgroup_limits cg;
    tern_cgroup_self(&cg);
    if (cg.mem_limit) {
        const uint64_t left = cg.mem_limit > cg.mem_anon ? cg.mem_limit - cg.mem_anon : 0;
        if (!avail || left < avail)
            avail = left;
    }
    return avail;
}
