/* cmd_run.c — `tern run`: generation through the public engine API, text streamed to stdout as it decodes.
 * With a prompt (positional, --prompt, --raw or --ids) it generates once; without one it is an interactive
 * chat: each line read is a user message, the reply streams back, and the conversation so far is the next
 * prompt (the engine's prefix cache keeps earlier turns' K/V, so a turn costs only its new tokens). */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "core/base64.h"
#include "core/fileio.h"
#include "cli/draft_args.h"
#include "cli/kv_args.h"
#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/ids.h"
#include "core/sbuf.h"
#include "loader/loader.h"
#include "tern/tern.h"

static const char *usage =
    "usage: tern run [-m] MODEL_DIR [PROMPT] [options]\n"
    "With a PROMPT, generates one reply to it (a user message in the model's chat template) and streams it to\n"
    "stdout. Without one, chats: each line you type is a message and the reply streams back; /clear starts a new\n"
    "conversation, /exit or Ctrl-D ends, Ctrl-C stops a reply (at the prompt: ends).\n"
    "  -p, --prompt TEXT   the prompt (same as the positional PROMPT)\n"
    "  --raw TEXT          tokenize TEXT as is (with BOS), no chat template\n"
    "  --ids 2,105,...     token ids as the prompt\n"
    "  --audio FILE        an audio clip (any supported container; the first 30 s) before the prompt in the user\n"
    "                      message (models with an audio tower); without a prompt: \"Transcribe this audio clip.\"\n"
    "  --image FILE        an image (PNG, JPEG, WebP, GIF, BMP) before the prompt in the user message (models\n"
    "                      with a vision tower); without a prompt: \"Describe this image.\"\n"
    "  --mmproj FILE       the audio/vision towers as a GGUF multimodal projector (llama.cpp's mmproj-*.gguf)\n"
    "  --audio-windows N   a clip longer than 30 s: encode up to N 30 s windows, each its own run of soft tokens\n"
    "                      (default 1: the first 30 s, as the reference does)\n"
    "  --system TEXT       a system message first\n"
    "  --think             let the model think first (enable_thinking in the template)\n"
    "  -n N                most tokens per reply (default 64 for one prompt; as many as fit in a chat)\n"
    "  --temp T            temperature (default 0: greedy); --top-k K, --top-p P, --min-p P, -s/--seed S\n"
    "  -c, --ctx N         positions per conversation (default min(trained, 8192))\n"
    "  -t, --threads T     kernel threads (default: one per core)\n"
    "  --print-ids         print token ids instead of text\n"
    "  --stats             after each reply, print prompt/cache/decode figures to stderr on a line of their own\n";

/* Set by SIGINT: stop the reply being generated (or, at the prompt, end the chat). */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig, interrupted = 1; }

typedef struct run_ctx {
    tern_model *model;
    tern_engine *engine;
    const tern_chat_format *chat;
    int think, print_ids, stats;
    tern_request base; /* sampling and limits shared by every turn */
} run_ctx;

/* The prompt ids of a conversation (OpenAI-style messages) rendered with the model's chat template. */
static TERN_MUST_CHECK tern_err *chat_ids(const run_ctx *c, json_t *messages, int32_t **ids, size_t *n) {
    if (!c->chat->tpl)
        return tern_errf(TERN_ENOTFOUND, "the model has no chat template (use --raw or --ids)");
    json_t *kwargs = json_pack("{s:b}", "enable_thinking", c->think);
    tern_err *err = tern_model_chat_prompt(c->model, messages, NULL, kwargs, 1, ids, n);
    json_decref(kwargs);
    return err;
}

