/* params.c — validating request bodies: every field the server reads is type- and range-checked here, with an
 * error that names the field, says what was expected and what came. Unknown fields are ignored (docs/api.md
 * lists which known ones are ignored and which are rejected). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"
#include "core/utf8.h"
#include "server/server_internal.h"

tern_err *srv_parse_body(const char *body, size_t len, json_t **out) {
    *out = NULL;
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
        i++;
    if (i == len)
        return tern_errf(TERN_EINVAL, "the request body is empty: send a JSON object");
    json_error_t je;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return tern_errf(TERN_EINVAL, "the request body is not valid JSON (line %d, column %d): %s", je.line,
                         je.column, je.text);
    if (!json_is_object(v)) {
        tern_err *err = tern_errf(TERN_EINVAL, "the request body must be a JSON object, got %s", tern_json_type_name(v));
        json_decref(v);
        return err;
    }
    *out = v;
    return NULL;
}

json_t *srv_json_string_lossy(const char *s, size_t n) {
    json_t *v = json_stringn(s, n);
    if (v)
        return v;
    sbuf b = {0};
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        const int k = tern_utf8_check(u + i, n - i);
        if (k > 0 && u[i]) {
            sbuf_add(&b, s + i, (size_t)k);
            i += (size_t)k;
        } else {
            sbuf_add(&b, "\xef\xbf\xbd", 3); /* U+FFFD; NUL too, which JSON text here never needs */
            i++;
        }
    }
    v = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.len);
    sbuf_free(&b);
    return v;
}

json_t *srv_json_logprob(float lp) { return json_real(isfinite(lp) ? (double)lp : -9999.0); }

/* ---- typed fields ------------------------------------------------------------------------------- */

/* A number field in [lo, hi]; absent or null leaves *out and returns with *present = 0. */
static TERN_MUST_CHECK tern_err *num_field(const json_t *o, const char *key, double lo, double hi, double *out, int *present) {
    const json_t *v = json_object_get(o, key);
    if (present)
        *present = 0;
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_number(v))
        return tern_errf(TERN_EINVAL, "'%s' must be a number, got %s", key, tern_json_type_name(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return tern_errf(TERN_EINVAL, "'%s' must be between %g and %g, got %g", key, lo, hi, x);
    *out = x;
    if (present)
        *present = 1;
    return NULL;
}

/* An integer field in [lo, hi] (an integral real such as 100.0 counts). */
static TERN_MUST_CHECK tern_err *int_field(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, int *present) {
    const json_t *v = json_object_get(o, key);
    if (present)
        *present = 0;
    if (!v || json_is_null(v))
        return NULL;
    int64_t x;
    if (json_is_integer(v))
        x = (int64_t)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        x = (int64_t)json_real_value(v);
    else if (json_is_real(v))
        return tern_errf(TERN_EINVAL, "'%s' must be an integer, got %g", key, json_real_value(v));
    else
        return tern_errf(TERN_EINVAL, "'%s' must be an integer, got %s", key, tern_json_type_name(v));
    if (x < lo || x > hi)
        return tern_errf(TERN_EINVAL, "'%s' must be between %lld and %lld, got %lld", key, (long long)lo,
                         (long long)hi, (long long)x);
    *out = x;
    if (present)
        *present = 1;
    return NULL;
}

static TERN_MUST_CHECK tern_err *bool_field(const json_t *o, const char *key, int *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_boolean(v))
        return tern_errf(TERN_EINVAL, "'%s' must be true or false, got %s", key, tern_json_type_name(v));
    *out = json_is_true(v);
    return NULL;
}

