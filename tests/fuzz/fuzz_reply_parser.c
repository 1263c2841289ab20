/* fuzz_reply_parser.c — fuzz target for reading a model's reply back (chat/tool_calls.h) in every family's dialect:
 * generated text is whatever the model wrote, markers half-written or nested included. The first input byte picks
 * the dialect, whether tool calls are parsed, and how the text is cut into pushes; the rest is the text. Checked
 * beyond "no crash, no leak": the parts do not depend on how the text was cut (whole, in the picked pieces, and a
 * byte at a time give the same text of each kind in the same order and the same tool calls), text parts are never
 * empty, and every tool call's arguments are a JSON object. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/tool_calls.h"
#include "core/log.h"

static const tern_reply_dialect *const DIALECTS[] = {&tern_dialect_gemma4, &tern_dialect_hermes, &tern_dialect_llama3};

static void check(int ok) {
    if (!ok)
        __builtin_trap();
}

/* The parts of one reading, adjacent text of one kind joined: per part its kind, then for text its length and bytes,
 * for a tool call the name's and the arguments' lengths and bytes. */
typedef struct trace {
    char *s;
    size_t n, cap;
    tern_reply_kind last;
    size_t last_len_at; /* where the last text part's length is */
} trace;

static void put(trace *t, const void *p, size_t n) {
    if (t->n + n > t->cap) {
        t->cap = 2 * (t->n + n);
        t->s = realloc(t->s, t->cap);
        check(t->s != NULL);
    }
    memcpy(t->s + t->n, p, n);
    t->n += n;
}

static void put_text(trace *t, const char *p, size_t n) {
    put(t, &n, sizeof n);
    put(t, p, n);
}

static TERN_MUST_CHECK tern_err *record(void *user, const tern_reply_part *p) {
    trace *t = user;
    const char k = (char)p->kind;
    if (p->kind == TERN_REPLY_TOOL_CALL) {
        json_error_t je;
        json_t *args = json_loads(p->arguments, JSON_ALLOW_NUL, &je); /* as the server reads them back */
        check(json_is_object(args) && p->name && p->name[0]);
        json_decref(args);
        put(t, &k, 1);
        put_text(t, p->name, strlen(p->name));
        put_text(t, p->arguments, strlen(p->arguments));
        t->last = 0;
        return NULL;
    }
    check(p->len > 0 && p->text != NULL);
    if (t->last == p->kind) { /* the same kind as the part before: its text goes on */
        size_t len;
        memcpy(&len, t->s + t->last_len_at, sizeof len);
        len += p->len;
        memcpy(t->s + t->last_len_at, &len, sizeof len);
        put(t, p->text, p->len);
        return NULL;
    }
    put(t, &k, 1);
    t->last_len_at = t->n;
    put_text(t, p->text, p->len);
    t->last = p->kind;
    return NULL;
}

/* Reads text cut at the given lengths (cuts[i] bytes per push, cycling); 0 when the parser gave up with an error
 * (out of memory is the only one it may give). */
static int read_reply(const tern_reply_dialect *d, int tools, const char *text, size_t n, const size_t *cuts,
                      int n_cuts, trace *t) {
    tern_reply_parser *p;
    if (tern_reply_parser_new(d, tools, &p))
        return 0;
    tern_err *e = NULL;
    for (size_t at = 0, i = 0; !e && at < n; i++) {
        size_t len = cuts[i % (size_t)n_cuts];
        len = len < n - at ? len : n - at;
        e = tern_reply_parser_push(p, text + at, len, record, t);
        at += len;
    }
    if (!e)
        e = tern_reply_parser_finish(p, record, t);
    tern_reply_parser_free(p);
    if (e) {
        tern_err_free(e);
        return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_log_set_level(TERN_LOG_ERROR); /* a warning per malformed call would fill the log */
    if (size < 1)
        return 0;
    const tern_reply_dialect *d = DIALECTS[data[0] % 3];
    const int tools = data[0] >> 2 & 1;
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    /* pieces of 1..8 bytes from the bits of the first byte, as a tokenizer's pieces come */
    const size_t pieces[3] = {1 + (data[0] >> 3 & 7), 1 + (data[0] >> 5 & 3), 3};
    const size_t whole[1] = {n ? n : 1}, bytes[1] = {1};
    trace a = {0}, b = {0}, c = {0};
    const int ok_a = read_reply(d, tools, text, n, whole, 1, &a);
    const int ok_b = read_reply(d, tools, text, n, pieces, 3, &b);
    const int ok_c = read_reply(d, tools, text, n, bytes, 1, &c);
    if (ok_a && ok_b)
        check(a.n == b.n && (!a.n || !memcmp(a.s, b.s, a.n)));
    if (ok_a && ok_c)
        check(a.n == c.n && (!a.n || !memcmp(a.s, c.s, a.n)));
    free(a.s);
    free(b.s);
    free(c.s);
    return 0;
}
