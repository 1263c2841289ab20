/* fit.h — what fits in memory: weights bytes, KV bytes per token (sliding layers saturating at
 * their ring), and the budget arithmetic behind `tern fit` and the engine's defaults.
 * Everything here is deterministic given its inputs; only tern_mem_available reads the machine. */
#ifndef TERN_ENGINE_FIT_H
#define TERN_ENGINE_FIT_H

#include <stdint.h>

#include "core/status.h"
#include "engine/kv_budget.h"
#include "models/model.h"

/* The engine's defaults that plans assume unless told otherwise: its prefill chunk (the extra ring slots of
 * sliding layers) and the most tokens of one forward (whose activations are counted). */
#define TERN_ENGINE_PREFILL_CHUNK 256
#define TERN_ENGINE_STEP_TOKENS 512
/* Most tokens a row drafts per step by default (speculative decoding). */
#define TERN_ENGINE_DRAFT_MAX 8

typedef struct tern_fit_plan {
    uint64_t weights_bytes;     /* text-decoder tensors as stored (mmapped, paged in as used), with copy_bytes in
                                 * place of the blocks they replace */
    uint64_t copy_bytes;        /* copies repacked for the int8 kernels (GGUF Q4_0 / Q8_0) */
    uint64_t other_bytes;       /* tensors the text path never reads (audio/vision towers) */
    uint64_t decode_bytes;      /* weights one generated token reads (with experts: the dense part and its top-k) */
    int64_t experts, experts_used; /* mixture-of-experts: per layer and per token; 0 without */
    tern_kv_cost cost;          /* per-position KV costs at the chosen dtype and chunk */
    int64_t window, chunk, ctx_train;
    int64_t ctx;                /* positions per request */
    int parallel;
    uint64_t per_request;       /* KV bytes of one request at ctx */
    uint64_t all_rows;          /* parallel x per_request */
    uint64_t budget;            /* the budget planned with (given, or all_rows) */
    int budget_given;
    int64_t rows_at_ctx;        /* full-context requests the budget holds at once (capped at parallel) */
    int64_t ctx_per_row;        /* the context every one of `parallel` rows could have within the budget */
    int64_t max_one_request;    /* the longest single request the budget holds (capped at ctx_train) */
    int64_t step_tokens;        /* most tokens in one forward */
    uint64_t activations;       /* the work area of a forward of step_tokens tokens */
    uint64_t total;             /* weights + budget + activations */
} tern_fit_plan;

/* Plans `parallel` rows of `ctx` positions (0 = min(ctx_train, 8192)) of the model `spec` describes with K
 * stored as k_type, V as v_type and `chunk` extra ring slots, in `budget` bytes (0 = exactly what the rows need),
 * forwards of at most step_tokens tokens (0 = the engine's default, 512). */
TERN_MUST_CHECK tern_err *tern_fit_compute(const tern_lm_spec *spec, int64_t ctx, int parallel, uint64_t budget, tern_kv_type k_type,
                           tern_kv_type v_type, int64_t chunk, int64_t step_tokens, tern_fit_plan *out);
/* The default context: min(ctx_train, 8192). */
int64_t tern_fit_default_ctx(const tern_lm_desc *d);
/* The positions past the window a sliding layer keeps for a prefill chunk (the most one row feeds per forward): the
 * chunk, or the largest image where the model sees an image both ways (one forward then holds the image whole). */
int64_t tern_fit_ring_extra(const tern_lm_desc *d, int64_t chunk);
/* The most tokens of one forward when none is given: TERN_ENGINE_STEP_TOKENS, raised where the model sees spans both
 * ways so that the ring's extra always fits beside every row's decode and drafts (parallel x (draft_max + 1)). */
int64_t tern_fit_default_step_tokens(const tern_lm_desc *d, int64_t chunk, int parallel, int draft_max);
/* MemAvailable from /proc/meminfo in bytes, or less in a container whose memory limit leaves less (core/cgroup.h);
 * 0 when unknown. */
uint64_t tern_mem_available(void);

#endif