/* Submits `req`, streams the reply to stdout (and into *reply when not NULL); Ctrl-C cancels it. */
static TERN_MUST_CHECK tern_err *generate(const run_ctx *c, const tern_request *req, sbuf *reply) {
    tern_stream *s = NULL;
    TERN_TRY(tern_engine_submit(c->engine, req, NULL, NULL, &s, NULL));
    tern_err *err = NULL;
    tern_event ev;
    int first = 1, rc;
    while ((rc = tern_stream_next(s, &ev, 100)) >= 0) {
        if (interrupted) {
            interrupted = 0;
            tern_stream_cancel(s);
        }
        if (rc == 0)
            continue;
        if (ev.kind == TERN_EV_TOKEN && c->print_ids)
            printf("%s%d", first ? "" : " ", ev.token);
        else if (!c->print_ids)
            fwrite(ev.text, 1, ev.text_len, stdout);
        if (reply && !c->print_ids)
            sbuf_add(reply, ev.text, ev.text_len);
        first = 0;
        fflush(stdout);
        if (ev.kind != TERN_EV_DONE)
            continue;
        printf("\n");
        fflush(stdout);
        if (ev.finish == TERN_FINISH_ERROR)
            err = tern_errf(TERN_EINTERNAL, "%s", ev.error);
        else if (c->stats)
            fprintf(stderr, "prompt %lld tokens (%lld cached), generated %lld%s; ttft %.3f s, decode %.2f tok/s\n",
                    (long long)ev.usage.prompt_tokens, (long long)ev.usage.cached_tokens,
                    (long long)ev.usage.completion_tokens, ev.finish == TERN_FINISH_CANCELLED ? " (stopped)" : "",
                    ev.timings.ttft_s,
                    ev.timings.decode_s > 0 ? (double)(ev.usage.completion_tokens - 1) / ev.timings.decode_s : 0.0);
    }
    tern_stream_free(s);
    if (reply && reply->oom && !err)
        err = tern_errf(TERN_ENOMEM, "out of memory keeping the reply");
    return err;
}

static json_t *new_conversation(const char *system) {
    json_t *m = json_array();
    if (system)
        json_array_append_new(m, json_pack("{s:s,s:s}", "role", "system", "content", system));
    return m;
}

/* A media part of a file's bytes: an image_url data URI, or an input_audio part. */
static TERN_MUST_CHECK tern_err *media_part(const char *path, int image, json_t **part) {
    char *bytes = NULL, *b64 = NULL;
    size_t len = 0;
    tern_err *err = tern_read_file(path, 1u << 30, &bytes, &len);
    if (!err && !(b64 = tern_base64_encode(bytes, len)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err) {
        char *uri = image ? malloc(strlen(b64) + 64) : NULL;
        if (uri) /* the bytes decide the format; the MIME type only has to say image */
            sprintf(uri, "data:image/*;base64,%s", b64);
        *part = image ? (uri ? json_pack("{s:s,s:{s:s}}", "type", "image_url", "image_url", "url", uri) : NULL)
                      : json_pack("{s:s,s:{s:s,s:s}}", "type", "input_audio", "input_audio", "data", b64, "format", "");
        free(uri);
        if (!*part)
            err = tern_errf(TERN_ENOMEM, "out of memory");
    }
    free(b64);
    free(bytes);
    return err;
}

/* A user message with an image and/or an audio clip (the files' bytes) before the prompt text, encoded on a pool of
 * `threads`. */
static TERN_MUST_CHECK tern_err *media_prompt(const run_ctx *c, const char *system, const char *image, const char *audio,
                              const char *prompt, int threads, int windows, tern_media_prompt *mp) {
    if (!c->chat->tpl)
        return tern_errf(TERN_ENOTFOUND, "the model has no chat template (needed to place the %s)",
                         image ? "image" : "audio");
    tern_pool *pool = NULL;
    json_t *content = json_array(), *messages = NULL, *kwargs = NULL, *part = NULL;
    tern_err *err = content ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    if (!err && image && !(err = media_part(image, 1, &part)))
        json_array_append_new(content, part);
    if (!err && audio && !(err = media_part(audio, 0, &part)))
        json_array_append_new(content, part);
    if (!err)
        err = tern_pool_create(threads > 0 ? threads : tern_cpu_count(), &pool);
    if (!err) {
        json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", prompt));
        messages = new_conversation(system);
        json_array_append_new(messages, json_pack("{s:s,s:O}", "role", "user", "content", content));
        kwargs = json_pack("{s:b}", "enable_thinking", c->think);
        tern_media_opts mo = {.audio_windows = windows, .pool = pool};
        err = tern_model_chat_prompt_media(c->model, messages, NULL, kwargs, 1, &mo, mp);
    }
    json_decref(content);
    json_decref(messages);
    json_decref(kwargs);
    tern_pool_destroy(pool);
    return err;
}

/* The interactive chat: reads lines from stdin until /exit, end of input or Ctrl-C at the prompt. */
static TERN_MUST_CHECK tern_err *chat(run_ctx *c, const char *system) {
    const int tty = isatty(STDIN_FILENO);
    json_t *messages = new_conversation(system);
    if (tty)
        fprintf(stderr, "Chatting with %s. /clear starts over, /exit or Ctrl-D ends, Ctrl-C stops a reply.\n",
                c->chat->tpl ? "the model" : "the model (no chat template!)");
    char *line = NULL;
    size_t cap = 0;
    tern_err *err = NULL;
    sbuf reply = {0};
    while (!err) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        interrupted = 0;
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) { /* end of input, or Ctrl-C at the prompt */
            if (tty)
                fputs("\n", stdout);
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (!n)
            continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit") || !strcmp(line, "/bye"))
            break;
        if (!strcmp(line, "/clear")) {
            json_decref(messages);
            messages = new_conversation(system);
            fprintf(stderr, "(new conversation)\n");
            continue;
        }
        if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
            fprintf(stderr, "/clear  start a new conversation\n/exit   end (also Ctrl-D)\n");
            continue;
        }
        json_array_append_new(messages, json_pack("{s:s,s:s}", "role", "user", "content", line));
        int32_t *ids = NULL;
        size_t nid = 0;
        err = chat_ids(c, messages, &ids, &nid);
        if (!err) {
            tern_request req = c->base;
            req.prompt_ids = ids;
            req.n_prompt_ids = nid;
            sbuf_clear(&reply);
            err = generate(c, &req, &reply);
        }
        tern_free(ids);
        if (!err)
            json_array_append_new(messages, json_pack("{s:s,s:s%}", "role", "assistant", "content",
                                                      reply.p ? reply.p : "", reply.len));
    }
    free(line);
    sbuf_free(&reply);
    json_decref(messages);
    return err;
}

