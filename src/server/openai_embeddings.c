/* openai_embeddings.c — POST /v1/embeddings: each input (a string, or a list of token ids) runs through the engine
 * as an embedding request, batched with the other rows; its final (normed) hidden states are pooled (the server's
 * --pooling: mean by default, as llama.cpp's server does for decoder models), cut to `dimensions` if asked, and
 * L2-normalized. Replies as OpenAI's list of embeddings, floats or base64 of little-endian float32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "server/server_internal.h"

#define MAX_INPUTS 2048

/* One input's run: where its vector goes. */
typedef struct emb_slot {
    float *dst;      /* [H] */
    int64_t H;
    int got;
    int64_t prompt_tokens;
} emb_slot;

static TERN_MUST_CHECK tern_err *emb_token(void *ctx, const tern_event *ev, sbuf *out) {
    (void)ctx, (void)ev, (void)out;
    return NULL;
}

static TERN_MUST_CHECK tern_err *emb_done(void *ctx, const tern_event *ev, sbuf *out) {
    (void)out;
    emb_slot *s = ctx;
    if (!ev->embedding || ev->n_embedding != s->H)
        return tern_errf(TERN_EIO, "%s", ev->error ? ev->error : "the engine returned no embedding");
    memcpy(s->dst, ev->embedding, (size_t)s->H * sizeof *s->dst);
    s->got = 1;
    s->prompt_tokens = ev->usage.prompt_tokens;
    return NULL;
}

static void emb_fail(void *ctx, int status, const char *message, sbuf *out) { (void)ctx, (void)status, (void)message, (void)out; }

static void emb_free(void *ctx) { (void)ctx; } /* slots belong to the handler */

static const srv_gen_ops EMB_OPS = {emb_token, emb_done, emb_fail, emb_free};

/* Checks one input: a non-empty string, or a non-empty list of token ids inside the vocabulary. */
static TERN_MUST_CHECK tern_err *check_input(const json_t *v, size_t i, int64_t vocab, int list) {
    char where[32];
    snprintf(where, sizeof where, list ? "input[%zu]" : "input", i);
    if (json_is_string(v)) {
        if (json_string_length(v) == 0)
            return tern_errf(TERN_EINVAL, "'%s' is an empty string: every input needs some text", where);
        return NULL;
    }
    if (!json_is_array(v))
        return tern_errf(TERN_EINVAL, "'%s' must be a string or an array of token ids, got %s", where,
                         tern_json_type_name(v));
    if (json_array_size(v) == 0)
        return tern_errf(TERN_EINVAL, "'%s' is an empty token list", where);
    size_t k;
    json_t *t;
    json_array_foreach(v, k, t) {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= vocab)
            return tern_errf(TERN_EINVAL, "'%s[%zu]' must be a token id in [0, %lld)", where, k, (long long)vocab);
    }
    return NULL;
}

/* The inputs as a list: a string or one token list is one input. */
static TERN_MUST_CHECK tern_err *read_inputs(const json_t *body, int64_t vocab, json_t **list) {
    const json_t *in = json_object_get(body, "input");
    *list = NULL;
    if (!in || json_is_null(in))
        return tern_errf(TERN_EINVAL, "'input' is required: a string, an array of strings, or token id arrays");
    int one = json_is_string(in) || (json_is_array(in) && json_array_size(in) && json_is_integer(json_array_get(in, 0)));
    if (one) {
        TERN_TRY(check_input(in, 0, vocab, 0));
        return (*list = json_pack("[O]", in)) ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    }
    if (!json_is_array(in))
        return tern_errf(TERN_EINVAL, "'input' must be a string, an array of strings, or token id arrays, got %s",
                         tern_json_type_name(in));
    if (json_array_size(in) == 0)
        return tern_errf(TERN_EINVAL, "'input' is an empty array");
    if (json_array_size(in) > MAX_INPUTS)
        return tern_errf(TERN_EINVAL, "'input' may hold at most %d items, got %zu", MAX_INPUTS, json_array_size(in));
    size_t i;
    json_t *v;
    json_array_foreach(in, i, v) TERN_TRY(check_input(v, i, vocab, 1));
    *list = json_incref((json_t *)in);
    return NULL;
}

static TERN_MUST_CHECK tern_err *read_options(const json_t *body, int64_t H, int *base64, int64_t *dims) {
    const json_t *model = json_object_get(body, "model"), *fmt = json_object_get(body, "encoding_format");
    const json_t *d = json_object_get(body, "dimensions"), *user = json_object_get(body, "user");
    if (model && !json_is_null(model) && !json_is_string(model))
        return tern_errf(TERN_EINVAL, "'model' must be a string, got %s", tern_json_type_name(model));
    if (user && !json_is_null(user) && !json_is_string(user))
        return tern_errf(TERN_EINVAL, "'user' must be a string, got %s", tern_json_type_name(user));
    *base64 = 0;
    if (fmt && !json_is_null(fmt)) {
        if (!json_is_string(fmt) || (strcmp(json_string_value(fmt), "float") && strcmp(json_string_value(fmt), "base64")))
            return tern_errf(TERN_EINVAL, "'encoding_format' must be \"float\" or \"base64\"");
        *base64 = !strcmp(json_string_value(fmt), "base64");
    }
    *dims = H;
    if (d && !json_is_null(d)) {
        if (!json_is_integer(d) || json_integer_value(d) < 1 || json_integer_value(d) > H)
            return tern_errf(TERN_EINVAL, "'dimensions' must be an integer between 1 and %lld (the model's hidden size)",
                             (long long)H);
        *dims = json_integer_value(d);
    }
    return NULL;
}

