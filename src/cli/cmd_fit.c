/* cmd_fit.c — `tern fit MODEL_DIR [--ctx N] [--parallel N] [--budget GIB]`: what fits in memory.
 * Weights bytes, KV bytes per token (sliding layers stop growing at their ring of window + chunk
 * positions), the KV a request of --ctx positions needs, what a budget holds, the activations. The report
 * depends only on the checkpoint and the flags, never on the machine, so it can be diffed. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/kv_args.h"
#include "formats/checkpoint_dir.h"
#include "loader/audio_input.h"
#include "loader/image_input.h"
#include "engine/fit.h"

static const char *usage =
    "usage: tern fit [-m] MODEL_DIR [--ctx N] [--parallel N] [--budget GIB] [--chunk N] [--kv T | -ctk T -ctv T]\n"
    "                [--step-tokens N] [--mmproj FILE] [--json]\n"
    "Reports weights and KV-cache memory: bytes per token, per request of --ctx positions (default\n"
    "min(trained context, 8192)), for --parallel rows (default 4), and what a KV budget of --budget GiB\n"
    "holds (default: exactly what the rows need). --chunk is the engine's prefill chunk (default 256):\n"
    "sliding layers keep window + chunk positions (chunk at least the largest image on a model that sees\n"
    "an image both ways). --step-tokens is the most tokens of one forward (default 512, the engine's; on\n"
    "such a model raised to hold an image beside every row's drafts), whose activations are counted too. --json prints the same plan as one\n"
    "JSON object of exact byte counts (for scripts: sizing a container, checking a server's budget).\n";

/* Bytes in the largest binary unit that keeps the number >= 1 (two decimals); rotates over 4 buffers. */
static const char *human(uint64_t b) {
    static char buf[4][32];
    static int next;
    char *out = buf[next++ & 3];
    const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(out, 32, "%llu bytes", (unsigned long long)b);
    else
        snprintf(out, 32, "%.2f %s", v, units[u]);
    return out;
}

static void print_plan(const char *dir, const tern_fit_plan *p, tern_kv_type kt, tern_kv_type vt) {
    printf("model:        %s\n", dir);
    printf("weights:      %s text decoder", human(p->weights_bytes));
    if (p->copy_bytes)
        printf(" (of which %s repacked for the int8 kernels, in place of the stored blocks)", human(p->copy_bytes));
    if (p->other_bytes)
        printf(" (+ %s of other tensors the text path never reads)", human(p->other_bytes));
    printf("\n");
    printf("per token:    %s of weights read by each generated token", human(p->decode_bytes));
    if (p->experts)
        printf(" (the dense part and %lld of %lld experts a layer)", (long long)p->experts_used, (long long)p->experts);
    printf("\n");
    printf("kv per token: %llu bytes in full layers + %llu bytes in sliding layers (K %s, V %s); sliding "
           "layers stop growing at %lld positions (window %lld + chunk %lld)\n",
           (unsigned long long)p->cost.full_per_pos, (unsigned long long)p->cost.ring_per_pos, tern_kv_type_name(kt),
           tern_kv_type_name(vt),
           (long long)p->cost.ring_slots, (long long)p->window, (long long)p->chunk);
    printf("per request:  %lld positions -> %s of KV\n", (long long)p->ctx, human(p->per_request));
    printf("all rows:     %d x %s = %s\n", p->parallel, human(p->per_request), human(p->all_rows));
    printf("budget:       %s%s\n", human(p->budget), p->budget_given ? "" : " (what the rows need)");
    printf("fits:         %lld of %d rows at %lld positions at once; all %d rows at up to %lld positions each; "
           "one request alone up to %lld positions\n",
           (long long)p->rows_at_ctx, p->parallel, (long long)p->ctx, p->parallel, (long long)p->ctx_per_row,
           (long long)p->max_one_request);
    if (p->ctx_train > 0 && p->ctx > p->ctx_train)
        printf("warning:      --ctx %lld exceeds the trained context of %lld\n", (long long)p->ctx,
               (long long)p->ctx_train);
    printf("activations:  %s (a forward of up to %lld tokens)\n", human(p->activations), (long long)p->step_tokens);
    printf("total:        %s (weights + KV budget + activations; the prefix cache comes on top)\n", human(p->total));
}

