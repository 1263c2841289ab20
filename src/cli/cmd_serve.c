/* cmd_serve.c — `tern serve MODEL_DIR`: loads the model, starts the engine and the HTTP server, prints one ready
 * line, and on SIGINT/SIGTERM drains (no new connections, running requests finish, up to --timeout) and exits 0.
 * A second signal stops at once: running requests end with an error frame / 503. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_ref.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/sbuf.h"
#include "core/timeutil.h"
#include "cli/draft_args.h"
#include "cli/kv_args.h"
#include "hub/url_fetch.h"
#include "server/server.h"
#include "tern/tern.h"

static const char *usage =
    "usage: tern serve [-m] MODEL_DIR [--host 127.0.0.1] [--port 8080] [-np 4] [-c N] [--api-key KEY]\n"
    "                  [--max-queue 64] [--timeout 600] [--max-body 16777216] [--threads T] [--alias NAME]\n"
    "                  [--draft-model DIR] [--draft-ngram] [--draft-max 8] [--draft-min 1] [--audio-windows 1]\n"
    "                  [--mmproj FILE] [--allow-image-urls] [--kv T | -ctk T -ctv T] [--responses-store 1000]\n"
    "                  [--pooling mean|last|cls] [--cache-disk DIR [--cache-disk-size GB]]\n"
    "                  [--api-key-file F] [--metrics-public] [--ssl-cert-file F --ssl-key-file F] [--no-webui]\n"
    "Serves the model over HTTP: OpenAI /v1/chat/completions (text, images and audio), /v1/completions,\n"
    "/v1/responses, /v1/embeddings, /v1/audio/transcriptions, /v1/models; Anthropic\n"
    "/v1/messages; /health; /metrics (see docs/api.md); a chat page for the browser at /.\n"
    "  --host       address to bind (default 127.0.0.1, loopback only)\n"
    "  --port       TCP port; 0 picks a free one (the ready line says which); checked before the model loads\n"
    "  -np, --parallel  requests decoded together in one batch (default 4)\n"
    "  -c, --ctx    positions per request, prompt + reply (default min(trained, 8192))\n"
    "  -t, --threads  kernel threads (default: one per core)\n"
    "  --api-key    require 'Authorization: Bearer KEY' (or x-api-key); also read from TERN_API_KEY\n"
    "  --api-key-file F  more keys, one a line ('#' starts a comment); any one admits\n"
    "  --metrics-public  /metrics answers without a key\n"
    "  --no-webui   no chat page at / (the API is unchanged)\n"
    "  --ssl-cert-file F --ssl-key-file F  serve HTTPS with this certificate (chain) and private key (PEM)\n"
    "  --max-queue  requests waiting for a row before new ones get 429\n"
    "  --timeout    seconds a connection may idle, and a request may run, before it is cut off\n"
    "  --drain-timeout S  on SIGTERM/SIGINT: new requests get 503 with Retry-After while those in flight finish,\n"
    "               for up to S seconds (default: --timeout); a second signal stops at once\n"
    "  --max-body   largest request body in bytes (413 beyond)\n"
    "  --alias      the model id clients see (default: the directory's name)\n"
    "  --mmproj FILE  the audio and/or vision tower as a GGUF multimodal projector (llama.cpp's mmproj-*.gguf; a\n"
    "               folder of GGUF files is searched for one)\n"
    "  --allow-image-urls  fetch image_url parts that name an http(s) URL (at most 20 MB, 10 s each); without it\n"
    "               only data: URIs are taken\n"
    "  --audio-windows N  a clip longer than 30 s: encode up to N 30 s windows, each its own run of soft tokens\n"
    "               (default 1: the first 30 s, as the reference does)\n"
    "  --responses-store N  /v1/responses kept in memory for previous_response_id and GET (oldest dropped first,\n"
    "               64 MiB at most; 0 keeps none)\n"
    "  --pooling    how /v1/embeddings pools the final hidden states: mean (default), last token, or cls (first)\n"
    "  --cache-disk DIR  keep the prompt cache's K/V on disk too (written in the background): a restart, or a prompt\n"
    "               the memory tier has let go, finds its prefix again instead of recomputing it\n"
    "  --cache-disk-size GB  the disk tier's cap (default 10; least recently used files go first)\n";

static int wait_signal(const sigset_t *set, int timeout_ms) {
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

/* The API keys (--api-key or TERN_API_KEY, and the lines of --api-key-file), newline-separated, or NULL for none; the
 * TLS certificate and key as PEM text, or NULL. 0, or -1 after saying what is wrong. */