int cmd_run(int argc, char **argv) {
    tern_opt opts[] = {{"ids", 1, 0},       {"prompt", 1, 0}, {"raw", 1, 0},   {"n", 1, 0},      {"temp", 1, 0},
                       {"top-k", 1, 0},     {"top-p", 1, 0},  {"min-p", 1, 0}, {"seed", 1, 0},   {"threads", 1, 0},
                       {"ctx", 1, 0},       {"system", 1, 0}, {"think", 0, 0}, {"print-ids", 0, 0},
                       {"stats", 0, 0},     {"model", 1, 0},  {"audio", 1, 0},  {"image", 1, 0}, {"audio-windows", 1, 0}, {"mmproj", 1, 0}, {"help", 0, 0},  TERN_DRAFT_OPTS, TERN_KV_OPTS,
                       {0, 0, 0}};
    const char *pos[2];
    int np = tern_args_parse("run", argc, argv, opts, pos, 2);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        fputs(TERN_DRAFT_USAGE, stdout);
        fputs(TERN_KV_USAGE, stdout);
        return 0;
    }
    if (np >= 1 && cli_resolve_model("run", opts, pos))
        return 1;
    const char *ids_s = tern_args_get(opts, "ids"), *prompt = tern_args_get(opts, "prompt");
    const char *raw = tern_args_get(opts, "raw");
    if (np == 2 && prompt) {
        fprintf(stderr, "tern run: the prompt is given twice: '%s' and --prompt\n", pos[1]);
        return 2;
    }
    if (np == 2)
        prompt = pos[1];
    const char *audio = tern_args_get(opts, "audio"), *image = tern_args_get(opts, "image");
    if ((audio || image) && (ids_s || raw)) {
        fprintf(stderr, "tern run: --%s goes with a chat prompt, not --ids or --raw\n", image ? "image" : "audio");
        return 2;
    }
    if ((audio || image) && !prompt)
        prompt = image ? "Describe this image." : "Transcribe this audio clip.";
    const int interactive = !ids_s && !prompt && !raw;
    run_ctx c = {.think = tern_args_get(opts, "think") != NULL, .print_ids = tern_args_get(opts, "print-ids") != NULL,
                 .stats = tern_args_get(opts, "stats") != NULL};
    tern_request_default(&c.base);
    int64_t n_gen, top_k, seed, threads, ctx, windows;
    if (np < 1) {
        fprintf(stderr, "tern run: which model? (tern run MODEL_DIR [PROMPT])\n");
        fputs(usage, stderr);
        return 2;
    }
    if ((!!ids_s + !!prompt + !!raw) > 1) {
        fprintf(stderr, "tern run: give one prompt: PROMPT/--prompt, --raw or --ids\n");
        return 2;
    }
    if (tern_args_int("run", opts, "n", interactive ? 0 : 64, interactive ? 0 : 1, 1 << 24, &n_gen) ||
        tern_args_int("run", opts, "top-k", 0, 0, 1 << 30, &top_k) ||
        tern_args_int("run", opts, "seed", -1, -1, INT64_MAX, &seed) ||
        tern_args_int("run", opts, "threads", 0, 0, 1024, &threads) ||
        tern_args_int("run", opts, "ctx", 0, 0, 1 << 24, &ctx) ||
        tern_args_int("run", opts, "audio-windows", 1, 1, 64, &windows) ||
        tern_args_float("run", opts, "temp", 0.0f, 0.0f, 100.0f, &c.base.sampling.temperature) ||
        tern_args_float("run", opts, "top-p", 1.0f, 0.0f, 1.0f, &c.base.sampling.top_p) ||
        tern_args_float("run", opts, "min-p", 0.0f, 0.0f, 1.0f, &c.base.sampling.min_p))
        return 2;
    c.base.sampling.top_k = (int)top_k;
    if (seed >= 0) {
        c.base.sampling.seed = (uint64_t)seed;
        c.base.sampling.has_seed = 1;
    }
    c.base.max_tokens = n_gen;
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    tern_kv_type kt, vt;
    if (tern_draft_args("run", opts, &eo) || tern_kv_args("run", opts, TERN_KV_BF16, &kt, &vt))
        return 2;
    eo.cache_type_k = tern_kv_type_name(kt);
    eo.cache_type_v = tern_kv_type_name(vt);

    tern_model_opts mo = {.model_dir = pos[0], .threads = (int)threads, .mmproj_path = tern_args_get(opts, "mmproj")};
    tern_media_prompt mp = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    tern_err *err = tern_model_load(&mo, &c.model);
    if (!err)
        c.chat = tern_model_chat_format(c.model);
    if (!err) {
        eo.parallel = 1;
        eo.threads = (int)threads;
        if (ctx)
            eo.ctx = ctx;
        err = tern_engine_create(c.model, &eo, &c.engine);
    }
    struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: Ctrl-C at the prompt ends the read */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (!err && interactive) {
        err = chat(&c, tern_args_get(opts, "system"));
    } else if (!err) {
        tern_request req = c.base;
        if (ids_s) {
            int64_t k;
            err = tern_parse_ids(ids_s, &ids, &k);
            n = (size_t)k;
        } else if (prompt && (audio || image)) {
            err = media_prompt(&c, tern_args_get(opts, "system"), image, audio, prompt, (int)threads, (int)windows,
                               &mp);
            req.prompt_ids = mp.ids;
            req.n_prompt_ids = mp.n;
            req.embeds = mp.spans;
            req.n_embeds = mp.n_spans;
        } else if (prompt) {
            json_t *messages = new_conversation(tern_args_get(opts, "system"));
            json_array_append_new(messages, json_pack("{s:s,s:s}", "role", "user", "content", prompt));
            err = chat_ids(&c, messages, &ids, &n);
            json_decref(messages);
        } else {
            req.prompt_text = raw;
            req.prompt_text_len = strlen(raw);
            req.add_special = 1;
        }
        if (ids) {
            req.prompt_ids = ids;
            req.n_prompt_ids = n;
        }
        if (!err)
            err = generate(&c, &req, NULL);
    }
    tern_engine_destroy(c.engine);
    tern_media_prompt_free(&mp);
    tern_free(ids);
    tern_model_free(c.model);
    if (err) {
        fprintf(stderr, "tern run: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
