/* server.h — the HTTP server over a loaded model and a running engine: OpenAI (/v1/chat/completions,
 * /v1/completions, /v1/responses, /v1/embeddings, /v1/models), Anthropic (/v1/messages), /health, /metrics and the chat page at /. `tern serve` is a thin shell
 * around this; docs/api.md lists every endpoint and field.
 *
 * Threads: libmicrohttpd runs one thread per connection (bounded by max_connections); a request's thread
 * renders and tokenizes its prompt, submits it to the engine and then waits on its event stream, writing SSE
 * as tokens arrive. The engine thread does all model work. Shutdown is two-phase: tern_server_quiesce stops
 * accepting, in-flight requests finish (tern_server_inflight reaches 0) or are cut off by destroying the
 * engine after tern_server_detach_engine, then tern_server_stop closes everything. */
#ifndef TERN_SERVER_SERVER_H
#define TERN_SERVER_SERVER_H

#include <stdint.h>

#include "core/status.h"
#include "tern/tern.h"

typedef struct tern_server_config {
    const char *host;     /* address to bind; default "127.0.0.1" */
    int port;             /* 0 = any free port (tern_server_port tells which) */
    const char *api_key;  /* NULL: no authentication; several keys are separated by newlines (any one admits) */
    int metrics_public;   /* 1: /metrics answers without a key (for a scraper inside a trusted network) */
    const char *tls_cert_pem, *tls_key_pem; /* both set: serve HTTPS with this certificate (chain) and private key, PEM
                                             * text */
    const char *model_id; /* the id /v1/models reports and responses echo; NULL = the model directory's name */
    uint64_t max_body;    /* bytes of request body; default 16 MiB */
    int timeout_s;        /* idle connection timeout and the longest a request may run; default 600 */
    int max_connections;  /* concurrent connections (one thread each); default 256 */
    int listen_fd;        /* a socket from tern_server_listen (the server takes it over), or -1 (default): bind
                           * host:port when starting */
    const char *model_dir; /* names the model (when model_id is NULL) for a server started before it loads */
    int audio_windows;     /* a clip longer than 30 s: encode up to this many 30 s windows; default 1 (truncate) */
    /* image_url parts naming an http(s) URL: fetched by this (with its own limits) into *bytes (malloc'd), or
     * refused with a reason; NULL (default): refused with a 400 naming --allow-image-urls */
    tern_err *(*fetch_image_url)(void *ctx, const char *url, void **bytes, size_t *len);
    void *fetch_ctx;
    int responses_store;   /* /v1/responses kept for previous_response_id and GET (oldest dropped first, and past
                            * 64 MiB); default 1000, 0 keeps none */
    tern_pooling pooling;  /* /v1/embeddings: how the final hidden states pool; default mean */
    int no_webui;          /* 1: GET / answers 404 instead of the chat page */
} tern_server_config;

typedef struct tern_server tern_server;

/* Fills the defaults documented above. */
void tern_server_config_default(tern_server_config *c);
/* Binds host:port and listens, so that a caller can learn that the address is taken (or not permitted) before
 * it spends time loading a model; *fd goes into tern_server_config.listen_fd (or is closed by the caller). */
TERN_MUST_CHECK tern_err *tern_server_listen(const char *host, int port, int *fd);
/* Starts listening; `m` and `e` must outlive the server (see tern_server_detach_engine). Errors name the address
 * when it cannot be bound and the template when it does not compile. With m and e NULL the server starts
 * loading: /health answers 503 {"status": "loading"}, /metrics answers, every other request gets 503 with
 * Retry-After, until tern_server_attach. */
TERN_MUST_CHECK tern_err *tern_server_start(tern_model *m, tern_engine *e, const tern_server_config *c, tern_server **out);
/* The model has loaded: the server started without one serves m through e from now on. */
void tern_server_attach(tern_server *s, tern_model *m, tern_engine *e);
/* The port actually bound. */
int tern_server_port(const tern_server *s);
/* The model id responses carry. */
const char *tern_server_model_id(const tern_server *s);
/* Starts draining: new generation requests get 503 with Retry-After (the listening socket stays open, so a client or
 * a load balancer hears why), /health and /health/ready say "draining" (503), /health/live still 200; in-flight
 * requests continue. */
void tern_server_drain(tern_server *s);
/* Drains and stops accepting connections at all (the listening socket closes); in-flight requests continue. */
void tern_server_quiesce(tern_server *s);
/* Generation requests still being answered. */
int tern_server_inflight(tern_server *s);
/* Makes the server stop using the engine (requests after this get 503) so the caller may destroy it; waits
 * for submits in progress. Streams already open keep reading their events. */
void tern_server_detach_engine(tern_server *s);
/* Closes every connection, joins the threads and frees the server; NULL is fine. */
void tern_server_stop(tern_server *s);

#endif
