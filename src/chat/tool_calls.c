/* tool_calls.c — replies into content, reasoning and tool calls (see tool_calls.h for the markup).
 *
 * Three parts: a recursive-descent reader for Gemma 4's argument syntax (bounded depth, every read
 * bounds-checked), the JSON call bodies of the other dialects, and a small state machine that splits streamed
 * text at a dialect's markers. The state machine holds back only a tail
 * that could still grow into a marker, so content streams out with at most one marker's length of delay. */
#include "chat/tool_calls.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/sbuf.h"

#define MAX_VALUE_DEPTH 64
#define MAX_CHANNEL_NAME 64
#define MAX_TOOL_CALL_BYTES (4u << 20)

/* ==== the argument syntax ================================================================ */

typedef struct g4_reader {
    const char *s;
    size_t n, i;
    int depth;
} g4_reader;

static const size_t QUOTE_LEN = sizeof TERN_G4_QUOTE - 1;

static void skip_ws(g4_reader *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
        r->i++;
}

static int at(const g4_reader *r, const char *lit, size_t len) {
    return r->n - r->i >= len && memcmp(r->s + r->i, lit, len) == 0;
}

static const char *find(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || n < m)
        return NULL;
    for (size_t i = 0; i + m <= n; i++) {
        const char *c = memchr(hay + i, needle[0], n - m + 1 - i);
        if (!c)
            return NULL;
        if (memcmp(c, needle, m) == 0)
            return c;
        i = (size_t)(c - hay);
    }
    return NULL;
}

/* A JSON string from raw bytes; invalid UTF-8 is an error rather than a silent replacement. */
static TERN_MUST_CHECK tern_err *make_string(const g4_reader *r, const char *p, size_t len, json_t **out) {
    *out = json_stringn(p, len);
    if (!*out)
        return tern_errf(TERN_EINVAL, "tool call: invalid UTF-8 in the string at byte %zu", (size_t)(p - r->s));
    return NULL;
}

/* <|"|>...<|"|> at r->i: the raw bytes in between. */
static TERN_MUST_CHECK tern_err *read_quoted(g4_reader *r, const char **p, size_t *len) {
    size_t start = r->i;
    r->i += QUOTE_LEN;
    const char *end = find(r->s + r->i, r->n - r->i, TERN_G4_QUOTE, QUOTE_LEN);
    if (!end)
        return tern_errf(TERN_EINVAL, "tool call: the string opened at byte %zu is never closed with <|\"|>", start);
    *p = r->s + r->i;
    *len = (size_t)(end - (r->s + r->i));
    r->i = (size_t)(end - r->s) + QUOTE_LEN;
    return NULL;
}

/* JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s, size_t n, int *is_int) {
    size_t i = 0;
    *is_int = 1;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n || !isdigit((unsigned char)s[i]))
        return 0;
    if (s[i] == '0')
        i++;
    else
        while (i < n && isdigit((unsigned char)s[i]))
            i++;
    if (i < n && s[i] == '.') {
        *is_int = 0;
        if (++i >= n || !isdigit((unsigned char)s[i]))
            return 0;
        while (i < n && isdigit((unsigned char)s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *is_int = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !isdigit((unsigned char)s[i]))
            return 0;
        while (i < n && isdigit((unsigned char)s[i]))
            i++;
    }
    return i == n;
}

/* A bare word (number, boolean, null, or an unquoted string the model wrote) up to , } ] or the end. */
static TERN_MUST_CHECK tern_err *read_bare(g4_reader *r, json_t **out) {
    size_t b = r->i;
    while (r->i < r->n && r->s[r->i] != ',' && r->s[r->i] != '}' && r->s[r->i] != ']' &&
           !at(r, TERN_G4_QUOTE, QUOTE_LEN))
        r->i++;
    size_t e = r->i;
    while (e > b && isspace((unsigned char)r->s[e - 1]))
        e--;
    const char *w = r->s + b;
    size_t n = e - b;
    if (n == 0)
        return tern_errf(TERN_EINVAL, "tool call: expected a value at byte %zu", b);
#define WORD(lit) (n == sizeof lit - 1 && memcmp(w, lit, n) == 0)
    if (WORD("true") || WORD("True"))
        *out = json_true();
    else if (WORD("false") || WORD("False"))
        *out = json_false();
    else if (WORD("null") || WORD("None") || WORD("none"))
        *out = json_null();
#undef WORD
    else {
        int is_int;
        char num[64];
        if (n < sizeof num && is_json_number(w, n, &is_int)) {
            memcpy(num, w, n);
            num[n] = 0;
            if (is_int) {
                errno = 0;
                long long v = strtoll(num, NULL, 10);
                *out = errno == ERANGE ? json_real(strtod(num, NULL)) : json_integer(v);
            } else {
                double d = strtod(num, NULL);
                *out = isfinite(d) ? json_real(d) : NULL;
                if (!*out)
                    return make_string(r, w, n, out);
            }
        } else {
            return make_string(r, w, n, out);
        }
    }
    return *out ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
}

