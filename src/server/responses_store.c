/* responses_store.c — the responses kept for previous_response_id and GET /v1/responses/{id}: a bounded
 * in-memory list in arrival order. Past the count or byte cap the oldest go first; nothing survives a restart
 * (OpenAI keeps them 30 days; a client that needs them longer sends the whole input). Entries are never changed
 * after they are put, and readers get deep copies, so a request thread may use what it got without the lock. */
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

typedef struct entry {
    struct entry *prev, *next;
    char id[64];
    json_t *response, *input_items, *messages;
    size_t bytes;
} entry;

struct srv_resp_store {
    pthread_mutex_t mu;
    entry *oldest, *newest;
    int count, max_count;
    size_t bytes, max_bytes;
};

tern_err *srv_resp_store_new(int max_count, size_t max_bytes, srv_resp_store **out) {
    srv_resp_store *st = calloc(1, sizeof *st);
    if (!st)
        return tern_errf(TERN_ENOMEM, "out of memory");
    pthread_mutex_init(&st->mu, NULL);
    st->max_count = max_count;
    st->max_bytes = max_bytes;
    *out = st;
    return NULL;
}

static void unlink_entry(srv_resp_store *st, entry *e) {
    if (e->prev)
        e->prev->next = e->next;
    else
        st->oldest = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        st->newest = e->prev;
    st->count--;
    st->bytes -= e->bytes;
    json_decref(e->response);
    json_decref(e->input_items);
    json_decref(e->messages);
    free(e);
}

void srv_resp_store_free(srv_resp_store *st) {
    if (!st)
        return;
    while (st->oldest)
        unlink_entry(st, st->oldest);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

int srv_resp_store_enabled(const srv_resp_store *st) { return st && st->max_count > 0; }

static size_t json_bytes(const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT);
    size_t n = s ? strlen(s) : 0;
    free(s);
    return n + 64;
}

static entry *find(srv_resp_store *st, const char *id) {
    for (entry *e = st->newest; e; e = e->prev)
        if (!strcmp(e->id, id))
            return e;
    return NULL;
}

int srv_resp_store_put(srv_resp_store *st, const char *id, const json_t *response, const json_t *input_items,
                       const json_t *messages) {
    if (!srv_resp_store_enabled(st) || strlen(id) >= sizeof((entry *)0)->id)
        return -1;
    entry *e = calloc(1, sizeof *e);
    if (!e)
        return -1;
    strcpy(e->id, id);
    e->response = json_deep_copy(response);
    e->input_items = json_deep_copy(input_items);
    e->messages = json_deep_copy(messages);
    e->bytes = sizeof *e + json_bytes(response) + json_bytes(input_items) + json_bytes(messages);
    if (!e->response || !e->input_items || !e->messages || e->bytes > st->max_bytes) {
        json_decref(e->response);
        json_decref(e->input_items);
        json_decref(e->messages);
        free(e);
        return -1;
    }
    pthread_mutex_lock(&st->mu);
    entry *old = find(st, id);
    if (old)
        unlink_entry(st, old);
    while (st->oldest && (st->count + 1 > st->max_count || st->bytes + e->bytes > st->max_bytes))
        unlink_entry(st, st->oldest);
    e->prev = st->newest;
    if (st->newest)
        st->newest->next = e;
    else
        st->oldest = e;
    st->newest = e;
    st->count++;
    st->bytes += e->bytes;
    pthread_mutex_unlock(&st->mu);
    return 0;
}

int srv_resp_store_get(srv_resp_store *st, const char *id, json_t **response, json_t **input_items,
                       json_t **messages) {
    if (response)
        *response = NULL;
    if (input_items)
        *input_items = NULL;
    if (messages)
        *messages = NULL;
    if (!srv_resp_store_enabled(st))
        return 0;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id);
    int ok = e != NULL;
    if (e) {
        if (response && !(*response = json_deep_copy(e->response)))
            ok = -1;
        if (input_items && !(*input_items = json_deep_copy(e->input_items)))
            ok = -1;
        if (messages && !(*messages = json_deep_copy(e->messages)))
            ok = -1;
    }
    pthread_mutex_unlock(&st->mu);
    if (ok < 0) {
        if (response)
            json_decref(*response), *response = NULL;
        if (input_items)
            json_decref(*input_items), *input_items = NULL;
        if (messages)
            json_decref(*messages), *messages = NULL;
    }
    return ok;
}

int srv_resp_store_delete(srv_resp_store *st, const char *id) {
    if (!srv_resp_store_enabled(st))
        return 0;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id);
    if (e)
        unlink_entry(st, e);
    pthread_mutex_unlock(&st->mu);
    return e != NULL;
}