static int read_secrets(const tern_opt *opts, char **keys, char **cert, char **key) {
    const char *one = tern_args_get(opts, "api-key"), *file = tern_args_get(opts, "api-key-file");
    if (!one)
        one = getenv("TERN_API_KEY");
    sbuf b = {0};
    if (one && *one)
        sbuf_adds(&b, one);
    tern_err *err = NULL;
    if (file) {
        char *text = NULL;
        size_t len = 0;
        if (!(err = tern_read_file(file, 1 << 20, &text, &len))) {
            for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                while (*line == ' ' || *line == '\t')
                    line++;
                size_t n = strcspn(line, "#");
                while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
                    n--;
                if (n && (b.len ? sbuf_adds(&b, "\n") : 0) == 0)
                    sbuf_add(&b, line, n);
            }
            free(text);
            if (!b.len)
                err = tern_errf(TERN_EINVAL, "--api-key-file %s holds no key", file);
        }
    }
    const char *cf = tern_args_get(opts, "ssl-cert-file"), *kf = tern_args_get(opts, "ssl-key-file");
    size_t len;
    if (!err && !cf != !kf)
        err = tern_errf(TERN_EINVAL, "HTTPS needs both --ssl-cert-file and --ssl-key-file");
    if (!err && cf && !(err = tern_read_file(cf, 1 << 20, cert, &len)))
        err = tern_read_file(kf, 1 << 20, key, &len);
    if (!err && b.oom)
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (err) {
        fprintf(stderr, "tern serve: %s\n", tern_err_msg(err));
        tern_err_free(err);
        sbuf_free(&b);
        return -1;
    }
    *keys = b.len ? b.p : NULL;
    if (!b.len)
        sbuf_free(&b);
    return 0;
}