static TERN_MUST_CHECK tern_err *read_value(g4_reader *r, json_t **out);

static TERN_MUST_CHECK tern_err *read_object(g4_reader *r, json_t **out) {
    size_t open = r->i++;
    json_t *obj = json_object();
    if (!obj)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *err = NULL;
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == '}') {
        r->i++;
        *out = obj;
        return NULL;
    }
    for (;;) {
        skip_ws(r);
        const char *key;
        size_t klen;
        if (at(r, TERN_G4_QUOTE, QUOTE_LEN)) {
            if ((err = read_quoted(r, &key, &klen)))
                break;
        } else {
            size_t b = r->i;
            while (r->i < r->n && r->s[r->i] != ':' && r->s[r->i] != ',' && r->s[r->i] != '}' && r->s[r->i] != '{')
                r->i++;
            size_t e = r->i;
            while (e > b && isspace((unsigned char)r->s[e - 1]))
                e--;
            key = r->s + b;
            klen = e - b;
            if (klen == 0) {
                err = tern_errf(TERN_EINVAL, "tool call: expected a key at byte %zu", b);
                break;
            }
        }
        skip_ws(r);
        if (r->i >= r->n || r->s[r->i] != ':') {
            err = tern_errf(TERN_EINVAL, "tool call: expected ':' after the key at byte %zu", r->i);
            break;
        }
        r->i++;
        if (memchr(key, 0, klen)) { /* JSON readers (jansson's among them) refuse such a key: no reading it back */
            err = tern_errf(TERN_EINVAL, "tool call: a NUL byte in the key before byte %zu", r->i);
            break;
        }
        json_t *v;
        if ((err = read_value(r, &v)))
            break;
        if (json_object_setn_new(obj, key, klen, v)) {
            err = tern_errf(TERN_EINVAL, "tool call: invalid UTF-8 in the key before byte %zu", r->i);
            break;
        }
        skip_ws(r);
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            continue;
        }
        if (r->i < r->n && r->s[r->i] == '}') {
            r->i++;
            *out = obj;
            return NULL;
        }
        err = tern_errf(TERN_EINVAL, "tool call: the object opened at byte %zu needs ',' or '}' at byte %zu", open,
                        r->i);
        break;
    }
    json_decref(obj);
    return err;
}

static TERN_MUST_CHECK tern_err *read_array(g4_reader *r, json_t **out) {
    size_t open = r->i++;
    json_t *arr = json_array();
    if (!arr)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *err = NULL;
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == ']') {
        r->i++;
        *out = arr;
        return NULL;
    }
    for (;;) {
        json_t *v;
        if ((err = read_value(r, &v)))
            break;
        if (json_array_append_new(arr, v)) {
            err = tern_errf(TERN_ENOMEM, "out of memory");
            break;
        }
        skip_ws(r);
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            continue;
        }
        if (r->i < r->n && r->s[r->i] == ']') {
            r->i++;
            *out = arr;
            return NULL;
        }
        err = tern_errf(TERN_EINVAL, "tool call: the array opened at byte %zu needs ',' or ']' at byte %zu", open,
                        r->i);
        break;
    }
    json_decref(arr);
    return err;
}

