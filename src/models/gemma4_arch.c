/* gemma4_arch.c — Gemma 4 text in the architecture table: its description for the engine and fit, `tern info`'s
 * report, and the load/forward entry points of gemma4.c. */
#include <stdlib.h>
#include <string.h>

#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/gemma4.h"
#include "models/gemma4_weights.h"
#include "models/model.h"
#include "tensor/cpu.h"

typedef struct g4_state {
    tern_gemma4_parsed p;
    char architecture[128]; /* config.json's architectures[0], for the report */
} g4_state;

static void state_free(void *state) {
    g4_state *st = state;
    tern_gemma4_parsed_free(&st->p);
    free(st);
}

static TERN_MUST_CHECK tern_err *parse(const char *dir, const json_t *root, void **state, tern_lm_desc *d) {
    g4_state *st = calloc(1, sizeof *st);
    if (!st)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *err = tern_gemma4_parse(dir, root, &st->p);
    if (err) {
        free(st);
        return err;
    }
    const json_t *arch = json_array_get(json_object_get(root, "architectures"), 0);
    if (json_is_string(arch))
        snprintf(st->architecture, sizeof st->architecture, "%s", json_string_value(arch));
    else if (!root)
        snprintf(st->architecture, sizeof st->architecture, "GGUF, general.architecture gemma4");
    const tern_gemma4_config *c = &st->p.c;
    memset(d, 0, sizeof *d);
    d->model_type = "gemma4";
    d->n_layers = c->num_hidden_layers;
    d->vocab = c->vocab_size;
    d->hidden = c->hidden_size;
    d->ctx_train = c->max_position_embeddings;
    d->sliding_window = c->sliding_window;
    d->n_kv = tern_gemma4_first_shared(c); /* KV-shared layers read an earlier layer's cache */
    for (int l = 0; l < d->n_kv; l++) {
        d->kv[l].kv_heads = tern_gemma4_layer_kv_heads(c, l);
        d->kv[l].head_dim = tern_gemma4_layer_head_dim(c, l);
        d->kv[l].ring = c->layer_types[l] == TERN_LAYER_SLIDING;
    }
    for (int l = 0; l < d->n_layers; l++)
        d->layer_kv[l] = (int16_t)tern_gemma4_kv_source(c, l);
    d->n_eos = c->n_eos < TERN_LM_MAX_EOS ? c->n_eos : TERN_LM_MAX_EOS;
    for (int k = 0; k < d->n_eos; k++)
        d->eos[k] = (int32_t)c->eos_token_ids[k];
    /* The decoder's tensors are the ones under its layout's prefix; the rest (towers) it never reads. */
    tern_weights_count_bytes(st->p.gw, st->p.ck, &d->weights_bytes, &d->other_bytes);
    if (tern_isa_active() != TERN_ISA_PORTABLE) { /* where tern_gemma4_load packs */
        uint64_t replaced;
        d->copy_bytes = tern_weights_copy_bytes(st->p.gw, &replaced);
        d->weights_bytes += d->copy_bytes - replaced;
    }
    d->decode_bytes = tern_weights_decode_bytes(st->p.gw, tern_gemma4_expert_share(c));
    d->experts = c->enable_moe_block ? c->num_experts : 0;
    d->experts_used = c->enable_moe_block ? c->top_k_experts : 0;
    d->has_problems = st->p.gw->n_problems > 0;
    d->span_both_ways = c->vision_both_ways ? TERN_GEMMA4_IMAGE_TOKENS_MAX : 0;
    *state = st;
    return NULL;
}

static uint64_t work_bytes(const void *state, int64_t T) {
    return tern_gemma4_work_bytes(&((const g4_state *)state)->p.c, T);
}

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