int cmd_serve(int argc, char **argv) {
    tern_opt opts[] = {{"host", 1, 0},     {"port", 1, 0},     {"parallel", 1, 0}, {"ctx", 1, 0},
                       {"api-key", 1, 0},  {"max-queue", 1, 0}, {"timeout", 1, 0}, {"max-body", 1, 0},
                       {"threads", 1, 0},  {"alias", 1, 0},    {"model", 1, 0}, {"help", 0, 0},
                       {"audio-windows", 1, 0}, {"allow-image-urls", 0, 0}, {"mmproj", 1, 0}, {"responses-store", 1, 0}, {"pooling", 1, 0},
                       {"cache-disk", 1, 0}, {"cache-disk-size", 1, 0}, {"api-key-file", 1, 0},
                       {"metrics-public", 0, 0}, {"ssl-cert-file", 1, 0}, {"ssl-key-file", 1, 0},
                       {"drain-timeout", 1, 0}, {"no-webui", 0, 0},
                       TERN_DRAFT_OPTS, TERN_KV_OPTS,    {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("serve", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        fputs(TERN_DRAFT_USAGE, stdout);
        fputs(TERN_KV_USAGE, stdout);
        return 0;
    }
    if (np >= 1 && cli_resolve_model("serve", opts, pos))
        return 1;
    int64_t port, parallel, ctx, max_queue, timeout, max_body, threads, windows, store, disk_gb, drain_timeout;
    if (np != 1 || tern_args_int("serve", opts, "port", 8080, 0, 65535, &port) ||
        tern_args_int("serve", opts, "parallel", 4, 1, 256, &parallel) ||
        tern_args_int("serve", opts, "ctx", 0, 0, 1 << 24, &ctx) ||
        tern_args_int("serve", opts, "max-queue", 64, 1, 1 << 20, &max_queue) ||
        tern_args_int("serve", opts, "timeout", 600, 1, 7 * 24 * 3600, &timeout) ||
        tern_args_int("serve", opts, "max-body", 16 << 20, 1024, (int64_t)1 << 34, &max_body) ||
        tern_args_int("serve", opts, "threads", 0, 0, 1024, &threads) ||
        tern_args_int("serve", opts, "audio-windows", 1, 1, 64, &windows) ||
        tern_args_int("serve", opts, "responses-store", 1000, 0, 1 << 20, &store) ||
        tern_args_int("serve", opts, "cache-disk-size", 10, 1, 1 << 20, &disk_gb) ||
        tern_args_int("serve", opts, "drain-timeout", timeout, 0, 7 * 24 * 3600, &drain_timeout)) {
        fputs(usage, stderr);
        return 2;
    }
    const char *pooling = tern_args_get(opts, "pooling") ? tern_args_get(opts, "pooling") : "mean";
    if (strcmp(pooling, "mean") && strcmp(pooling, "last") && strcmp(pooling, "cls")) {
        fprintf(stderr, "tern serve: --pooling must be mean, last or cls, got '%s'\n", pooling);
        return 2;
    }
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    tern_kv_type kt, vt;
    if (tern_draft_args("serve", opts, &eo) || tern_kv_args("serve", opts, TERN_KV_BF16, &kt, &vt))
        return 2;
    eo.cache_type_k = tern_kv_type_name(kt);
    eo.cache_type_v = tern_kv_type_name(vt);
    char *api_key = NULL, *cert = NULL, *cert_key = NULL;
    if (read_secrets(opts, &api_key, &cert, &cert_key)) {
        free(api_key), free(cert), free(cert_key);
        return 2;
    }

    /* Signals are taken synchronously by this thread; every thread started from here inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    tern_model *model = NULL;
    tern_engine *engine = NULL;
    tern_server *server = NULL;
    tern_model_opts mo = {.model_dir = pos[0], .threads = (int)threads, .mmproj_path = tern_args_get(opts, "mmproj")};
    const char *host = tern_args_get(opts, "host") ? tern_args_get(opts, "host") : "127.0.0.1";
    /* The address first: a port in use is known in a moment, not after the model has loaded; and the server
     * answers while it loads (/health says "loading", requests get 503 with Retry-After). */
    int listen_fd = -1, no_webui = tern_args_get(opts, "no-webui") != NULL;
    tern_err *err = tern_server_listen(host, (int)port, &listen_fd);
    if (!err) {
        tern_server_config sc;
        tern_server_config_default(&sc);
        sc.host = host;
        sc.port = (int)port;
        sc.listen_fd = listen_fd;
        listen_fd = -1; /* the server owns it now */
        sc.api_key = api_key;
        sc.metrics_public = tern_args_get(opts, "metrics-public") != NULL;
        sc.no_webui = no_webui;
        sc.tls_cert_pem = cert;
        sc.tls_key_pem = cert_key;
        sc.model_id = tern_args_get(opts, "alias");
        sc.model_dir = pos[0];
        sc.timeout_s = (int)timeout;
        sc.max_body = (uint64_t)max_body;
        sc.audio_windows = (int)windows;
        static hub_url_limits image_urls = {.max_bytes = 20u << 20, .timeout_s = 10};
        if (tern_args_get(opts, "allow-image-urls")) {
            sc.fetch_image_url = hub_url_fetch;
            sc.fetch_ctx = &image_urls;
        }
        sc.responses_store = (int)store;
        sc.pooling = !strcmp(pooling, "last") ? TERN_POOL_LAST : !strcmp(pooling, "cls") ? TERN_POOL_CLS : TERN_POOL_MEAN;
        sc.max_connections = (int)(parallel + max_queue + 64);
        err = tern_server_start(NULL, NULL, &sc, &server);
    }
    if (!err) {
        fprintf(stderr, "tern serve: loading %s (port %d answers meanwhile: /health says \"loading\")\n", pos[0],
                tern_server_port(server));
        err = tern_model_load(&mo, &model);
    }
    if (!err) {
        eo.parallel = (int)parallel;
        eo.ctx = ctx;
        eo.max_queue = (int)max_queue;
        eo.threads = (int)threads;
        eo.prefix_disk_dir = tern_args_get(opts, "cache-disk");
        eo.prefix_disk_bytes = (uint64_t)disk_gb << 30;
        err = tern_engine_create(model, &eo, &engine);
    }
    if (err) {
        if (listen_fd >= 0)
            close(listen_fd);
        fprintf(stderr, "tern serve: %s\n", tern_err_msg(err));
        tern_err_free(err);
        tern_server_stop(server);
        tern_engine_destroy(engine);
        tern_model_free(model);
        free(api_key), free(cert), free(cert_key);
        return 1;
    }
    tern_server_attach(server, model, engine);

    tern_metrics em;
    tern_engine_metrics(engine, &em);
    tern_model_info info;
    tern_model_get_info(model, &info);
    int v6 = strchr(host, ':') != NULL;
    printf("tern: serving %s at %s://%s%s%s:%d (parallel %d, %d threads, ctx %lld, KV budget %.1f MiB, weights "
           "%.1f MiB%s)\n",
           tern_server_model_id(server), cert ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "",
           tern_server_port(server), em.parallel,
           em.threads, (long long)em.ctx, (double)em.kv_budget_bytes / (1 << 20), (double)info.weights_bytes / (1 << 20),
           api_key ? ", API key required" : "");
    if (!no_webui) { /* a wildcard address is reached at localhost from this machine */
        int any = !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
        printf("tern: chat in the browser at %s://%s%s%s:%d/\n", cert ? "https" : "http", v6 && !any ? "[" : "",
               any ? "localhost" : host, v6 && !any ? "]" : "", tern_server_port(server));
    }
    fflush(stdout);

    int sig;
    while (!(sig = wait_signal(&set, 1000)))
        ;
    /* Drain: new requests hear 503 with Retry-After (the port stays open, so a load balancer learns why), the ones in
     * flight finish, up to --drain-timeout; then the port closes. */
    tern_server_drain(server);
    int n = tern_server_inflight(server);
    fprintf(stderr, "tern serve: %s: draining %d request%s (up to %lld s; signal again to stop now)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", n, n == 1 ? "" : "s", (long long)drain_timeout);
    double deadline = tern_now_s() + (double)drain_timeout;
    while (tern_server_inflight(server) > 0 && tern_now_s() < deadline)
        if (wait_signal(&set, 100)) {
            fprintf(stderr, "tern serve: stopping now\n");
            break;
        }
    tern_server_quiesce(server);
    tern_server_detach_engine(server);
    tern_engine_destroy(engine); /* unfinished requests end as cancelled; their streams close */
    /* Give each connection a moment to send its final frames (the error frame, [DONE]) before the HTTP
     * daemon stops and closes whatever is left. */
    for (double until = tern_now_s() + 5.0; tern_server_inflight(server) > 0 && tern_now_s() < until;)
        wait_signal(&set, 10);
    tern_server_stop(server);
    tern_model_free(model);
    free(api_key), free(cert), free(cert_key);
    fprintf(stderr, "tern serve: stopped\n");
    return 0;
}
