/* cmd_run.c — `tern run`: one generation through the public engine API, text streamed to stdout as it
 * decodes. The prompt is a chat message rendered with the model's template (--prompt), raw text
 * (--raw), or token ids (--ids). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "chat/jinja.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ids.h"
#include "tern/tern.h"

static const char *usage =
    "usage: tern run MODEL_DIR (--prompt TEXT | --raw TEXT | --ids 2,105,...) [-n 64] [--temp 0] [--top-k K]\n"
    "                [--top-p P] [--min-p P] [--seed S] [--threads T] [--ctx N] [--system TEXT] [--think]\n"
    "                [--print-ids] [--stats]\n"
    "--prompt renders a user message with the model's chat template; --raw tokenizes the text as is (with BOS);\n"
    "--ids takes token ids. Generated text streams to stdout; --print-ids prints the ids instead.\n";

static int parse_float(const tern_opt *opts, const char *name, float dflt, float lo, float hi, float *out) {
    const char *v = tern_args_get(opts, name);
    *out = dflt;
    if (!v)
        return 0;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "tern run: --%s must be a number in [%g, %g], got '%s'\n", name, lo, hi, v);
        return -1;
    }
    *out = (float)x;
    return 0;
}

/* The chat prompt of one user message (and an optional system message), as token ids. */
static tern_err *chat_ids(const tern_model *m, const char *system, const char *user, int think, int32_t **ids,
                          size_t *n) {
    const char *origin;
    const char *src = tern_model_chat_template(m, &origin);
    if (!src)
        return tern_errf(TERN_ENOTFOUND, "the model has no chat template (use --raw or --ids)");
    tern_jinja *tpl = NULL;
    json_t *messages = json_array(), *ctx = NULL, *kwargs = json_pack("{s:b}", "enable_thinking", think);
    if (system)
        json_array_append_new(messages, json_pack("{s:s,s:s}", "role", "system", "content", system));
    json_array_append_new(messages, json_pack("{s:s,s:s}", "role", "user", "content", user));
    char *text = NULL;
    size_t len;
    tern_err *err = tern_jinja_compile(src, strlen(src), origin, &tpl);
    tern_chat_input in = {.messages = messages, .template_kwargs = kwargs, .add_generation_prompt = 1,
                          .bos_token = "<bos>", .eos_token = "<eos>"};
    if (!err)
        err = tern_chat_build_context(&in, &ctx);
    if (!err)
        err = tern_chat_render(tpl, ctx, &text, &len);
    if (!err)
        err = tern_chat_tokenize(m, text, len, ids, n);
    free(text);
    json_decref(ctx);
    json_decref(messages);
    json_decref(kwargs);
    tern_jinja_free(tpl);
    return err;
}

int cmd_run(int argc, char **argv) {
    tern_opt opts[] = {{"ids", 1, 0},     {"prompt", 1, 0}, {"raw", 1, 0},     {"n", 1, 0},      {"temp", 1, 0},
                       {"top-k", 1, 0},   {"top-p", 1, 0},  {"min-p", 1, 0},   {"seed", 1, 0},   {"threads", 1, 0},
                       {"ctx", 1, 0},     {"system", 1, 0}, {"think", 0, 0},   {"print-ids", 0, 0},
                       {"stats", 0, 0},   {"help", 0, 0},   {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("run", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    const char *ids_s = tern_args_get(opts, "ids"), *prompt = tern_args_get(opts, "prompt"), *raw = tern_args_get(opts, "raw");
    tern_request req;
    tern_request_default(&req);
    int64_t n_gen, top_k, seed, threads, ctx;
    if (np != 1 || (!!ids_s + !!prompt + !!raw) != 1 || tern_args_int("run", opts, "n", 64, 1, 1 << 24, &n_gen) ||
        tern_args_int("run", opts, "top-k", 0, 0, 1 << 30, &top_k) ||
        tern_args_int("run", opts, "seed", -1, -1, INT64_MAX, &seed) ||
        tern_args_int("run", opts, "threads", 0, 0, 1024, &threads) ||
        tern_args_int("run", opts, "ctx", 0, 0, 1 << 24, &ctx) ||
        parse_float(opts, "temp", 0.0f, 0.0f, 100.0f, &req.sampling.temperature) ||
        parse_float(opts, "top-p", 1.0f, 0.0f, 1.0f, &req.sampling.top_p) ||
        parse_float(opts, "min-p", 0.0f, 0.0f, 1.0f, &req.sampling.min_p)) {
        fputs(usage, stderr);
        return 2;
    }
    req.sampling.top_k = (int)top_k;
    if (seed >= 0) {
        req.sampling.seed = (uint64_t)seed;
        req.sampling.has_seed = 1;
    }
    req.max_tokens = n_gen;
    int print_ids = tern_args_get(opts, "print-ids") != NULL;
    tern_model_opts mo = {.model_dir = pos[0], .threads = (int)threads};
    tern_model *m = NULL;
    tern_engine *e = NULL;
    tern_stream *s = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    tern_err *err = tern_model_load(&mo, &m);
    if (!err && ids_s) {
        int64_t k;
        err = tern_parse_ids(ids_s, &ids, &k);
        n = (size_t)k;
    } else if (!err && prompt) {
        err = chat_ids(m, tern_args_get(opts, "system"), prompt, tern_args_get(opts, "think") != NULL, &ids, &n);
    } else if (!err) {
        req.prompt_text = raw;
        req.prompt_text_len = strlen(raw);
        req.add_special = 1;
    }
    if (ids) {
        req.prompt_ids = ids;
        req.n_prompt_ids = n;
    }
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.parallel = 1;
    eo.threads = (int)threads;
    if (ctx)
        eo.ctx = ctx;
    if (!err)
        err = tern_engine_create(m, &eo, &e);
    if (!err)
        err = tern_engine_submit(e, &req, NULL, NULL, &s, NULL);
    tern_event ev;
    int first = 1;
    while (!err && tern_stream_next(s, &ev, -1) == 1) {
        if (ev.kind == TERN_EV_TOKEN && print_ids)
            printf("%s%d", first ? "" : " ", ev.token);
        else if (!print_ids)
            fwrite(ev.text, 1, ev.text_len, stdout);
        first = 0;
        fflush(stdout);
        if (ev.kind == TERN_EV_DONE) {
            printf("\n");
            if (ev.finish == TERN_FINISH_ERROR)
                err = tern_errf(TERN_EINTERNAL, "%s", ev.error);
            else if (tern_args_get(opts, "stats"))
                fprintf(stderr, "prompt %lld tokens (%lld cached), generated %lld; ttft %.3f s, decode %.2f tok/s\n",
                        (long long)ev.usage.prompt_tokens, (long long)ev.usage.cached_tokens,
                        (long long)ev.usage.completion_tokens, ev.timings.ttft_s,
                        ev.timings.decode_s > 0 ? (double)(ev.usage.completion_tokens - 1) / ev.timings.decode_s : 0.0);
        }
    }
    tern_stream_free(s);
    tern_engine_destroy(e);
    tern_free(ids);
    tern_model_free(m);
    if (err) {
        fprintf(stderr, "tern run: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