/* The plan as one JSON object of exact numbers; a tower's work area only when the model has that tower. */
static int print_json(const char *dir, const tern_fit_plan *p, tern_kv_type kt, tern_kv_type vt,
                      const uint64_t *audio_work, const uint64_t *vision_work) {
    json_t *kv = json_pack("{s:I,s:I,s:I,s:I,s:I,s:s,s:s}", "full_bytes_per_position", (json_int_t)p->cost.full_per_pos,
                           "sliding_bytes_per_position", (json_int_t)p->cost.ring_per_pos, "sliding_positions",
                           (json_int_t)p->cost.ring_slots, "window", (json_int_t)p->window, "chunk",
                           (json_int_t)p->chunk, "k_type", tern_kv_type_name(kt), "v_type", tern_kv_type_name(vt));
    json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:I,s:i,s:I,s:I,s:I,s:b,s:I,s:I,s:I,s:I,s:I,s:I}", "model",
                          dir, "weights_bytes", (json_int_t)p->weights_bytes, "repacked_bytes",
                          (json_int_t)p->copy_bytes, "other_bytes", (json_int_t)p->other_bytes,
                          "decode_bytes_per_token", (json_int_t)p->decode_bytes, "experts", (json_int_t)p->experts,
                          "experts_used", (json_int_t)p->experts_used, "kv", kv, "ctx", (json_int_t)p->ctx,
                          "parallel", p->parallel, "kv_bytes_per_request", (json_int_t)p->per_request,
                          "kv_bytes_all_rows", (json_int_t)p->all_rows, "kv_budget_bytes", (json_int_t)p->budget,
                          "budget_given", p->budget_given, "rows_at_ctx", (json_int_t)p->rows_at_ctx, "ctx_per_row",
                          (json_int_t)p->ctx_per_row, "max_one_request", (json_int_t)p->max_one_request,
                          "step_tokens", (json_int_t)p->step_tokens, "activation_bytes",
                          (json_int_t)p->activations, "total_bytes", (json_int_t)p->total);
    if (o && p->ctx_train > 0)
        json_object_set_new(o, "ctx_train", json_integer((json_int_t)p->ctx_train));
    if (o && audio_work)
        json_object_set_new(o, "audio_work_bytes", json_integer((json_int_t)*audio_work));
    if (o && vision_work)
        json_object_set_new(o, "vision_work_bytes", json_integer((json_int_t)*vision_work));
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (!text) {
        fprintf(stderr, "tern fit: out of memory\n");
        return 1;
    }
    puts(text);
    free(text);
    return 0;
}

int cmd_fit(int argc, char **argv) {
    tern_opt opts[] = {{"ctx", 1, 0},         {"parallel", 1, 0}, {"budget", 1, 0}, {"chunk", 1, 0},
                       {"step-tokens", 1, 0}, {"model", 1, 0},    {"help", 0, 0},   {"mmproj", 1, 0},
                       {"json", 0, 0},        TERN_KV_OPTS,       {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("fit", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (np >= 1 && cli_resolve_model("fit", opts, pos))
        return 1;
    int64_t ctx, parallel, chunk, step;
    tern_kv_type kt, vt;
    const char *budget_s = tern_args_get(opts, "budget");
    double budget_gib = 0;
    if (budget_s) {
        char *end;
        budget_gib = strtod(budget_s, &end);
        if (end == budget_s || *end || !(budget_gib > 0) || budget_gib > 1e6) {
            fprintf(stderr, "tern fit: --budget must be a number of GiB > 0, got '%s'\n", budget_s);
            return 2;
        }
    }
    if (np != 1 || tern_args_int("fit", opts, "ctx", 0, 1, 1 << 24, &ctx) ||
        tern_args_int("fit", opts, "parallel", 4, 1, 4096, &parallel) ||
        tern_args_int("fit", opts, "chunk", 0, 1, 1 << 16, &chunk) ||
        tern_args_int("fit", opts, "step-tokens", 0, 1, 1 << 20, &step) ||
        tern_kv_args("fit", opts, TERN_KV_BF16, &kt, &vt)) {
        fputs(usage, stderr);
        return 2;
    }
    tern_fit_plan plan;
    tern_lm_spec *spec = NULL;
    tern_err *err = tern_lm_spec_load(pos[0], &spec);
    if (!err)
        err = tern_fit_compute(spec, ctx, (int)parallel, (uint64_t)(budget_gib * 1024.0 * 1024.0 * 1024.0),
                               kt, vt, chunk, step, &plan);
    tern_lm_spec_free(spec);
    if (err) {
        fprintf(stderr, "tern fit: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    /* The towers' weights are among the other tensors (mapped, read while a clip or an image encodes); one clip and
     * one image at a time are encoded, each in a work area of its own (the image's at its largest budget). */
    uint64_t audio_work = 0, vision_work = 0;
    int has_audio = 0, has_vision = 0;
    tern_audio_input *audio = NULL;
    tern_image_input *image = NULL;
    if (!(err = tern_audio_input_find(pos[0], tern_args_get(opts, "mmproj"), &audio)) && audio) {
        has_audio = 1;
        audio_work = tern_audio_input_work_bytes(audio);
        tern_audio_input_free(audio);
    }
    if (!err && !(err = tern_image_input_find(pos[0], tern_args_get(opts, "mmproj"), &image)) && image) {
        has_vision = 1;
        vision_work = tern_image_input_work_bytes(image);
        tern_image_input_free(image);
    }
    if (err) {
        fprintf(stderr, "tern fit: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    if (tern_args_get(opts, "json"))
        return print_json(pos[0], &plan, kt, vt, has_audio ? &audio_work : NULL, has_vision ? &vision_work : NULL);
    print_plan(pos[0], &plan, kt, vt);
    if (has_audio)
        printf("audio:        %s work area while a 30 s clip encodes (one clip at a time); with it %s\n",
               human(audio_work), human(plan.total + audio_work));
    if (has_vision)
        printf("vision:       %s work area while an image encodes at the largest budget (one at a time); with it %s\n",
               human(vision_work), human(plan.total + vision_work));
    return 0;
}