static TERN_MUST_CHECK tern_err *read_value(g4_reader *r, json_t **out) {
    skip_ws(r);
    if (r->i >= r->n)
        return tern_errf(TERN_EINVAL, "tool call: expected a value at byte %zu (end of text)", r->i);
    if (at(r, TERN_G4_QUOTE, QUOTE_LEN)) {
        const char *p;
        size_t len;
        TERN_TRY(read_quoted(r, &p, &len));
        return make_string(r, p, len, out);
    }
    char c = r->s[r->i];
    if (c == '{' || c == '[') {
        if (r->depth >= MAX_VALUE_DEPTH)
            return tern_errf(TERN_EINVAL, "tool call: values nest deeper than %d levels at byte %zu", MAX_VALUE_DEPTH,
                             r->i);
        r->depth++;
        tern_err *err = c == '{' ? read_object(r, out) : read_array(r, out);
        r->depth--;
        return err;
    }
    return read_bare(r, out);
}

tern_err *tern_g4_parse_value(const char *text, size_t len, json_t **out) {
    g4_reader r = {text, len, 0, 0};
    *out = NULL;
    TERN_TRY(read_value(&r, out));
    skip_ws(&r);
    if (r.i != r.n) {
        json_decref(*out);
        *out = NULL;
        return tern_errf(TERN_EINVAL, "tool call: unexpected text at byte %zu after the value", r.i);
    }
    return NULL;
}

tern_err *tern_g4_parse_tool_call(const char *body, size_t len, char **name, json_t **args) {
    g4_reader r = {body, len, 0, 0};
    *name = NULL;
    *args = NULL;
    skip_ws(&r);
    if (!at(&r, "call:", 5))
        return tern_errf(TERN_EINVAL, "tool call: expected 'call:NAME{...}' at byte %zu", r.i);
    r.i += 5;
    size_t b = r.i;
    while (r.i < r.n && r.s[r.i] != '{')
        r.i++;
    size_t e = r.i;
    while (b < e && isspace((unsigned char)r.s[b]))
        b++;
    while (e > b && isspace((unsigned char)r.s[e - 1]))
        e--;
    if (e == b)
        return tern_errf(TERN_EINVAL, "tool call: the function name is empty (byte %zu)", b);
    for (size_t k = b; k < e; k++) {
        unsigned char c = (unsigned char)r.s[k];
        if (c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == ',' || c == ':' || c == '}')
            return tern_errf(TERN_EINVAL, "tool call: unexpected character in the function name at byte %zu", k);
    }
    if (r.i >= r.n)
        return tern_errf(TERN_EINVAL, "tool call: expected '{' after the function name (end of text)");
    json_t *obj;
    TERN_TRY(read_object(&r, &obj));
    skip_ws(&r);
    if (r.i != r.n) {
        json_decref(obj);
        return tern_errf(TERN_EINVAL, "tool call: unexpected text at byte %zu after the arguments", r.i);
    }
    json_t *probe = json_stringn(r.s + b, e - b); /* the name must be valid UTF-8 to travel in JSON */
    if (!probe) {
        json_decref(obj);
        return tern_errf(TERN_EINVAL, "tool call: the function name is not valid UTF-8");
    }
    json_decref(probe);
    *name = malloc(e - b + 1);
    if (!*name) {
        json_decref(obj);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    memcpy(*name, r.s + b, e - b);
    (*name)[e - b] = 0;
    *args = obj;
    return NULL;
}

/* ==== JSON call bodies ==================================================================== */

tern_err *tern_json_parse_tool_call(const char *body, size_t len, char **name, json_t **args) {
    *name = NULL;
    *args = NULL;
    json_error_t je;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!v)
        return tern_errf(TERN_EINVAL, "tool call: not JSON (%s at byte %d)", je.text, je.position);
    const json_t *n = json_object_get(v, "name"), *a = json_object_get(v, "arguments");
    if (!a)
        a = json_object_get(v, "parameters");
    tern_err *err = NULL;
    json_t *obj = NULL; /* the arguments, owned */
    if (!json_is_object(v) || !json_is_string(n) || json_string_length(n) == 0 ||
        strlen(json_string_value(n)) != json_string_length(n)) /* a name holding U+0000 names no function */
        err = tern_errf(TERN_EINVAL, "tool call: expected {\"name\": ..., \"arguments\": {...}}");
    else if (json_is_string(a)) /* arguments as a JSON text */
        obj = json_loadb(json_string_value(a), json_string_length(a), JSON_ALLOW_NUL, &je);
    else
        obj = a ? json_incref((json_t *)a) : json_object();
    if (!err && !json_is_object(obj))
        err = tern_errf(TERN_EINVAL, "tool call: the arguments are not a JSON object");
    if (!err && !(*name = strdup(json_string_value(n))))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (err)
        json_decref(obj);
    else
        *args = obj;
    json_decref(v);
    return err;
}

