/* http.c — the HTTP layer on libmicrohttpd: one thread per connection (bounded), the request life cycle
 * (route and authenticate on the headers, read the body up to the cap, hand the parsed JSON to a handler),
 * replies (JSON, text, SSE streams), idle timeouts, and start / quiesce / stop.
 *
 * Early answers — 404, 405, 401, 413 — are sent as soon as the headers say so, before any body is read; the
 * connection is then closed by libmicrohttpd since the unread body cannot be skipped safely. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/hash.h"
#include "core/log.h"
#include "chat/chat_prompt.h"
#include "core/timeutil.h"
#include "server/server_internal.h"

#define DEFAULT_MAX_BODY (16u << 20)
#define SSE_BLOCK 16384

void tern_server_config_default(tern_server_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->max_body = DEFAULT_MAX_BODY;
    c->timeout_s = 600;
    c->max_connections = 256;
    c->listen_fd = -1;
    c->responses_store = 1000;
}

/* ---- ids ------------------------------------------------------------------------------------------ */

void srv_make_id(tern_server *s, const char *prefix, char *out, size_t cap) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t n = atomic_fetch_add(&s->id_counter, 1);
    char tail[25];
    for (int w = 0; w < 3; w++) { /* 8 letters from each of three 64-bit words (62^8 < 2^64) */
        uint64_t x = tern_mix64(s->id_salt ^ (n * 3 + (uint64_t)w) ^ 0x9e3779b97f4a7c15ull);
        for (int i = 0; i < 8; i++) {
            tail[w * 8 + i] = alphabet[x % 62];
            x /= 62;
        }
    }
    tail[24] = 0;
    snprintf(out, cap, "%s%s", prefix, tail);
}

/* ---- replies --------------------------------------------------------------------------------------- */

static int queue(srv_req *r, int status, struct MHD_Response *resp) {
    if (!resp)
        return MHD_NO;
    int rc = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->responded = 1;
    r->status = status;
    srv_metrics_http(&r->srv->metrics, r->route, status);
    return rc;
}

int srv_reply_text(srv_req *r, int status, const char *ctype, const char *text, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 429 || status == 503) /* busy, loading or shutting down: when it is worth asking again */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, status == 429 ? "1" : "5");
    return queue(r, status, resp);
}

int srv_reply_static(srv_req *r, const char *ctype, const void *data, size_t len, const char *const (*headers)[2],
                     size_t n_headers) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    for (size_t i = 0; i < n_headers; i++)
        MHD_add_response_header(resp, headers[i][0], headers[i][1]);
    return queue(r, 200, resp);
}

int srv_reply_json(srv_req *r, int status, const json_t *v) {
    sbuf b = {0};
    if (!v || sbuf_json(&b, v)) {
        sbuf_free(&b);
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
        return srv_reply_text(r, 503, "application/json", oom, sizeof oom - 1);
    }
    int rc = srv_reply_text(r, status, "application/json", b.p, b.len);
    sbuf_free(&b);
    return rc;
}

int srv_reply_error(srv_req *r, int status, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = srv_error_json(r->api, status, msg);
    int rc = srv_reply_json(r, status, e);
    json_decref(e);
    if (status >= 500)
        TLOG_WARN("server: %s %s -> %d: %s", r->method, r->url, status, msg);
    else
        TLOG_DEBUG("server: %s %s -> %d: %s", r->method, r->url, status, msg);
    return rc;
}

int srv_reply_err(srv_req *r, tern_err *err) {
    int rc = srv_reply_error(r, srv_status_for_code(err->code), "%s", tern_err_msg(err));
    tern_err_free(err);
    return rc;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    return (ssize_t)srv_gen_read(cls, buf, max);
}

static void stream_free(void *cls) { srv_gen_free(cls); }

int srv_reply_stream(srv_req *r, srv_gen *g) {
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, stream_read, g,
                                                                  stream_free);
    if (!resp) {
        srv_gen_free(g);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return queue(r, 200, resp);
}

int srv_req_fd(srv_req *r) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

void srv_req_begin_generation(srv_req *r) {
    if (!r->counted_inflight) {
        r->counted_inflight = 1;
        atomic_fetch_add(&r->srv->inflight, 1);
    }
}