tern_err *srv_embeddings_read(const json_t *body, int64_t vocab, int64_t hidden, json_t **inputs, int *base64,
                              int64_t *dims) {
    *base64 = 0;
    *dims = hidden;
    TERN_TRY(read_inputs(body, vocab, inputs));
    tern_err *err = read_options(body, hidden, base64, dims);
    if (err) {
        json_decref(*inputs);
        *inputs = NULL;
    }
    return err;
}

/* Cuts v to its first n values and scales them to unit length (a zero vector stays zero). */
static void truncate_normalize(float *v, int64_t n) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)v[i] * v[i];
    float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
    for (int64_t i = 0; i < n; i++)
        v[i] *= inv;
}

static json_t *vector_json(const float *v, int64_t n, int base64) {
    if (base64) {
        char *b = tern_base64_encode(v, (size_t)n * sizeof *v); /* x86-64 and the other targets are little-endian */
        json_t *s = b ? json_string(b) : NULL;
        free(b);
        return s;
    }
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real((double)v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* Starts input i's run. */
static TERN_MUST_CHECK tern_err *start(srv_req *r, const json_t *in, emb_slot *slot, srv_gen **g) {
    tern_request q;
    tern_request_default(&q);
    q.embed = 1;
    q.pooling = r->srv->cfg.pooling;
    int32_t *ids = NULL;
    if (json_is_string(in)) {
        q.prompt_text = json_string_value(in);
        q.prompt_text_len = json_string_length(in);
        q.add_special = 1;
    } else {
        size_t n = json_array_size(in);
        if (!(ids = malloc(n * sizeof *ids)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        for (size_t k = 0; k < n; k++)
            ids[k] = (int32_t)json_integer_value(json_array_get(in, k));
        q.prompt_ids = ids;
        q.n_prompt_ids = n;
    }
    tern_err *err = srv_gen_start(r, &q, 0, &EMB_OPS, slot, g);
    free(ids);
    return err;
}

int srv_handle_embeddings(srv_req *r, json_t *body) {
    tern_server *s = r->srv;
    const int64_t H = s->info.hidden_size;
    json_t *inputs = NULL;
    int base64 = 0;
    int64_t dims = H;
    tern_err *err = srv_embeddings_read(body, s->info.vocab_size, H, &inputs, &base64, &dims);
    if (err)
        return srv_reply_err(r, err);
    const size_t n = json_array_size(inputs);
    float *vecs = malloc(n * (size_t)H * sizeof *vecs);
    emb_slot *slots = calloc(n, sizeof *slots);
    srv_gen **gens = calloc(n, sizeof *gens);
    if (!vecs || !slots || !gens) {
        free(vecs), free(slots), free(gens);
        json_decref(inputs);
        return srv_reply_error(r, 503, "out of memory for %zu embeddings", n);
    }
    /* A window of runs in flight, as many as the engine has rows: the rest wait here rather than in its queue. */
    tern_metrics m = {0};
    pthread_rwlock_rdlock(&s->engine_lock);
    if (s->engine)
        tern_engine_metrics(s->engine, &m);
    pthread_rwlock_unlock(&s->engine_lock);
    const size_t window = m.parallel > 0 ? (size_t)m.parallel : 1;
    srv_req_begin_generation(r);
    int64_t tokens = 0;
    int rc = -1, status = 0;
    char msg[640] = "";
    size_t started = 0;
    for (size_t i = 0; i < n && rc < 0 && !status; i++) {
        for (; started < n && started < i + window; started++) {
            slots[started] = (emb_slot){vecs + started * (size_t)H, H, 0, 0};
            if ((err = start(r, json_array_get(inputs, started), &slots[started], &gens[started]))) {
                status = srv_status_for_code(err->code);
                snprintf(msg, sizeof msg, "input[%zu]: %s", started, tern_err_msg(err));
                tern_err_free(err);
                break;
            }
        }
        if (status)
            break;
        /* each input is one event, too few for the run to look at the client: look here, between inputs */
        if (srv_client_gone(gens[i]->fd)) {
            srv_metrics_disconnect(&s->metrics); /* once for the request, not per input it drops */
            for (size_t j = i; j < started; j++)
                gens[j]->gone = 1;
            rc = 0;
            break;
        }
        int k = srv_gen_run(gens[i]);
        if (k < 0)
            rc = 0; /* MHD_NO: the client is gone */
        else if (k > 0 || !slots[i].got) {
            status = gens[i]->fail_status ? gens[i]->fail_status : 500;
            snprintf(msg, sizeof msg, "input[%zu]: %s", i, gens[i]->fail_msg[0] ? gens[i]->fail_msg : "no embedding");
        }
        tokens += slots[i].prompt_tokens;
        srv_gen_free(gens[i]);
        gens[i] = NULL;
    }
    for (size_t i = 0; i < n; i++) /* cancels what is still running after a failure */
        srv_gen_free(gens[i]);
    if (rc < 0 && status)
        rc = srv_reply_error(r, status, "%s", msg);
    if (rc < 0) {
        json_t *data = json_array();
        for (size_t i = 0; data && i < n; i++) {
            float *v = vecs + i * (size_t)H;
            truncate_normalize(v, dims);
            json_t *e = json_pack("{s:s,s:I,s:o}", "object", "embedding", "index", (json_int_t)i, "embedding",
                                  vector_json(v, dims, base64));
            if (!e || json_array_append_new(data, e)) {
                json_decref(data);
                data = NULL;
            }
        }
        json_t *v = data ? json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model", s->model_id,
                                     "usage", "prompt_tokens", (json_int_t)tokens, "total_tokens", (json_int_t)tokens)
                         : NULL;
        rc = v ? srv_reply_json(r, 200, v) : srv_reply_error(r, 503, "out of memory");
        json_decref(v);
    }
    free(vecs);
    free(slots);
    free(gens);
    json_decref(inputs);
    return rc;
}
