/* server_internal.h — what the server's files share:
 *   http.c               libmicrohttpd: connections, body limits, authentication, replies, SSE streaming
 *   routes.c             which handler answers which method + path (404 / 405 otherwise)
 *   gen.c                one generation: submit, wait on events, notice a vanished client or the deadline
 *   params.c             request validation: field types and ranges, sampling, stops, logit bias
 *   openai_chat.c        POST /v1/chat/completions
 *   openai_completions.c POST /v1/completions
 *   openai_embeddings.c  POST /v1/embeddings
 *   openai_responses.c   POST /v1/responses, GET / DELETE /v1/responses/{id}, GET .../{id}/input_items
 *   responses_store.c    the responses kept for previous_response_id
 *   anthropic.c          POST /v1/messages, /v1/messages/count_tokens
 *   info.c               GET /health, /v1/models
 *   metrics.c            GET /metrics (Prometheus text) and the counters behind it
 *   errors.c             error bodies in OpenAI and Anthropic shape
 *   webui.c              GET /: the chat page compiled into the binary
 */
#ifndef TERN_SERVER_SERVER_INTERNAL_H
#define TERN_SERVER_SERVER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/jinja.h"
#include "core/json_util.h"
#include "core/sbuf.h"
#include "loader/loader.h"
#include "server/server.h"
#include "tern/tern.h"

struct MHD_Connection;
struct MHD_Daemon;

/* ---- errors (errors.c) --------------------------------------------------------------------------- */

typedef enum srv_api { API_OPENAI = 0, API_ANTHROPIC } srv_api;

/* The HTTP status for an error code: EINVAL/EFORMAT/EUNSUPPORTED/ENOTFOUND 400, EOVERLOAD 429, ENOMEM 503,
 * others 500. */
int srv_status_for_code(tern_code code);
/* The error "type" string for a status in the API's vocabulary (invalid_request_error, ...). */
const char *srv_error_type(srv_api api, int status);
/* A new error body: OpenAI {"error":{message,type,param,code}} or Anthropic {"type":"error","error":{type,message}}. */
json_t *srv_error_json(srv_api api, int status, const char *message);

/* ---- metrics (metrics.c) ------------------------------------------------------------------------- */

#define SRV_HIST_BUCKETS 16

typedef struct srv_hist {
    uint64_t count[SRV_HIST_BUCKETS + 1]; /* per bucket, then +Inf */
    double sum;
    uint64_t n;
} srv_hist;

enum { SRV_ROUTE_CHAT, SRV_ROUTE_COMPLETIONS, SRV_ROUTE_RESPONSES, SRV_ROUTE_EMBEDDINGS, SRV_ROUTE_MESSAGES, SRV_ROUTE_COUNT_TOKENS, SRV_ROUTE_MODELS,
       SRV_ROUTE_HEALTH, SRV_ROUTE_METRICS, SRV_ROUTE_TRANSCRIPTIONS, SRV_ROUTE_WEBUI, SRV_ROUTE_OTHER, SRV_N_ROUTES };

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t http[SRV_N_ROUTES][600]; /* responses by route and status code */
    uint64_t disconnects, timeouts;
    uint64_t completion_tokens;
    srv_hist ttft, tpot, e2e;       /* seconds: first token, per output token after the first, whole request */
} srv_metrics;

void srv_metrics_init(srv_metrics *m);
void srv_metrics_destroy(srv_metrics *m);
/* Counts one HTTP response. */
void srv_metrics_http(srv_metrics *m, int route, int status);
/* Observes a finished generation (its DONE event). */
void srv_metrics_done(srv_metrics *m, const tern_event *done);
/* Counts a client that went away mid-request, or a request cut off by the deadline. */
void srv_metrics_disconnect(srv_metrics *m);
void srv_metrics_timeout(srv_metrics *m);
/* Prometheus text exposition of the server's and (if e != NULL) the engine's counters; malloc'd. */
char *srv_metrics_render(srv_metrics *m, tern_engine *e, size_t *len);
/* The route label for metrics. */
const char *srv_route_name(int route);