/* stop / stop_sequences: a string or an array of up to max non-empty strings. */
static TERN_MUST_CHECK tern_err *stops_field(const json_t *o, const char *key, int allow_string, int max, srv_params *p) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return NULL;
    const json_t *one[1] = {v};
    size_t n;
    if (json_is_string(v) && allow_string)
        n = 1;
    else if (json_is_array(v))
        n = json_array_size(v);
    else
        return tern_errf(TERN_EINVAL, "'%s' must be %san array of strings, got %s", key,
                         allow_string ? "a string or " : "", tern_json_type_name(v));
    if (n > (size_t)max)
        return tern_errf(TERN_EINVAL, "'%s' may hold at most %d sequences, got %zu", key, max, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_is_array(v) ? json_array_get(v, i) : one[0];
        if (!json_is_string(s))
            return tern_errf(TERN_EINVAL, "'%s[%zu]' must be a string, got %s", key, i, tern_json_type_name(s));
        size_t len = json_string_length(s);
        if (len == 0)
            return tern_errf(TERN_EINVAL, "'%s' sequences must not be empty", key);
        if (len > TERN_MAX_STOP_STRING_BYTES)
            return tern_errf(TERN_EINVAL, "'%s' sequences may be at most %d bytes, got %zu", key,
                             TERN_MAX_STOP_STRING_BYTES, len);
        if (memchr(json_string_value(s), 0, len))
            return tern_errf(TERN_EINVAL, "'%s[%zu]' contains a NUL character", key, i);
        if (!(p->stops[p->req.n_stop_strings] = strdup(json_string_value(s))))
            return tern_errf(TERN_ENOMEM, "out of memory");
        p->req.n_stop_strings++;
    }
    p->req.stop_strings = (const char *const *)p->stops;
    return NULL;
}

static TERN_MUST_CHECK tern_err *logit_bias_field(const json_t *o, int64_t vocab, srv_params *p) {
    const json_t *v = json_object_get(o, "logit_bias");
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_object(v))
        return tern_errf(TERN_EINVAL, "'logit_bias' must be an object mapping token ids to biases, got %s",
                         tern_json_type_name(v));
    size_t n = json_object_size(v);
    if (n > TERN_MAX_LOGIT_BIAS)
        return tern_errf(TERN_EINVAL, "'logit_bias' may hold at most %d tokens, got %zu", TERN_MAX_LOGIT_BIAS, n);
    if (n == 0)
        return NULL;
    if (!(p->bias = calloc(n, sizeof *p->bias)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    const char *key;
    const json_t *b;
    int k = 0;
    json_object_foreach((json_t *)v, key, b) {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || end == key || id < 0 || id >= vocab)
            return tern_errf(TERN_EINVAL, "'logit_bias' key '%.32s' is not a token id in [0, %lld)", key,
                             (long long)vocab);
        if (!json_is_number(b))
            return tern_errf(TERN_EINVAL, "'logit_bias[\"%s\"]' must be a number, got %s", key,
                             tern_json_type_name(b));
        double x = json_number_value(b);
        if (!(x >= -100 && x <= 100))
            return tern_errf(TERN_EINVAL, "'logit_bias[\"%s\"]' must be between -100 and 100, got %g", key, x);
        p->bias[k].token = (int32_t)id;
        p->bias[k].bias = (float)x;
        k++;
    }
    p->req.sampling.logit_bias = p->bias;
    p->req.sampling.n_logit_bias = k;
    return NULL;
}

/* OpenAI predicted outputs: {"type": "content", "content": "..." or [{"type": "text", "text": "..."}, ...]}, the
 * text parts joined. */