/* ---- the request life cycle ------------------------------------------------------------------------ */

/* Constant-time comparison of a presented key with the configured one. */
static int key_matches(const char *given, const char *want) {
    size_t gl = strlen(given), wl = strlen(want);
    unsigned diff = (unsigned)(gl ^ wl);
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? given[i] : 0);
    return diff == 0;
}

/* 1 if `given` is one of the newline-separated keys in `keys`; every key is compared in full, so the time says
 * nothing of which one (or how much of one) matched. */
static int any_key_matches(const char *given, const char *keys) {
    int ok = 0;
    char one[1024];
    for (const char *p = keys; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n && n < sizeof one) {
            memcpy(one, p, n);
            one[n] = 0;
            ok |= key_matches(given, one);
        }
        p += n + (nl != NULL);
    }
    return ok;
}

static int authorized(srv_req *r) {
    const char *want = r->srv->api_key;
    if (!want || !*want)
        return 1;
    const char *auth = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    int ok = 0;
    if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
        const char *k = auth + 7;
        while (*k == ' ')
            k++;
        ok |= any_key_matches(k, want);
    }
    const char *x = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "x-api-key");
    return ok | (x && any_key_matches(x, want));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    tern_server *s = cls;
    srv_req *r = *con_cls;
    if (!r) { /* headers are in: decide what can be decided before reading a body */
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        *con_cls = r;
        r->srv = s;
        r->conn = conn;
        r->method = method;
        r->url = url;
        r->t_start = tern_now_s();
        r->route = SRV_ROUTE_OTHER;
        const char *allow = NULL;
        srv_handler h = NULL;
        int st = srv_route(method, url, &h, &r->route, &r->api, &allow);
        r->handler = h;
        if (st == 404)
            return (enum MHD_Result)srv_reply_error(r, 404, "no such endpoint: %s %.200s", method, url);
        if (st == 405) {
            char msg[512];
            snprintf(msg, sizeof msg, "method %s is not allowed on %.200s (allowed: %s)", method, url, allow);
            json_t *e = srv_error_json(r->api, 405, msg);
            sbuf b = {0};
            sbuf_json(&b, e);
            json_decref(e);
            struct MHD_Response *resp =
                MHD_create_response_from_buffer(b.len, b.p ? b.p : (void *)"", MHD_RESPMEM_MUST_COPY);
            sbuf_free(&b);
            if (resp) {
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
            }
            return (enum MHD_Result)queue(r, 405, resp);
        }
        /* The page carries no data and asks for the key itself; what it fetches needs the key. */
        if (r->route != SRV_ROUTE_HEALTH && r->route != SRV_ROUTE_WEBUI &&
            !(r->route == SRV_ROUTE_METRICS && s->cfg.metrics_public) && !authorized(r))
            return (enum MHD_Result)srv_reply_error(
                r, 401, "missing or wrong API key: send 'Authorization: Bearer KEY' (or 'x-api-key: KEY')");
        if (atomic_load(&s->loading) && r->route != SRV_ROUTE_METRICS && r->route != SRV_ROUTE_WEBUI &&
            strcmp(url, "/health/live")) {
            if (r->route != SRV_ROUTE_HEALTH)
                return (enum MHD_Result)srv_reply_error(r, 503, "the model is still loading; retry in a few seconds");
            json_t *v = json_pack("{s:s,s:s,s:s}", "status", "loading", "version", tern_version(), "model",
                                  s->model_id);
            int rc = srv_reply_json(r, 503, v);
            json_decref(v);
            return (enum MHD_Result)rc;
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            unsigned long long n = strtoull(cl, &end, 10);
            if (*end == 0 && n > s->cfg.max_body)
                return (enum MHD_Result)srv_reply_error(r, 413, "the request body (%llu bytes) exceeds the limit of "
                                                                "%llu bytes (tern serve --max-body)",
                                                        n, (unsigned long long)s->cfg.max_body);
        }
        return MHD_YES;
    }
    if (r->responded) { /* answered early: drop whatever body still arrives */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* libmicrohttpd takes no reply while a body is arriving: past the cap, discard the rest and answer 413
         * once it is in (or hang up on a client that keeps sending far beyond it). */
        if (r->too_large || r->body.len + *upload_data_size > s->cfg.max_body) {
            if (!r->too_large)
                sbuf_free(&r->body);
            r->too_large = 1;
            r->discarded += *upload_data_size;
            *upload_data_size = 0;
            return r->discarded > 4 * s->cfg.max_body + (1u << 20) ? MHD_NO : MHD_YES;
        }
        if (sbuf_add(&r->body, upload_data, *upload_data_size))
            return MHD_NO; /* out of memory: drop the connection */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->too_large)
        return (enum MHD_Result)srv_reply_error(r, 413, "the request body exceeds the limit of %llu bytes "
                                                        "(tern serve --max-body)",
                                                (unsigned long long)s->cfg.max_body);
    /* the whole request is in */
    json_t *body = NULL;
    if (!strcmp(method, "POST") && r->route != SRV_ROUTE_TRANSCRIPTIONS) { /* that one reads multipart itself */
        tern_err *err = srv_parse_body(r->body.p ? r->body.p : "", r->body.len, &body);
        if (err)
            return (enum MHD_Result)srv_reply_err(r, err);
    }
    int rc = r->handler(r, body);
    json_decref(body);
    return (enum MHD_Result)rc;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)conn;
    (void)toe;
    tern_server *s = cls;
    srv_req *r = *con_cls;
    if (!r)
        return;
    if (r->counted_inflight)
        atomic_fetch_sub(&s->inflight, 1);
    sbuf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    TLOG_DEBUG("libmicrohttpd: %s", msg);
}