/* ---- stored responses (responses_store.c) -------------------------------------------------------- */

typedef struct srv_resp_store srv_resp_store;

/* The byte cap of the responses store (its JSON text). */
#define SRV_RESPONSES_STORE_BYTES ((size_t)64 << 20)

/* A store of at most max_count responses and max_bytes bytes; max_count 0 keeps nothing. */
TERN_MUST_CHECK tern_err *srv_resp_store_new(int max_count, size_t max_bytes, srv_resp_store **out);
/* Frees every entry; NULL is fine. */
void srv_resp_store_free(srv_resp_store *st);
/* 1 if the store keeps anything. */
int srv_resp_store_enabled(const srv_resp_store *st);
/* Keeps copies of a response, its input items and the conversation it ends (chat messages), dropping the oldest
 * entries past the caps. 0, or -1 when it was not kept (store off, larger than the byte cap, out of memory). */
int srv_resp_store_put(srv_resp_store *st, const char *id, const json_t *response, const json_t *input_items,
                       const json_t *messages);
/* Copies of what is kept under id (any out pointer may be NULL): 1, 0 when unknown or dropped, -1 out of memory. */
int srv_resp_store_get(srv_resp_store *st, const char *id, json_t **response, json_t **input_items,
                       json_t **messages);
/* Forgets id: 1 if it was kept. */
int srv_resp_store_delete(srv_resp_store *st, const char *id);

/* ---- the server -------------------------------------------------------------------------------- */

struct tern_server {
    struct MHD_Daemon *daemon;
    tern_server_config cfg;
    char *host, *api_key, *model_id;
    int port;
    tern_model *model;
    tern_model_info info;
    const tern_chat_format *chat; /* the model's chat format (template, BOS/EOS texts, stops) */
    int64_t ctx;              /* positions per request (the engine's) */

    pthread_rwlock_t engine_lock; /* readers: submit/metrics; writer: detach */
    tern_engine *engine;          /* NULL once detached */
    atomic_int loading;           /* started before the model: only /health (503) and /metrics answer */
    atomic_int draining;
    atomic_int inflight;
    atomic_uint_fast64_t id_counter;
    uint64_t id_salt;
    long created; /* unix time the server started */
    pthread_mutex_t media_mu; /* one clip or image encoding at a time, on media_pool (made at the first media request) */
    tern_pool *media_pool;
    srv_resp_store *responses; /* --responses-store */
    srv_metrics metrics;
};

/* A fresh id "PREFIX" + 24 letters and digits, unique within the process. */
void srv_make_id(tern_server *s, const char *prefix, char *out, size_t cap);

/* ---- requests and replies (http.c) ----------------------------------------------------------- */

typedef struct srv_gen srv_gen;

typedef struct srv_req {
    tern_server *srv;
    struct MHD_Connection *conn;
    const char *method, *url;
    int route;
    srv_api api;
    int (*handler)(struct srv_req *r, json_t *body); /* returns an MHD_Result */
    sbuf body;
    int too_large;    /* the body passed --max-body: discarded, answered 413 at the end */
    uint64_t discarded;
    int responded; /* a reply was queued */
    int counted_inflight;
    int status;
    double t_start;
} srv_req;

/* Queues a 200 reply of bytes that outlive the server (compiled in), with extra headers {name, value}. */
int srv_reply_static(srv_req *r, const char *ctype, const void *data, size_t len, const char *const (*headers)[2],
                     size_t n_headers);
