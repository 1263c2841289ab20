/* cmd_info.c — `tern info MODEL_DIR`: architecture, layer pattern, parameters and bytes,
 * KV bytes per token, and whether every tensor the architecture needs is present and well shaped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fileio.h"
#include "core/json_util.h"
#include "formats/checkpoint_dir.h"
#include "formats/model_config.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/gemma4_weights.h"

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

static void print_report(const char *dir, const json_t *root, const tern_gemma4_config *c, const tern_quant_config *qc,
                         const tern_checkpoint *ck, const tern_gemma4_weights *gw) {
    const json_t *arch = json_array_get(json_object_get(root, "architectures"), 0);
    printf("model:        %s\n", dir);
    printf("architecture: gemma4 text decoder (%s)%s%s\n", json_is_string(arch) ? json_string_value(arch) : "no architectures key",
           c->has_audio_tower ? ", audio tower configured" : "", c->has_vision_tower ? ", vision tower configured" : "");
    printf("layout:       %s (tensor names start with \"%s\")\n", tern_layout_name(gw->layout), tern_layout_prefix(gw->layout));
    int n_full = 0;
    char pattern[TERN_MAX_LAYERS + 1];
    for (int i = 0; i < c->num_hidden_layers; i++) {
        n_full += c->layer_types[i] == TERN_LAYER_FULL;
        pattern[i] = c->layer_types[i] == TERN_LAYER_FULL ? 'F' : 's';
    }
    pattern[c->num_hidden_layers] = 0;
    printf("layers:       %lld (%lld sliding, %d full): %s\n", (long long)c->num_hidden_layers,
           (long long)c->num_hidden_layers - n_full, n_full, pattern);
    printf("hidden:       %lld, heads %lld, kv heads %lld sliding / %lld full, head dim %lld / %lld\n",
           (long long)c->hidden_size, (long long)c->num_attention_heads, (long long)c->num_key_value_heads,
           (long long)(c->attention_k_eq_v ? c->num_global_key_value_heads : c->num_key_value_heads),
           (long long)c->head_dim, (long long)c->global_head_dim);
    printf("mlp:          %lld%s%s\n", (long long)c->intermediate_size,
           c->use_double_wide_mlp && c->num_kv_shared_layers ? " (x2 on KV-shared layers)" : "",
           c->attention_k_eq_v ? ", attention_k_eq_v" : "");
    if (c->enable_moe_block)
        printf("moe:          %lld experts, top %lld, expert width %lld (beside the dense MLP)\n",
               (long long)c->num_experts, (long long)c->top_k_experts, (long long)c->moe_intermediate_size);
    printf("window:       %lld (sliding layers), vocab %lld, per-layer input %lld, soft-cap %g\n",
           (long long)c->sliding_window, (long long)c->vocab_size, (long long)c->hidden_size_per_layer_input,
           c->final_logit_softcapping);
    printf("rope:         sliding %s theta %g; full %s theta %g rotating %g of the head\n",
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
        printf("kv sharing:   layers %d..%lld reuse layer %d (sliding) / %d (full)\n", first,
               (long long)c->num_hidden_layers - 1, src_s, src_f);
    }
    if (tern_quant_config_present(qc))
        printf("quantization: %s\n", "MLX (config.json \"quantization\")");

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
    printf("parameters:   %.3f B (embedding %.3f B, per-layer embedding %.3f B)\n", params * 1e-9, embed * 1e-9,
           ple * 1e-9);
    double by_dtype[TERN_DT_COUNT] = {0}, total = 0;
    for (size_t i = 0; i < tern_checkpoint_count(ck); i++) {
        const tern_tensor *t = tern_checkpoint_at(ck, i);
        by_dtype[t->dtype] += (double)t->nbytes;
        total += (double)t->nbytes;
    }
    printf("bytes:        %.3f GiB in %zu tensors, %zu file(s):", gib(total), tern_checkpoint_count(ck),
           tern_checkpoint_file_count(ck));
    for (int d = 1; d < TERN_DT_COUNT; d++)
        if (by_dtype[d] > 0)
            printf(" %s %.3f GiB", tern_dtype_name((tern_dtype)d), gib(by_dtype[d]));
    printf("\n");
    long long full_b = tern_gemma4_kv_bytes_per_token(c, 2, 0), all_b = tern_gemma4_kv_bytes_per_token(c, 2, 1);
    printf("kv cache:     %lld bytes/token in full layers + %lld bytes/token in sliding layers (bf16; sliding "
           "layers stop growing at %lld tokens)\n",
           full_b, all_b - full_b, (long long)c->sliding_window);
    if (gw->n_other)
        printf("other:        %zu tensors outside the text decoder (towers)\n", gw->n_other);
    for (size_t i = 0; i < gw->n_extra; i++)
        printf("extra:        %s\n", gw->extra[i]);
    for (size_t i = 0; i < gw->n_problems; i++)
        printf("%s\n", gw->problems[i]);
    printf("tensors:      %zu needed, %zu bound, %s\n", gw->n, gw->n - gw->n_problems,
           gw->n_problems ? "INCOMPLETE" : "complete");
}

int cmd_info(int argc, char **argv) {
    tern_opt opts[] = {{"model", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("info", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    const int help = tern_args_get(opts, "help") != NULL;
    if (help || np != 1) {
        fputs("usage: tern info [-m] MODEL_DIR\nExits 1 when a needed tensor is missing or mis-shaped.\n",
              help ? stdout : stderr);
        return help ? 0 : 2;
    }
    const char *dir = pos[0];
    char *cfg_path = tern_path_join(dir, "config.json");
    json_t *root = NULL;
    tern_gemma4_config c;
    tern_quant_config *qc = NULL;
    tern_checkpoint *ck = NULL;
    tern_gemma4_weights *gw = NULL;
    tern_err *err = tern_checkpoint_dir_check(dir);
    if (!err)
        err = cfg_path ? tern_json_load_file(cfg_path, 16u << 20, &root) : tern_errf(TERN_ENOMEM, "oom");
    if (!err)
        err = tern_err_wrap(tern_gemma4_config_parse(root, &c), "%s", cfg_path);
    if (!err)
        err = tern_err_wrap(tern_quant_config_parse(root, &qc), "%s", cfg_path);
    if (!err)
        err = tern_checkpoint_open(dir, &ck);
    if (!err)
        err = tern_gemma4_bind(&c, qc, ck, &gw);
    int rc = 0;
    if (err) {
        fprintf(stderr, "tern info: %s\n", tern_err_msg(err));
        tern_err_free(err);
        rc = 1;
    } else {
        print_report(dir, root, &c, qc, ck, gw);
        rc = gw->n_problems ? 1 : 0;
    }
    tern_gemma4_weights_free(gw);
    tern_checkpoint_close(ck);
    tern_quant_config_free(qc);
    json_decref(root);
    free(cfg_path);
    return rc;
}