/* ---- start and stop ------------------------------------------------------------------------------- */

tern_err *tern_server_listen(const char *host, int port, int *fd) {
    *fd = -1;
    if (port < 0 || port > 65535)
        return tern_errf(TERN_EINVAL, "port %d is out of range [0, 65535]", port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    int rc = getaddrinfo(host, ports, &hints, &res);
    if (rc || !res)
        return tern_errf(TERN_EINVAL, "cannot resolve --host '%s': %s", host, gai_strerror(rc));
    int s = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    tern_err *err = NULL;
    if (s < 0) {
        err = tern_errf(TERN_EIO, "cannot open a socket for %s:%d: %s", host, port, strerror(errno));
    } else {
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a restart need not wait out TIME_WAIT */
        if (res->ai_family == AF_INET6)
            setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(s, res->ai_addr, res->ai_addrlen) || listen(s, 128))
            err = tern_errf(TERN_EIO, "cannot listen on %s:%d: %s%s", host, port, strerror(errno),
                            errno == EADDRINUSE ? " (another server is using that port; choose one with --port)" : "");
    }
    freeaddrinfo(res);
    if (err) {
        if (s >= 0)
            close(s);
        return err;
    }
    *fd = s;
    return NULL;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

tern_err *tern_server_start(tern_model *m, tern_engine *e, const tern_server_config *c, tern_server **out) {
    *out = NULL;
    tern_server_config dflt;
    tern_server_config_default(&dflt);
    if (c->port < 0 || c->port > 65535)
        return tern_errf(TERN_EINVAL, "port %d is out of range [0, 65535]", c->port);
    tern_server *s = calloc(1, sizeof *s);
    if (!s)
        return tern_errf(TERN_ENOMEM, "out of memory");
    s->cfg = *c;
    if (!s->cfg.host)
        s->cfg.host = dflt.host;
    if (!s->cfg.max_body)
        s->cfg.max_body = dflt.max_body;
    if (s->cfg.timeout_s <= 0)
        s->cfg.timeout_s = dflt.timeout_s;
    if (s->cfg.max_connections <= 0)
        s->cfg.max_connections = dflt.max_connections;
    pthread_rwlock_init(&s->engine_lock, NULL);
    pthread_mutex_init(&s->media_mu, NULL);
    srv_metrics_init(&s->metrics);
    s->created = (long)time(NULL);
    s->id_salt = tern_mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ tern_now_ns());
    if (m)
        tern_server_attach(s, m, e);
    else
        atomic_store(&s->loading, 1);
    s->host = strdup(s->cfg.host);
    s->api_key = dup_or_null(c->api_key);
    if (c->model_id) {
        s->model_id = strdup(c->model_id);
    } else {
        const char *dir = m && s->info.dir ? s->info.dir : c->model_dir ? c->model_dir : "model";
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            n--;
        size_t b = n;
        while (b > 0 && dir[b - 1] != '/')
            b--;
        s->model_id = strndup(dir + b, n - b);
    }
    s->cfg.host = s->host;
    s->cfg.api_key = s->api_key;
    s->cfg.model_id = s->model_id;
    tern_err *err = NULL;
    if (!s->host || !s->model_id || (c->api_key && !s->api_key))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err)
        err = srv_resp_store_new(c->responses_store > 0 ? c->responses_store : 0, SRV_RESPONSES_STORE_BYTES,
                                 &s->responses);

    int fd = c->listen_fd;
    if (!err && fd < 0)
        err = tern_server_listen(s->cfg.host, c->port, &fd);
    if (!err) {
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                         MHD_USE_ERROR_LOG | MHD_USE_ITC;
        const int tls = c->tls_cert_pem && c->tls_key_pem;
        if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
            err = tern_errf(TERN_EUNSUPPORTED, "this build's libmicrohttpd has no TLS support: serve plain HTTP behind a "
                                               "TLS proxy instead");
        else if (tls) /* the certificate and key go in as options only with TLS on */
            s->daemon = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET,
                                         (MHD_socket)fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s,
                                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
                                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_EXTERNAL_LOGGER,
                                         mhd_log, s, MHD_OPTION_HTTPS_MEM_CERT, c->tls_cert_pem,
                                         MHD_OPTION_HTTPS_MEM_KEY, c->tls_key_pem, MHD_OPTION_END);
        else
            s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s,
                                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
                                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_EXTERNAL_LOGGER,
                                         mhd_log, s, MHD_OPTION_END);
        if (!err && !s->daemon)
            err = tls ? tern_errf(TERN_EINVAL, "cannot serve HTTPS on %s:%d: the certificate or private key was refused "
                                               "(PEM files of a matching pair?)",
                                  s->cfg.host, c->port)
                      : tern_errf(TERN_EIO, "cannot serve on %s:%d", s->cfg.host, c->port);
    }
    if (!err) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        s->port = c->port;
        if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
            s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    } else if (fd >= 0 && !s->daemon) {
        close(fd); /* taken over, so closed here when the daemon did not start */
    }
    if (err) {
        tern_server_stop(s);
        return err;
    }
    *out = s;
    return NULL;
}