const tern_reply_dialect tern_dialect_gemma4 = {
    .name = "gemma4",
    .think_open = TERN_G4_CHANNEL_OPEN,
    .think_close = TERN_G4_CHANNEL_CLOSE,
    .think_named = 1,
    .call_open = TERN_G4_TOOL_CALL_OPEN,
    .call_close = TERN_G4_TOOL_CALL_CLOSE,
    .force_open = TERN_G4_TOOL_CALL_OPEN "call:",
    .force_mid = "",
    .force_close = TERN_G4_TOOL_CALL_CLOSE,
    .parse_call = tern_g4_parse_tool_call,
};

const tern_reply_dialect tern_dialect_hermes = {
    .name = "hermes",
    .think_open = "<think>",
    .think_close = "</think>",
    .call_open = "<tool_call>",
    .call_close = "</tool_call>",
    .force_open = "<tool_call>\n{\"name\": \"",
    .force_mid = "\", \"arguments\": ",
    .force_close = "}\n</tool_call>",
    .json_args = 1,
    .parse_call = tern_json_parse_tool_call,
};

const tern_reply_dialect tern_dialect_llama3 = {
    .name = "llama3-json",
    .think_open = "<think>",
    .think_close = "</think>",
    .call_open = "<|python_tag|>",
    .call_bare = 1,
    .force_open = "{\"name\": \"",
    .force_mid = "\", \"parameters\": ",
    .force_close = "}",
    .json_args = 1,
    .parse_call = tern_json_parse_tool_call,
};

/* ==== the streaming splitter ============================================================ */

enum { ST_TEXT, ST_CHANNEL_NAME, ST_REASON, ST_TOOL };

struct tern_reply_parser {
    const tern_reply_dialect *d;
    int parse_tools;
    int started;    /* some text of the reply was seen beyond leading white space */
    int bare;       /* ST_TOOL: a call with no opening marker (call_bare) */
    int state;
    sbuf held;      /* held-back text (TEXT/REASON), channel name so far, or the tool call body so far */
    size_t scanned; /* ST_TOOL: bytes of `held` already searched for the closing marker */
    int n_calls;
};

tern_err *tern_reply_parser_new(const tern_reply_dialect *d, int parse_tools, tern_reply_parser **out) {
    *out = calloc(1, sizeof **out);
    if (!*out)
        return tern_errf(TERN_ENOMEM, "out of memory");
    (*out)->d = d ? d : &tern_dialect_gemma4;
    (*out)->parse_tools = parse_tools;
    return NULL;
}

void tern_reply_parser_free(tern_reply_parser *p) {
    if (!p)
        return;
    sbuf_free(&p->held);
    free(p);
}

int tern_reply_parser_tool_calls(const tern_reply_parser *p) { return p->n_calls; }

static TERN_MUST_CHECK tern_err *append(tern_reply_parser *p, const char *s, size_t n) {
    return sbuf_add(&p->held, s, n) ? tern_errf(TERN_ENOMEM, "out of memory holding back reply text") : NULL;
}

static void consume(tern_reply_parser *p, size_t n) {
    if (!p->held.p)
        return;
    memmove(p->held.p, p->held.p + n, p->held.len - n);
    p->held.len -= n;
    p->held.p[p->held.len] = 0;
}

static TERN_MUST_CHECK tern_err *emit_text(tern_reply_kind kind, const char *s, size_t n, tern_reply_fn fn, void *user) {
    if (n == 0)
        return NULL;
    tern_reply_part part = {.kind = kind, .text = s, .len = n};
    return fn(user, &part);
}

