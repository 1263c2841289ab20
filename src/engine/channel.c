/* channel.c — delivering one request's events: straight to a callback on the engine thread, or
 * deep-copied into a queue that the consumer reads with tern_stream_next (tern.h). */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_internal.h"

struct ev_node {
    ev_node *next;
    tern_event ev; /* pointers below point into this node */
    char *text, *error;
    float *embedding;
    int32_t top_ids[TERN_MAX_TOP_LOGPROBS];
    float top[TERN_MAX_TOP_LOGPROBS];
};

struct tern_stream {
    channel *ch;
};

channel *channel_new(uint64_t id, tern_event_fn cb, void *user) {
    channel *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NULL;
    atomic_init(&ch->refs, 1);
    atomic_init(&ch->cancelled, 0);
    ch->id = id;
    ch->cb = cb;
    ch->user = user;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int bad = pthread_mutex_init(&ch->mu, NULL) != 0;
    if (!bad && pthread_cond_init(&ch->cv, &ca) != 0) {
        pthread_mutex_destroy(&ch->mu);
        bad = 1;
    }
    pthread_condattr_destroy(&ca);
    if (!bad && !cb && !(ch->spare_done = calloc(1, sizeof *ch->spare_done))) {
        pthread_mutex_destroy(&ch->mu);
        pthread_cond_destroy(&ch->cv);
        bad = 1;
    }
    if (bad) {
        free(ch);
        return NULL;
    }
    return ch;
}

static void node_free(ev_node *n) {
    if (!n)
        return;
    free(n->text);
    free(n->error);
    free(n->embedding);
    free(n);
}

void channel_ref(channel *ch) { atomic_fetch_add(&ch->refs, 1); }

void channel_unref(channel *ch) {
    if (!ch)
        return;
    const int before = atomic_fetch_sub(&ch->refs, 1);
    assert(before >= 1); /* one unref per ref: the engine's and the stream's */
    if (before != 1)
        return;
    for (ev_node *n = ch->head, *next; n; n = next) {
        next = n->next;
        node_free(n);
    }
    node_free(ch->current);
    node_free(ch->spare_done);
    pthread_mutex_destroy(&ch->mu);
    pthread_cond_destroy(&ch->cv);
    free(ch);
}

static ev_node *copy_event(const tern_event *ev) {
    ev_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->ev = *ev;
    n->text = malloc(ev->text_len + 1);
    if (!n->text || (ev->error && !(n->error = strdup(ev->error)))) {
        node_free(n);
        return NULL;
    }
    if (ev->text_len)
        memcpy(n->text, ev->text, ev->text_len);
    n->text[ev->text_len] = 0;
    n->ev.text = n->text;
    n->ev.error = n->error;
    if (ev->embedding && ev->n_embedding > 0) {
        if (!(n->embedding = malloc((size_t)ev->n_embedding * sizeof *n->embedding))) {
            node_free(n);
            return NULL;
        }
        memcpy(n->embedding, ev->embedding, (size_t)ev->n_embedding * sizeof *n->embedding);
    }
    n->ev.embedding = n->embedding;
    int k = ev->n_top < 0 ? 0 : ev->n_top > TERN_MAX_TOP_LOGPROBS ? TERN_MAX_TOP_LOGPROBS : ev->n_top;
    if (k) {
        memcpy(n->top_ids, ev->top_ids, (size_t)k * sizeof *n->top_ids);
        memcpy(n->top, ev->top_logprobs, (size_t)k * sizeof *n->top);
    }
    n->ev.n_top = k;
    n->ev.top_ids = n->top_ids;
    n->ev.top_logprobs = n->top;
    return n;
}

int channel_emit(channel *ch, const tern_event *ev) {
    if (ch->cb) {
        ch->cb(ev, ch->user);
        return 0;
    }
    ev_node *n = copy_event(ev);
    if (!n && ev->kind == TERN_EV_DONE) {
        /* Out of memory for the last event: a bare DONE in the node made with the channel, so the reader never
         * waits forever and hears why its reply ended. */
        static const char oom[] = "out of memory delivering the final event";
        n = ch->spare_done;
        ch->spare_done = NULL;
        if (n) {
            n->ev = *ev;
            n->ev.text = "";
            n->ev.text_len = 0;
            n->ev.n_top = 0;
            n->ev.finish = TERN_FINISH_ERROR;
            n->ev.error = oom;
            n->ev.embedding = NULL;
            n->ev.n_embedding = 0;
        }
    }
    int lost = !n;
    pthread_mutex_lock(&ch->mu);
    if (n && !ch->closed) {
        if (ch->tail)
            ch->tail->next = n;
        else
            ch->head = n;
        ch->tail = n;
        n = NULL;
    }
    pthread_cond_broadcast(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
    node_free(n); /* consumer gone: nobody will read it */
    return lost ? -1 : 0;
}

/* ---- the pollable stream (tern.h) -------------------------------------------------------------- */

tern_stream *stream_wrap(channel *ch) {
    tern_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    channel_ref(ch);
    s->ch = ch;
    return s;
}

int tern_stream_next(tern_stream *s, tern_event *ev, int timeout_ms) {
    channel *ch = s->ch;
    struct timespec until;
    if (timeout_ms > 0) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&ch->mu);
    node_free(ch->current);
    ch->current = NULL;
    int rc = 0;
    for (;;) {
        if (ch->head) {
            ev_node *n = ch->head;
            ch->head = n->next;
            if (!ch->head)
                ch->tail = NULL;
            ch->current = n;
            *ev = n->ev;
            if (n->ev.kind == TERN_EV_DONE)
                ch->done_read = 1;
            rc = 1;
            break;
        }
        if (ch->done_read) {
            rc = -1;
            break;
        }
        if (timeout_ms == 0)
            break;
        if (timeout_ms < 0) {
            pthread_cond_wait(&ch->cv, &ch->mu);
        } else if (pthread_cond_timedwait(&ch->cv, &ch->mu, &until) == ETIMEDOUT) {
            if (!ch->head)
                break;
        }
    }
    pthread_mutex_unlock(&ch->mu);
    return rc;
}

uint64_t tern_stream_id(const tern_stream *s) { return s->ch->id; }

void tern_stream_cancel(tern_stream *s) { atomic_store(&s->ch->cancelled, 1); }

void tern_stream_free(tern_stream *s) {
    if (!s)
        return;
    channel *ch = s->ch;
    atomic_store(&ch->cancelled, 1);
    pthread_mutex_lock(&ch->mu);
    for (ev_node *n = ch->head, *next; n; n = next) {
        next = n->next;
        node_free(n);
    }
    ch->head = ch->tail = NULL;
    node_free(ch->current);
    ch->current = NULL;
    ch->closed = 1; /* later events are dropped */
    pthread_mutex_unlock(&ch->mu);
    channel_unref(ch);
    free(s);
}