/* Queues a JSON reply (does not take v). Returns an MHD_Result. */
int srv_reply_json(srv_req *r, int status, const json_t *v);
/* Queues a reply with the given content type. */
int srv_reply_text(srv_req *r, int status, const char *ctype, const char *text, size_t len);
/* Queues an error reply in the request's API shape, message printf-style. */
int srv_reply_error(srv_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Queues the error for `err` (status from its code) and frees it. */
int srv_reply_err(srv_req *r, tern_err *err);
/* Queues a text/event-stream reply fed by the generation `g` (which the reply then owns). */
int srv_reply_stream(srv_req *r, srv_gen *g);
/* The client's socket, or -1. */
int srv_req_fd(srv_req *r);
/* Marks the request as a generation in flight (counted until its reply completes). */
void srv_req_begin_generation(srv_req *r);

/* ---- routes (routes.c) ------------------------------------------------------------------------- */

typedef int (*srv_handler)(srv_req *r, json_t *body);

/* Finds the handler for method + url. Returns 0 and sets *h, *route, *api; 404 for an unknown path; 405 for a
 * known path with another method (and *allow then names the methods that are). */
int srv_route(const char *method, const char *url, srv_handler *h, int *route, srv_api *api, const char **allow);

int srv_handle_chat(srv_req *r, json_t *body);
int srv_handle_completions(srv_req *r, json_t *body);
int srv_handle_messages(srv_req *r, json_t *body);
int srv_handle_responses(srv_req *r, json_t *body);
int srv_handle_embeddings(srv_req *r, json_t *body);
/* GET /v1/responses/{id}, GET /v1/responses/{id}/input_items, DELETE /v1/responses/{id}. */
int srv_handle_response_get(srv_req *r, json_t *body);
int srv_handle_response_delete(srv_req *r, json_t *body);
/* POST /v1/audio/transcriptions (openai_audio.c): the body is multipart/form-data, read from r->body (the JSON
 * argument is NULL). */
int srv_handle_transcriptions(srv_req *r, json_t *unused);
int srv_handle_count_tokens(srv_req *r, json_t *body);
int srv_handle_models(srv_req *r, json_t *body);
int srv_handle_model(srv_req *r, json_t *body);
/* GET /health and /health/ready: 200 while serving, 503 loading / draining (readiness). */
int srv_handle_health(srv_req *r, json_t *body);
/* GET /health/live: 200 while the process answers at all (liveness). */
int srv_handle_live(srv_req *r, json_t *body);
int srv_handle_metrics(srv_req *r, json_t *body);
/* GET /: the chat page (webui.c); 404 with --no-webui. */
int srv_handle_webui(srv_req *r, json_t *body);

/* ---- one generation (gen.c) -------------------------------------------------------------------- */

/* What an endpoint does with its events. In streaming mode each callback appends the SSE bytes to send to `out`;
 * in non-streaming mode `out` is NULL and the endpoint accumulates. */
typedef struct srv_gen_ops {
    tern_err *(*on_token)(void *ctx, const tern_event *ev, sbuf *out);
    /* Normal end (STOP or LENGTH). */
    tern_err *(*on_done)(void *ctx, const tern_event *ev, sbuf *out);
    /* Streaming only: the request failed after the stream began (engine error, deadline, shutdown). */
    void (*on_fail)(void *ctx, int status, const char *message, sbuf *out);
    void (*free_ctx)(void *ctx);
} srv_gen_ops;

struct srv_gen {
    tern_server *srv;
    tern_stream *stream;
    int fd;
    double deadline;
    int streaming;
    const srv_gen_ops *ops;
    void *ctx;
    sbuf out;       /* SSE bytes not yet handed to the connection */
    size_t out_off;
    int finished;   /* DONE read and every byte produced */
    int gone;       /* the client went away */
    /* non-streaming failure, for the endpoint's error reply */
    int fail_status;
    char fail_msg[512];
};

/* Submits `req` for endpoint ops/ctx (the gen owns ctx from here on, even on failure). On failure the error says
 * why (TERN_EOVERLOAD → 429, TERN_EINVAL → 400, shutting down → TERN_ECANCELLED → 503). */
TERN_MUST_CHECK tern_err *srv_gen_start(srv_req *r, const tern_request *req, int streaming, const srv_gen_ops *ops, void *ctx,
                        srv_gen **out);
/* Non-streaming: waits for the end. Returns 0 when on_done ran, 1 when the request failed (fail_status /
 * fail_msg say how), -1 when the client went away (nothing can be sent). */
int srv_gen_run(srv_gen *g);
/* Streaming: fills buf with up to max bytes of SSE, blocking until there are some; MHD content-reader result. */
long srv_gen_read(srv_gen *g, char *buf, size_t max);
/* Cancels (if unfinished) and frees. NULL is fine. */
void srv_gen_free(srv_gen *g);
/* 1 if the peer of socket fd closed its end (or the socket failed); a pipelined next request is not that. */
int srv_client_gone(int fd);

/* ---- endpoint reply shaping, also driven directly by tests (events replayed without an engine) ---- */

/* A chat.completion reply in the making (openai_chat.c); NULL on OOM. Freed by its ops' free_ctx. */
void *srv_chat_run_new(tern_server *s, int streaming, int include_usage, int parse_tools);
const srv_gen_ops *srv_chat_ops(void);
/* The non-streaming chat.completion body, after on_done ran. */
json_t *srv_chat_response(void *run);
/* An Anthropic message reply in the making (anthropic.c); stops are the request's stop_sequences. */
void *srv_messages_run_new(tern_server *s, int streaming, int parse_tools, int64_t prompt_tokens,
                           char *const *stops, int n_stops);
const srv_gen_ops *srv_messages_ops(void);
/* message_start and ping, the first events of a stream. */
void srv_messages_start(void *run, sbuf *out);
/* The non-streaming message body, after on_done ran. */
json_t *srv_messages_response(void *run);

/* A /v1/responses body read into chat terms (messages with the instructions first, tools, tool_choice, the text
 * format's grammar checked, sampling fields): what the handler renders and validates next. Errors name the field. */
TERN_MUST_CHECK tern_err *srv_responses_chat_body(tern_server *s, const json_t *body, json_t **chat);
/* A /v1/embeddings body: its inputs as a list (each a string or a token-id array), encoding_format and dimensions
 * (1..hidden). Errors name the field. */
TERN_MUST_CHECK tern_err *srv_embeddings_read(const json_t *body, int64_t vocab, int64_t hidden, json_t **inputs, int *base64,
                              int64_t *dims);

/* A Responses reply in the making (openai_responses.c), not stored; NULL on OOM. Freed by its ops' free_ctx. */
void *srv_responses_run_new(tern_server *s, int streaming, int parse_tools);
const srv_gen_ops *srv_responses_ops(void);
/* response.created and response.in_progress, the first events of a stream. */
void srv_responses_start(void *run, sbuf *out);
/* The response object (borrowed), complete after on_done ran. */
json_t *srv_responses_response(void *run);

/* ---- request validation (params.c) ------------------------------------------------------------- */

typedef struct srv_params {
    tern_request req;          /* sampling, max_tokens, stops, logprobs (no prompt) */
    tern_logit_bias *bias;     /* owned */
    char *stops[TERN_MAX_STOP_STRINGS]; /* owned */
    char *prediction;          /* owned: the predicted output's text (req.prediction_text points here) */
    char *grammar;             /* owned: the structured-output grammar (req.grammar points here) */
    int stream, include_usage;
} srv_params;

/* ---- structured output (structured.c) ----------------------------------------------------------------- */

/* The grammar of the body's response_format (json_object, json_schema) or llama.cpp `grammar` field; *gbnf NULL
 * (no error) when the body asks for neither. Errors name the field (a 400). */
TERN_MUST_CHECK tern_err *srv_response_grammar(const json_t *body, char **gbnf);
/* The reply's grammar: `forced` (a forced tool call's grammar, taken over) when given, else the response format's
 * or llama.cpp's `grammar` as srv_response_grammar; `grammar` beside a forced call is an error. */
TERN_MUST_CHECK tern_err *srv_reply_grammar(const json_t *body, char *forced, char **gbnf);
/* The grammar of one forced tool call in the model's dialect (srv_dialect): a call of `only` (NULL: any of `tools`, OpenAI-style
 * [{"type":"function","function":{name, parameters}}]) with arguments valid against its parameters schema. */
TERN_MUST_CHECK tern_err *srv_tool_call_grammar(const tern_server *s, const json_t *tools, const char *only, char **gbnf);
/* The markup the model writes tool calls and reasoning in (its chat format's; Gemma 4's without one). */
static inline const tern_reply_dialect *srv_dialect(const tern_server *s) {
    return s->chat && s->chat->dialect ? s->chat->dialect : &tern_dialect_gemma4;
}
/* Puts a grammar into the request (p owns it from here). */
void srv_params_set_grammar(srv_params *p, char *gbnf, int special);

/* Starts a chat generation (OpenAI chat and responses, Anthropic messages) of a prompt with its media spans and the
 * request's validated fields: special tokens are rendered (the reply parser reads the markup) and generation stops
 * where Gemma 4 opens a tool response for the caller to fill. Takes mp and p (freed here); like srv_gen_start
 * otherwise. */
TERN_MUST_CHECK tern_err *srv_gen_start_chat_media(srv_req *r, tern_server *s, srv_params *p, tern_media_prompt *mp,
                                   const srv_gen_ops *ops, void *ctx, srv_gen **out);

/* Which dialect's field names and ranges apply. */
typedef enum { PARAMS_CHAT, PARAMS_COMPLETIONS, PARAMS_MESSAGES } srv_params_kind;

/* Validates and reads the sampling and output fields of a request body (an object) into *p (free with
 * srv_params_free even on error). vocab bounds logit_bias token ids. Errors are TERN_EINVAL naming the field. */
TERN_MUST_CHECK tern_err *srv_params_parse(const json_t *body, srv_params_kind kind, int64_t vocab, srv_params *p);
void srv_params_free(srv_params *p);
/* Parses a request body into a JSON object; errors say where the JSON is broken. */
TERN_MUST_CHECK tern_err *srv_parse_body(const char *body, size_t len, json_t **out);
/* A JSON string from bytes that may not be valid UTF-8 (invalid sequences become U+FFFD). */
json_t *srv_json_string_lossy(const char *s, size_t n);
/* A JSON number for a log-probability (-9999 for -inf / NaN, which JSON cannot carry). */
json_t *srv_json_logprob(float lp);

/* ---- shared by the generation endpoints -------------------------------------------------------- */

/* OpenAI tool_choice over a chat body's tools: "none" hides the tools; "required" forces a call of one of them and a
 * named function a call of that one (by a grammar: *forced is then 1), which is then the only tool shown.
 * *tools_out is a new reference or NULL; *parse_tools says whether to parse calls. */
TERN_MUST_CHECK tern_err *srv_resolve_tools(const json_t *body, json_t **tools_out, int *parse_tools, int *forced);
/* Renders and tokenizes a chat for this model (messages/tools in OpenAI form) whose messages may carry audio and
 * image parts: those are encoded by the model's towers on the server's media pool, one request at a time
 * (text-only requests never wait for it). */
TERN_MUST_CHECK tern_err *srv_chat_prompt_media(tern_server *s, const json_t *messages, const json_t *tools, const json_t *kwargs,
                                int add_generation_prompt, tern_media_prompt *mp);
/* The OpenAI usage object. */
json_t *srv_usage_json(const tern_usage *u);
/* One token's logprob entry {token, logprob, bytes, top_logprobs:[...]} (chat format). */
json_t *srv_token_logprob_json(tern_server *s, const tern_event *ev);

#endif
