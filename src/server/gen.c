/* gen.c — one generation request from submit to its last byte: reads the engine's event stream in short slices
 * so that, between events, it notices a client that hung up (its socket reads EOF) and the request deadline,
 * and cancels the request in either case. Endpoints only turn events into bytes (srv_gen_ops). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "core/timeutil.h"
#include "server/server_internal.h"

#define POLL_SLICE_MS 100
#define EVENTS_PER_CLIENT_CHECK 16

/* The peer closed its end (or the socket failed): nothing we send will arrive. A client that pipelines its next
 * request has bytes waiting, which is not EOF. */
int srv_client_gone(int fd) {
    if (fd < 0)
        return 0;
    char c;
    ssize_t k = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0)
        return 1;
    return k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

tern_err *srv_gen_start(srv_req *r, const tern_request *req, int streaming, const srv_gen_ops *ops, void *ctx,
                        srv_gen **out) {
    tern_server *s = r->srv;
    *out = NULL;
    srv_gen *g = calloc(1, sizeof *g);
    if (!g) {
        ops->free_ctx(ctx);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    g->srv = s;
    g->ops = ops;
    g->ctx = ctx;
    g->streaming = streaming;
    g->fd = srv_req_fd(r);
    g->deadline = tern_now_s() + s->cfg.timeout_s;
    tern_err *err = NULL;
    pthread_rwlock_rdlock(&s->engine_lock);
    if (!s->engine || atomic_load(&s->draining))
        err = tern_errf(TERN_ECANCELLED, "the server is shutting down (draining) and takes no new requests: retry on "
                                         "another replica or after it restarts");
    else
        err = tern_engine_submit(s->engine, req, NULL, NULL, &g->stream, NULL);
    pthread_rwlock_unlock(&s->engine_lock);
    if (err) {
        srv_gen_free(g);
        return err;
    }
    *out = g;
    return NULL;
}

static void fail(srv_gen *g, int status, const char *msg, sbuf *out) {
    if (g->fail_status)
        return;
    g->fail_status = status;
    snprintf(g->fail_msg, sizeof g->fail_msg, "%s", msg);
    if (g->streaming && out)
        g->ops->on_fail(g->ctx, status, msg, out);
}

/* Hands one event to the endpoint. */
static void handle_event(srv_gen *g, const tern_event *ev, sbuf *out) {
    tern_err *err = NULL;
    if (ev->kind == TERN_EV_TOKEN) {
        if (!g->fail_status)
            err = g->ops->on_token(g->ctx, ev, out);
    } else {
        srv_metrics_done(&g->srv->metrics, ev);
        char msg[512];
        switch (ev->finish) {
        case TERN_FINISH_STOP:
        case TERN_FINISH_LENGTH:
            if (!g->fail_status)
                err = g->ops->on_done(g->ctx, ev, out);
            break;
        case TERN_FINISH_CANCELLED:
            if (tern_now_s() >= g->deadline)
                fail(g, 504, "the request took longer than the server's timeout and was cancelled", out);
            else
                fail(g, 503, "the request was cancelled because the server is shutting down", out);
            break;
        default:
            snprintf(msg, sizeof msg, "generation failed: %s", ev->error ? ev->error : "unknown error");
            fail(g, 500, msg, out);
            break;
        }
    }
    if (err) {
        fail(g, srv_status_for_code(err->code), tern_err_msg(err), out);
        tern_err_free(err);
        tern_stream_cancel(g->stream);
    }
}

/* The next event: 1 (ev filled), -1 the stream is over, -2 the client went away. */
static int next_event(srv_gen *g, tern_event *ev, unsigned *since_check) {
    for (;;) {
        int k = tern_stream_next(g->stream, ev, POLL_SLICE_MS);
        if (k == 1 && ++*since_check < EVENTS_PER_CLIENT_CHECK)
            return 1;
        *since_check = 0;
        if (srv_client_gone(g->fd)) {
            g->gone = 1;
            srv_metrics_disconnect(&g->srv->metrics);
            tern_stream_cancel(g->stream);
            return -2;
        }
        if (k != 0)
            return k;
        if (tern_now_s() >= g->deadline && !g->fail_status) {
            srv_metrics_timeout(&g->srv->metrics);
            tern_stream_cancel(g->stream); /* the DONE (cancelled) event reports it */
            g->deadline = 0;
        }
    }
}

int srv_gen_run(srv_gen *g) {
    unsigned since = 0;
    tern_event ev;
    for (;;) {
        int k = next_event(g, &ev, &since);
        if (k == -2)
            return -1;
        if (k == -1)
            break;
        handle_event(g, &ev, NULL);
        if (ev.kind == TERN_EV_DONE) {
            g->finished = 1;
            break;
        }
    }
    return g->fail_status ? 1 : 0;
}

long srv_gen_read(srv_gen *g, char *buf, size_t max) {
    unsigned since = 0;
    while (g->out.len == g->out_off) {
        if (g->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (g->gone)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        sbuf_clear(&g->out);
        g->out_off = 0;
        tern_event ev;
        int k = next_event(g, &ev, &since);
        if (k == -2)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (k == -1) {
            g->finished = 1;
            continue;
        }
        handle_event(g, &ev, &g->out);
        if (ev.kind == TERN_EV_DONE)
            g->finished = 1;
        if (g->out.oom)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = g->out.len - g->out_off;
    if (n > max)
        n = max;
    memcpy(buf, g->out.p + g->out_off, n);
    g->out_off += n;
    return (long)n;
}

void srv_gen_free(srv_gen *g) {
    if (!g)
        return;
    if (g->stream && !g->finished && !g->gone) /* the connection ended before the reply did */
        srv_metrics_disconnect(&g->srv->metrics);
    tern_stream_free(g->stream);
    if (g->ops && g->ops->free_ctx)
        g->ops->free_ctx(g->ctx);
    sbuf_free(&g->out);
    free(g);
}