void tern_server_attach(tern_server *s, tern_model *m, tern_engine *e) {
    pthread_rwlock_wrlock(&s->engine_lock);
    s->model = m;
    s->engine = e;
    tern_model_get_info(m, &s->info);
    tern_metrics em;
    tern_engine_metrics(e, &em);
    s->ctx = em.ctx;
    s->chat = tern_model_chat_format(m);
    pthread_rwlock_unlock(&s->engine_lock);
    atomic_store(&s->loading, 0); /* after every field: a request that sees 0 sees them all */
}

int tern_server_port(const tern_server *s) { return s->port; }

const char *tern_server_model_id(const tern_server *s) { return s->model_id; }

void tern_server_drain(tern_server *s) { atomic_store(&s->draining, 1); }

void tern_server_quiesce(tern_server *s) {
    atomic_store(&s->draining, 1);
    if (s->daemon) {
        MHD_socket fd = MHD_quiesce_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET) {
            /* shutdown first: libmicrohttpd's polling thread may still hold the socket for a moment, and a
             * plain close would leave it listening (accepting into the backlog) until that thread lets go */
            shutdown(fd, SHUT_RDWR);
            close(fd);
        }
    }
}

int tern_server_inflight(tern_server *s) { return atomic_load(&s->inflight); }

void tern_server_detach_engine(tern_server *s) {
    pthread_rwlock_wrlock(&s->engine_lock);
    s->engine = NULL;
    pthread_rwlock_unlock(&s->engine_lock);
}

void tern_server_stop(tern_server *s) {
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    free(s->host);
    free(s->api_key);
    free(s->model_id);
    srv_metrics_destroy(&s->metrics);
    pthread_rwlock_destroy(&s->engine_lock);
    tern_pool_destroy(s->media_pool);
    pthread_mutex_destroy(&s->media_mu);
    srv_resp_store_free(s->responses);
    free(s);
}