/* Length of the longest tail of s[0,n) that is a proper prefix of `marker`. */
static size_t partial_tail(const char *s, size_t n, const char *marker) {
    size_t m = strlen(marker);
    for (size_t l = m - 1 < n ? m - 1 : n; l > 0; l--)
        if (memcmp(s + n - l, marker, l) == 0)
            return l;
    return 0;
}

/* Tool calls that did not parse, in this process (for /metrics). */
static atomic_ullong malformed_total;

unsigned long long tern_reply_malformed_tool_calls(void) { return atomic_load(&malformed_total); }

/* A finished tool call body: a tool call if it parses, else the markup verbatim as content — as llama.cpp's server
 * does — with a warning that says why and a count. */
static TERN_MUST_CHECK tern_err *emit_tool_call(tern_reply_parser *p, const char *body, size_t n, int closed, tern_reply_fn fn,
                                void *user) {
    char *name;
    json_t *args;
    tern_err *perr = p->d->parse_call(body, n, &name, &args);
    if (perr) {
        /* A bare reply that is not a call is just an answer that starts with '{'. */
        if (!p->bare) {
            atomic_fetch_add(&malformed_total, 1);
            TLOG_WARN("a tool call the model wrote does not parse (%s): it is passed on as content",
                      tern_err_msg(perr));
        }
        tern_err_free(perr);
        tern_err *err = p->bare ? NULL : emit_text(TERN_REPLY_CONTENT, p->d->call_open, strlen(p->d->call_open), fn,
                                                   user);
        if (!err)
            err = emit_text(TERN_REPLY_CONTENT, body, n, fn, user);
        if (!err && closed)
            err = emit_text(TERN_REPLY_CONTENT, p->d->call_close, strlen(p->d->call_close), fn, user);
        return err;
    }
    char *json = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(args);
    if (!json) {
        free(name);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    p->n_calls++;
    tern_reply_part part = {.kind = TERN_REPLY_TOOL_CALL, .name = name, .arguments = json};
    tern_err *err = fn(user, &part);
    free(name);
    free(json);
    return err;
}

/* Processes as much of the held text as can be decided now. */
static TERN_MUST_CHECK tern_err *drain(tern_reply_parser *p, tern_reply_fn fn, void *user) {
    const tern_reply_dialect *d = p->d;
    const size_t CH_OPEN = strlen(d->think_open), CH_CLOSE = strlen(d->think_close), TC_OPEN = strlen(d->call_open),
                 TC_CLOSE = d->call_close ? strlen(d->call_close) : 0;
    for (;;) {
        switch (p->state) {
        case ST_TEXT: {
            if (!p->started && d->call_bare && p->parse_tools) { /* a bare call opens the reply: only white space
                                                                  * may come before it */
                size_t ws = 0;
                while (ws < p->held.len && isspace((unsigned char)p->held.p[ws]))
                    ws++;
                if (ws == p->held.len)
                    return NULL;
                p->started = 1;
                if (p->held.p[ws] == '{') {
                    consume(p, ws);
                    p->state = ST_TOOL;
                    p->bare = 1;
                    continue;
                }
            }
            const char *ch = find(p->held.p, p->held.len, d->think_open, CH_OPEN);
            const char *tc = p->parse_tools ? find(p->held.p, p->held.len, d->call_open, TC_OPEN) : NULL;
            const char *hit = ch && (!tc || ch < tc) ? ch : tc;
            if (hit) {
                size_t k = (size_t)(hit - p->held.p);
                TERN_TRY(emit_text(TERN_REPLY_CONTENT, p->held.p, k, fn, user));
                consume(p, k + (hit == ch ? CH_OPEN : TC_OPEN));
                p->state = hit != ch ? ST_TOOL : d->think_named ? ST_CHANNEL_NAME : ST_REASON;
                p->scanned = 0;
                continue;
            }
            size_t hold = partial_tail(p->held.p, p->held.len, d->think_open);
            if (p->parse_tools) {
                size_t h2 = partial_tail(p->held.p, p->held.len, d->call_open);
                if (h2 > hold)
                    hold = h2;
            }
            TERN_TRY(emit_text(TERN_REPLY_CONTENT, p->held.p, p->held.len - hold, fn, user));
            consume(p, p->held.len - hold);
            return NULL;
        }
        case ST_CHANNEL_NAME: {
            /* Only the first MAX_CHANNEL_NAME + 1 bytes can end a name, however the text arrives: a reply fed whole
             * and one fed a token at a time split the same way. */
            const size_t span = p->held.len < MAX_CHANNEL_NAME + 1 ? p->held.len : MAX_CHANNEL_NAME + 1;
            const char *nl = memchr(p->held.p, '\n', span);
            const char *close = find(p->held.p, span, d->think_close, CH_CLOSE);
            if (close && (!nl || close < nl)) { /* "<|channel>thought<channel|>": an empty channel */
                consume(p, (size_t)(close - p->held.p) + CH_CLOSE);
                p->state = ST_TEXT;
                continue;
            }
            if (nl) {
                consume(p, (size_t)(nl - p->held.p) + 1);
                p->state = ST_REASON;
                continue;
            }
            if (p->held.len > MAX_CHANNEL_NAME) { /* no name line after all: it is all reasoning */
                p->state = ST_REASON;
                continue;
            }
            return NULL;
        }
        case ST_REASON: {
            const char *close = find(p->held.p, p->held.len, d->think_close, CH_CLOSE);
            if (close) {
                size_t k = (size_t)(close - p->held.p);
                TERN_TRY(emit_text(TERN_REPLY_REASONING, p->held.p, k, fn, user));
                consume(p, k + CH_CLOSE);
                p->state = ST_TEXT;
                continue;
            }
            size_t hold = partial_tail(p->held.p, p->held.len, d->think_close);
            TERN_TRY(emit_text(TERN_REPLY_REASONING, p->held.p, p->held.len - hold, fn, user));
            consume(p, p->held.len - hold);
            return NULL;
        }
        case ST_TOOL: {
            size_t from = p->scanned > TC_CLOSE ? p->scanned - TC_CLOSE : 0;
            const char *close = TC_CLOSE ? find(p->held.p + from, p->held.len - from, d->call_close, TC_CLOSE) : NULL;
            if (close) {
                size_t k = (size_t)(close - p->held.p);
                TERN_TRY(emit_tool_call(p, p->held.p, k, 1, fn, user));
                consume(p, k + TC_CLOSE);
                p->state = ST_TEXT;
                p->bare = 0;
                continue;
            }
            p->scanned = p->held.len;
            if (p->held.len > MAX_TOOL_CALL_BYTES) { /* runaway: give it back as text */
                if (!p->bare)
                    TERN_TRY(emit_text(TERN_REPLY_CONTENT, d->call_open, TC_OPEN, fn, user));
                p->state = ST_TEXT;
                p->parse_tools = 0;
                p->bare = 0;
                continue;
            }
            return NULL;
        }
        default:
            return tern_errf(TERN_EINTERNAL, "reply parser: bad state %d", p->state);
        }
    }
}

tern_err *tern_reply_parser_push(tern_reply_parser *p, const char *text, size_t len, tern_reply_fn fn, void *user) {
    TERN_TRY(append(p, text, len));
    return drain(p, fn, user);
}

tern_err *tern_reply_parser_finish(tern_reply_parser *p, tern_reply_fn fn, void *user) {
    TERN_TRY(drain(p, fn, user));
    tern_err *err = NULL;
    switch (p->state) {
    case ST_TEXT:
        err = emit_text(TERN_REPLY_CONTENT, p->held.p, p->held.len, fn, user);
        break;
    case ST_CHANNEL_NAME:
    case ST_REASON:
        err = emit_text(TERN_REPLY_REASONING, p->held.p, p->held.len, fn, user);
        break;
    case ST_TOOL:
        if (!p->d->call_close) { /* a call that runs to the end of the reply is complete now */
            err = emit_tool_call(p, p->held.p, p->held.len, 0, fn, user);
            break;
        }
        err = emit_text(TERN_REPLY_CONTENT, p->d->call_open, strlen(p->d->call_open), fn, user);
        if (!err)
            err = emit_text(TERN_REPLY_CONTENT, p->held.p, p->held.len, fn, user);
        break;
    }
    sbuf_clear(&p->held);
    p->state = ST_TEXT;
    p->bare = 0;
    return err;
}