static TERN_MUST_CHECK tern_err *prediction_field(const json_t *body, srv_params *p) {
    const json_t *pr = json_object_get(body, "prediction");
    if (!pr || json_is_null(pr))
        return NULL;
    if (!json_is_object(pr))
        return tern_errf(TERN_EINVAL, "'prediction' must be an object {\"type\": \"content\", \"content\": ...}, got %s",
                         tern_json_type_name(pr));
    const json_t *type = json_object_get(pr, "type"), *content = json_object_get(pr, "content");
    if (!json_is_string(type) || strcmp(json_string_value(type), "content"))
        return tern_errf(TERN_EINVAL, "'prediction.type' must be \"content\"");
    size_t len = 0;
    if (json_is_string(content)) {
        len = json_string_length(content);
        if (!(p->prediction = malloc(len + 1)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        memcpy(p->prediction, json_string_value(content), len + 1);
    } else if (json_is_array(content)) {
        size_t i, cap = 1;
        const json_t *part;
        json_array_foreach(content, i, part) {
            const json_t *t = json_object_get(part, "type"), *text = json_object_get(part, "text");
            if (!json_is_object(part) || !json_is_string(t) || strcmp(json_string_value(t), "text") ||
                !json_is_string(text))
                return tern_errf(TERN_EINVAL, "'prediction.content[%zu]' must be {\"type\": \"text\", \"text\": "
                                 "string}", i);
            cap += json_string_length(text);
        }
        if (!(p->prediction = malloc(cap)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        json_array_foreach(content, i, part) {
            const json_t *text = json_object_get(part, "text");
            memcpy(p->prediction + len, json_string_value(text), json_string_length(text));
            len += json_string_length(text);
        }
        p->prediction[len] = 0;
    } else {
        return tern_errf(TERN_EINVAL, "'prediction.content' must be a string or an array of text parts, got %s",
                         content ? tern_json_type_name(content) : "nothing");
    }
    p->req.prediction_text = p->prediction;
    p->req.prediction_text_len = len;
    return NULL;
}

/* ---- the request ------------------------------------------------------------------------------ */

#define MAX_GEN_TOKENS (1 << 24)

tern_err *srv_params_parse(const json_t *body, srv_params_kind kind, int64_t vocab, srv_params *p) {
    memset(p, 0, sizeof *p);
    tern_request_default(&p->req);
    tern_sampling_params *sp = &p->req.sampling;
    int present;
    double x;
    int64_t i;

    const json_t *model = json_object_get(body, "model");
    if (model && !json_is_null(model) && !json_is_string(model))
        return tern_errf(TERN_EINVAL, "'model' must be a string, got %s", tern_json_type_name(model));

    /* sampling */
    x = 1.0; /* both APIs default to 1 */
    TERN_TRY(num_field(body, "temperature", 0, kind == PARAMS_MESSAGES ? 1 : 2, &x, NULL));
    sp->temperature = (float)x;
    x = 1.0;
    TERN_TRY(num_field(body, "top_p", 0, 1, &x, &present));
    sp->top_p = (float)x;
    i = 0;
    TERN_TRY(int_field(body, "top_k", -1, vocab, &i, &present));
    sp->top_k = i < 0 ? 0 : (int)i;
    x = 0.0;
    TERN_TRY(num_field(body, "min_p", 0, 1, &x, NULL));
    sp->min_p = (float)x;
    if (kind != PARAMS_MESSAGES) {
        x = 1.0;
        TERN_TRY(num_field(body, "repetition_penalty", 0.01, 10, &x, NULL));
        sp->repetition_penalty = (float)x;
        x = 0.0;
        TERN_TRY(num_field(body, "presence_penalty", -2, 2, &x, NULL));
        sp->presence_penalty = (float)x;
        x = 0.0;
        TERN_TRY(num_field(body, "frequency_penalty", -2, 2, &x, NULL));
        sp->frequency_penalty = (float)x;
        i = sp->penalty_last_n;
        TERN_TRY(int_field(body, "repetition_context_size", -1, MAX_GEN_TOKENS, &i, NULL));
        TERN_TRY(int_field(body, "penalty_last_n", -1, MAX_GEN_TOKENS, &i, NULL));
        sp->penalty_last_n = i;
        TERN_TRY(logit_bias_field(body, vocab, p));
        TERN_TRY(bool_field(body, "ignore_eos", &p->req.ignore_eos));
    }
    TERN_TRY(int_field(body, "seed", INT64_MIN, INT64_MAX, &i, &present));
    if (present) {
        sp->seed = (uint64_t)i;
        sp->has_seed = 1;
    }

    /* length */
    int64_t max_tokens = 0;
    if (kind == PARAMS_MESSAGES) {
        const json_t *mt = json_object_get(body, "max_tokens");
        if (!mt || json_is_null(mt))
            return tern_errf(TERN_EINVAL, "'max_tokens' is required");
        TERN_TRY(int_field(body, "max_tokens", 1, MAX_GEN_TOKENS, &max_tokens, NULL));
    } else {
        TERN_TRY(int_field(body, "max_tokens", 1, MAX_GEN_TOKENS, &max_tokens, NULL));
        if (kind == PARAMS_CHAT)
            TERN_TRY(int_field(body, "max_completion_tokens", 1, MAX_GEN_TOKENS, &max_tokens, NULL));
    }
    p->req.max_tokens = max_tokens;

    /* stops */
    if (kind == PARAMS_MESSAGES)
        TERN_TRY(stops_field(body, "stop_sequences", 0, TERN_MAX_STOP_STRINGS, p));
    else
        TERN_TRY(stops_field(body, "stop", 1, 4, p));

    /* choices */
    if (kind != PARAMS_MESSAGES) {
        int64_t n = 1;
        TERN_TRY(int_field(body, "n", 1, 1 << 20, &n, NULL));
        if (n != 1)
            return tern_errf(TERN_EINVAL, "'n' must be 1: this server returns one choice per request, got %lld",
                             (long long)n);
        if (kind == PARAMS_COMPLETIONS) {
            TERN_TRY(int_field(body, "best_of", 1, 1 << 20, &n, NULL));
            if (n != 1)
                return tern_errf(TERN_EINVAL, "'best_of' must be 1 on this server, got %lld", (long long)n);
        }
    }

    /* logprobs */
    if (kind == PARAMS_CHAT) {
        int lp = 0;
        TERN_TRY(bool_field(body, "logprobs", &lp));
        i = 0;
        TERN_TRY(int_field(body, "top_logprobs", 0, 20, &i, &present));
        if (present && i > 0 && !lp)
            return tern_errf(TERN_EINVAL, "'top_logprobs' needs 'logprobs': true");
        p->req.logprobs = lp;
        p->req.top_logprobs = (int)i;
    } else if (kind == PARAMS_COMPLETIONS) {
        const json_t *lpv = json_object_get(body, "logprobs");
        if (json_is_boolean(lpv)) { /* not the legacy form, but clients send it */
            p->req.logprobs = json_is_true(lpv);
        } else {
            i = 0;
            TERN_TRY(int_field(body, "logprobs", 0, 20, &i, &present));
            p->req.logprobs = present;
            p->req.top_logprobs = (int)i;
        }
    }

    /* speculative decoding: the predicted output, and llama.cpp's per-request draft length (0 = none) */
    if (kind != PARAMS_MESSAGES) {
        TERN_TRY(prediction_field(body, p));
        TERN_TRY(int_field(body, "speculative.n_max", 0, 64, &i, &present));
        if (present) {
            p->req.draft_max = (int)i;
            p->req.draft_off = i == 0;
        }
    }

    /* streaming */
    TERN_TRY(bool_field(body, "stream", &p->stream));
    if (kind != PARAMS_MESSAGES) {
        const json_t *so = json_object_get(body, "stream_options");
        if (so && !json_is_null(so)) {
            if (!json_is_object(so))
                return tern_errf(TERN_EINVAL, "'stream_options' must be an object, got %s", tern_json_type_name(so));
            const json_t *iu = json_object_get(so, "include_usage");
            if (iu && !json_is_null(iu) && !json_is_boolean(iu))
                return tern_errf(TERN_EINVAL, "'stream_options.include_usage' must be true or false, got %s",
                                 tern_json_type_name(iu));
            p->include_usage = json_is_true(iu);
        }
    }
    return NULL;
}

void srv_params_set_grammar(srv_params *p, char *gbnf, int special) {
    free(p->grammar);
    p->grammar = gbnf;
    p->req.grammar = gbnf;
    p->req.grammar_len = gbnf ? strlen(gbnf) : 0;
    p->req.grammar_special = special;
}

void srv_params_free(srv_params *p) {
    free(p->bias);
    free(p->prediction);
    free(p->grammar);
    for (int k = 0; k < TERN_MAX_STOP_STRINGS; k++)
        free(p->stops[k]);
    memset(p, 0, sizeof *p);
}