static void report(const char *dir, const void *state, const tern_lm_desc *d, FILE *out) {
    const g4_state *st = state;
    const tern_gemma4_config *c = &st->p.c;
    const tern_quant_config *qc = st->p.qc;
    const tern_checkpoint *ck = st->p.ck;
    const tern_weights *gw = st->p.gw;
    if (!gw) {
        fprintf(out, "model:        %s (loaded: the parse was handed to the model)\n", dir);
        return;
    }
    (void)d;
    const char *arch = st->architecture;
    fprintf(out, "model:        %s\n", dir);
    fprintf(out, "architecture: gemma4 text decoder (%s)%s%s\n", arch[0] ? arch : "no architectures key",
           c->has_audio_tower ? ", audio tower configured" : "", c->has_vision_tower ? ", vision tower configured" : "");
    fprintf(out, "layout:       %s (tensor names start with \"%s\")\n", tern_layout_name(gw->layout), tern_layout_prefix(gw->layout));
    int n_full = 0;
    char pattern[TERN_MAX_LAYERS + 1];
    for (int i = 0; i < c->num_hidden_layers; i++) {
        n_full += c->layer_types[i] == TERN_LAYER_FULL;
        pattern[i] = c->layer_types[i] == TERN_LAYER_FULL ? 'F' : 's';
    }
    pattern[c->num_hidden_layers] = 0;
    fprintf(out, "layers:       %lld (%lld sliding, %d full): %s\n", (long long)c->num_hidden_layers,
           (long long)c->num_hidden_layers - n_full, n_full, pattern);
    fprintf(out, "hidden:       %lld, heads %lld, kv heads %lld sliding / %lld full, head dim %lld / %lld\n",
           (long long)c->hidden_size, (long long)c->num_attention_heads, (long long)c->num_key_value_heads,
           (long long)(c->attention_k_eq_v ? c->num_global_key_value_heads : c->num_key_value_heads),
           (long long)c->head_dim, (long long)c->global_head_dim);
    fprintf(out, "mlp:          %lld%s%s\n", (long long)c->intermediate_size,
           c->use_double_wide_mlp && c->num_kv_shared_layers ? " (x2 on KV-shared layers)" : "",
           c->attention_k_eq_v ? ", attention_k_eq_v" : "");
    if (c->enable_moe_block)
        fprintf(out, "moe:          %lld experts, top %lld, expert width %lld (beside the dense MLP)\n",
               (long long)c->num_experts, (long long)c->top_k_experts, (long long)c->moe_intermediate_size);
    fprintf(out, "window:       %lld (sliding layers), vocab %lld, per-layer input %lld, soft-cap %g\n",
           (long long)c->sliding_window, (long long)c->vocab_size, (long long)c->hidden_size_per_layer_input,
           c->final_logit_softcapping);
    fprintf(out, "rope:         sliding %s theta %g; full %s theta %g rotating %g of the head\n",
           c->rope[0].kind == TERN_ROPE_PROPORTIONAL ? "proportional" : "default", c->rope[0].theta,
           c->rope[1].kind == TERN_ROPE_PROPORTIONAL ? "proportional" : "default", c->rope[1].theta,
           c->rope[1].partial_rotary_factor);
    if (c->num_kv_shared_layers) {
        int first = tern_gemma4_first_shared(c);
        int src_s = -1, src_f = -1;
        for (int i = first; i < c->num_hidden_layers; i++) {
            if (c->layer_types[i] == TERN_LAYER_SLIDING)
                src_s = tern_gemma4_kv_source(c, i);
            else
                src_f = tern_gemma4_kv_source(c, i);
        }
        fprintf(out, "kv sharing:   layers %d..%lld reuse layer %d (sliding) / %d (full)\n", first,
               (long long)c->num_hidden_layers - 1, src_s, src_f);
    }
    if (tern_quant_config_present(qc))
        fprintf(out, "quantization: %s\n", "MLX (config.json \"quantization\")");

    /* Parameters: logical element counts of the decoder's tensors; the PLE table is only looked up. */
    double params = 0, embed = 0, ple = 0;
    for (size_t i = 0; i < gw->n; i++) {
        double n = 1;
        for (int d = 0; d < gw->specs[i].ndim; d++)
            n *= (double)gw->specs[i].shape[d];
        params += n;
        if (!strcmp(gw->specs[i].name, "embed_tokens"))
            embed = n;
        if (!strcmp(gw->specs[i].name, "embed_tokens_per_layer"))
            ple = n;
    }
    fprintf(out, "parameters:   %.3f B (embedding %.3f B, per-layer embedding %.3f B)\n", params * 1e-9, embed * 1e-9,
           ple * 1e-9);
    tern_weights_report_bytes(ck, out);
    const double per_token = (double)tern_weights_decode_bytes(gw, tern_gemma4_expert_share(c));
    if (per_token < 1024.0 * 1024 * 1024)
        fprintf(out, "per token:    %.1f MiB", per_token / (1024.0 * 1024));
    else
        fprintf(out, "per token:    %.3f GiB", gib(per_token));
    fprintf(out, " of weights read by each generated token");
    if (c->enable_moe_block)
        fprintf(out, " (the dense part and %lld of %lld experts a layer)", (long long)c->top_k_experts,
               (long long)c->num_experts);
    fprintf(out, "\n");
    long long full_b = tern_gemma4_kv_bytes_per_token(c, 2, 0), all_b = tern_gemma4_kv_bytes_per_token(c, 2, 1);
    fprintf(out, "kv cache:     %lld bytes/token in full layers + %lld bytes/token in sliding layers (bf16; sliding "
           "layers stop growing at %lld tokens)\n",
           full_b, all_b - full_b, (long long)c->sliding_window);
    tern_weights_report_list(gw, out);
}

static TERN_MUST_CHECK tern_err *load(const char *dir, void *state, int threads, void **impl) {
    tern_gemma4 *m = NULL;
    TERN_TRY(tern_gemma4_load_parsed(dir, &((g4_state *)state)->p, threads, &m));
    *impl = m;
    return NULL;
}

static void model_free(void *impl) { tern_gemma4_free(impl); }
static int layout_threads(const void *impl) { return tern_gemma4_layout_threads(impl); }
static uint64_t decode_bytes(const void *impl) { return tern_gemma4_decode_bytes(impl); }
static TERN_MUST_CHECK tern_err *forward(void *impl, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits, float *hidden) {
    return tern_gemma4_forward(impl, kv, pool, b, logits, hidden);
}
static void set_profile(void *impl, tern_lm_profile *p) { tern_gemma4_set_profile(impl, p); }
static void embed(const void *impl, int32_t id, float *out) { tern_gemma4_embed_row(impl, id, out); }

const tern_arch tern_arch_gemma4 = {
    .model_types = {"gemma4", "gemma4_text", NULL},
    .gguf = 1,
    .parse = parse,
    .state_free = state_free,
    .work_bytes = work_bytes,
    .report = report,
    .load = load,
    .free = model_free,
    .layout_threads = layout_threads,
    .decode_bytes = decode_bytes,
    .forward = forward,
    .set_profile = set_profile,
    .embed = embed,
};
