/* test_tool_calls.c — Gemma 4 replies split into content, reasoning and tool calls: the argument syntax
 * (<|"|> strings, bare and quoted keys, nesting, numbers, booleans, null), malformed calls, and the streaming
 * splitter fed the same reply in every possible pair of pieces and byte by byte, which must give the same parts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/tool_calls.h"
#include "testutil.h"

/* ---- the argument syntax ----------------------------------------------------------------------- */

static char *dump(json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    json_decref(v);
    return s;
}

static void expect_call(const char *body, const char *name, const char *args_json) {
    char *n;
    json_t *args;
    TU_OK(tern_g4_parse_tool_call(body, strlen(body), &n, &args));
    assert_string_equal(n, name);
    char *s = dump(args);
    assert_string_equal(s, args_json);
    free(s);
    free(n);
}

static void test_parse_tool_call(void **state) {
    expect_call("call:get_weather{city:<|\"|>Paris<|\"|>}", "get_weather", "{\"city\":\"Paris\"}");
    expect_call("call:get_weather{}", "get_weather", "{}");
    /* Exactly what the template's format_argument writes for a nested call (keys sorted by dictsort). */
    expect_call("call:book{days:3,opts:{metric:true,unit:<|\"|>C<|\"|>},ratio:0.25,tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>],"
                "x:null}",
                "book", "{\"days\":3,\"opts\":{\"metric\":true,\"unit\":\"C\"},\"ratio\":0.25,\"tags\":[\"a\",\"b\"],"
                        "\"x\":null}");
    /* Quoted keys (escape_keys=True), negative and exponent numbers, False, empty containers. */
    expect_call("call:f{<|\"|>a b<|\"|>:-12,e:1e-05,ok:False,arr:[],obj:{}}", "f",
                "{\"a b\":-12,\"e\":1.0000000000000001e-5,\"ok\":false,\"arr\":[],\"obj\":{}}");
    /* Strings keep every byte verbatim: quotes, braces, commas, newlines, markup-looking text, UTF-8. */
    expect_call("call:say{text:<|\"|>He said \"hi\", {ok}: [1]\n\\n caf\xc3\xa9<|\"|>}", "say",
                "{\"text\":\"He said \\\"hi\\\", {ok}: [1]\\n\\\\n caf\xc3\xa9\"}");
    /* Whitespace between tokens, and unquoted words the model wrote are kept as strings. */
    expect_call("  call: run { cmd : ls -la , n : [ 1 , 2 ] }  ", "run", "{\"cmd\":\"ls -la\",\"n\":[1,2]}");
    /* Integers beyond int64 become reals; "None" is null. */
    expect_call("call:big{n:123456789012345678901234,z:None}", "big", "{\"n\":1.2345678901234569e23,\"z\":null}");
    /* Arrays of objects. */
    expect_call("call:batch{items:[{id:1},{id:2,name:<|\"|>x<|\"|>}]}", "batch",
                "{\"items\":[{\"id\":1},{\"id\":2,\"name\":\"x\"}]}");
}

static void test_parse_tool_call_errors(void **state) {
    char *n;
    json_t *a;
#define FAILS(body, needle) TU_FAILS_WITH(tern_g4_parse_tool_call(body, strlen(body), &n, &a), needle)
    FAILS("get_weather{}", "expected 'call:NAME{...}'");
    FAILS("call:{a:1}", "function name is empty");
    FAILS("call:f", "expected '{'");
    FAILS("call:f{a:<|\"|>open}", "never closed");
    FAILS("call:f{a:1", "needs ',' or '}'");
    FAILS("call:f{a 1}", "expected ':' after the key");
    FAILS("call:f{:1}", "expected a key");
    FAILS("call:f{a:}", "expected a value");
    FAILS("call:f{a:[1,2}", "needs ',' or ']'");
    FAILS("call:f{a:1} trailing", "unexpected text");
    FAILS("call:f\"x{a:1}", "unexpected character in the function name");
    FAILS("call:f{a:<|\"|>\xff<|\"|>}", "invalid UTF-8");
#undef FAILS
    /* Deep nesting is refused, not a stack overflow. */
    char deep[4096] = "call:f{a:";
    size_t L = strlen(deep);
    for (int i = 0; i < 1000; i++)
        deep[L++] = '[';
    deep[L] = 0;
    TU_FAILS_WITH(tern_g4_parse_tool_call(deep, L, &n, &a), "nest deeper");
    /* Truncations of a valid call at every byte never crash and never succeed half-way. */
    const char *ok = "call:book{days:3,opts:{metric:true},tags:[<|\"|>a<|\"|>]}";
    for (size_t k = 0; k < strlen(ok); k++) {
        tern_err *e = tern_g4_parse_tool_call(ok, k, &n, &a);
        assert_non_null(e);
        tern_err_free(e);
    }
}

static void test_parse_value(void **state) {
    json_t *v;
    TU_OK(tern_g4_parse_value("<|\"|>x<|\"|>", 11, &v));
    char *s = dump(v);
    assert_string_equal(s, "\"x\"");
    free(s);
    TU_OK(tern_g4_parse_value(" [true,{k:2.5}] ", 16, &v));
    s = dump(v);
    assert_string_equal(s, "[true,{\"k\":2.5}]");
    free(s);
    TU_FAILS_WITH(tern_g4_parse_value("[1] x", 5, &v), "unexpected text");
    /* A bare phrase is an (unquoted) string, not two values. */
    TU_OK(tern_g4_parse_value("1 2", 3, &v));
    s = dump(v);
    assert_string_equal(s, "\"1 2\"");
    free(s);
}

/* ---- the streaming splitter ---------------------------------------------------------------------- */

typedef struct collected {
    char out[8192];
    size_t len;
    int last_kind; /* kind of the last part, so consecutive text of one kind reads as one part */
} collected;

/* Renders parts as C:text C| / R:text R| / T:name(args) T|, merging consecutive text of the same kind. */
static TERN_MUST_CHECK tern_err *collect(void *user, const tern_reply_part *p) {
    collected *c = user;
    static const char tag[] = "?CRT";
    if (p->kind != TERN_REPLY_TOOL_CALL && (int)p->kind == c->last_kind)
        c->len -= 2; /* reopen the previous text part */
    else
        c->len += (size_t)snprintf(c->out + c->len, sizeof c->out - c->len, "%c:", tag[p->kind]);
    if (p->kind == TERN_REPLY_TOOL_CALL)
        c->len += (size_t)snprintf(c->out + c->len, sizeof c->out - c->len, "%s(%s)", p->name, p->arguments);
    else {
        assert_true(p->len > 0);
        memcpy(c->out + c->len, p->text, p->len);
        c->len += p->len;
    }
    c->len += (size_t)snprintf(c->out + c->len, sizeof c->out - c->len, "%c|", tag[p->kind]);
    c->last_kind = p->kind;
    return NULL;
}

static const tern_reply_dialect *dialect; /* of the expect_reply calls; NULL: Gemma 4's */

/* Splits `text` at cut points a <= b (three pieces) and returns the collected parts. */
static void run_split(const char *text, int tools, size_t a, size_t b, collected *c) {
    tern_reply_parser *p;
    TU_OK(tern_reply_parser_new(dialect, tools, &p));
    memset(c, 0, sizeof *c);
    size_t n = strlen(text);
    TU_OK(tern_reply_parser_push(p, text, a, collect, c));
    TU_OK(tern_reply_parser_push(p, text + a, b - a, collect, c));
    TU_OK(tern_reply_parser_push(p, text + b, n - b, collect, c));
    TU_OK(tern_reply_parser_finish(p, collect, c));
    tern_reply_parser_free(p);
}

/* Every split into three pieces gives `expected`, and so does feeding one byte at a time. */
static void expect_reply(const char *text, int tools, const char *expected) {
    size_t n = strlen(text);
    collected c;
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b += (n > 200 ? 7 : 1)) {
            run_split(text, tools, a, b, &c);
            c.out[c.len] = 0;
            if (strcmp(c.out, expected)) {
                print_error("split at %zu,%zu: got\n%s\nexpected\n%s\n", a, b, c.out, expected);
                fail();
            }
        }
    tern_reply_parser *p;
    TU_OK(tern_reply_parser_new(dialect, tools, &p));
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < n; i++)
        TU_OK(tern_reply_parser_push(p, text + i, 1, collect, &c));
    TU_OK(tern_reply_parser_finish(p, collect, &c));
    c.out[c.len] = 0;
    assert_string_equal(c.out, expected);
    tern_reply_parser_free(p);
}

static void test_stream_content_only(void **state) {
    expect_reply("Hello, world! a < b and <|not a marker>", 1, "C:Hello, world! a < b and <|not a marker>C|");
    expect_reply("", 1, "");
    /* A marker's prefix at the very end is content after all. */
    expect_reply("ends with <|tool_ca", 1, "C:ends with <|tool_caC|");
}

static void test_stream_reasoning(void **state) {
    expect_reply("<|channel>thought\nThe user wants 4.<channel|>2+2 = 4.", 1,
                 "R:The user wants 4.R|C:2+2 = 4.C|");
    /* Reasoning that never closes stays reasoning; an empty channel gives nothing. */
    expect_reply("<|channel>thought\nstill thinking", 0, "R:still thinkingR|");
    expect_reply("<|channel>thought<channel|>Answer", 0, "C:AnswerC|");
    /* A "name" line longer than a channel name can be is reasoning from its first byte, however the reply is cut
     * (fed whole, the line once ended the name wherever its newline came). */
#define LONG_LINE "0123456789012345678901234567890123456789012345678901234567890123456789"
    expect_reply("<|channel>" LONG_LINE "\nwhy<channel|>Answer", 0, "R:" LONG_LINE "\nwhyR|C:AnswerC|");
    expect_reply("<|channel>" LONG_LINE "<channel|>Answer", 0, "R:" LONG_LINE "R|C:AnswerC|");
#undef LONG_LINE
}

static void test_stream_tool_calls(void **state) {
    expect_reply("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>", 1,
                 "T:get_weather({\"city\":\"Paris\",\"days\":3})T|");
    /* Reasoning, text, then two calls in a row. */
    expect_reply("<|channel>thought\nNeed tools.<channel|>Let me check.<|tool_call>call:a{x:1}<tool_call|>"
                 "<|tool_call>call:b{y:[true,false]}<tool_call|>",
                 1, "R:Need tools.R|C:Let me check.C|T:a({\"x\":1})T|T:b({\"y\":[true,false]})T|");
    /* Without tool parsing the markup is plain content. */
    expect_reply("<|tool_call>call:a{x:1}<tool_call|>", 0, "C:<|tool_call>call:a{x:1}<tool_call|>C|");
    /* A call that does not parse comes back verbatim as content, counted; so does one cut off by the end. */
    unsigned long long before = tern_reply_malformed_tool_calls();
    expect_reply("<|tool_call>call:a{x:<tool_call|>ok", 1, "C:<|tool_call>call:a{x:<tool_call|>okC|");
    assert_true(tern_reply_malformed_tool_calls() > before); /* once per way expect_reply splits the text */
    expect_reply("done<|tool_call>call:a{x:1", 1, "C:done<|tool_call>call:a{x:1C|");
}

static void test_stream_counts_calls(void **state) {
    tern_reply_parser *p;
    collected c = {0};
    TU_OK(tern_reply_parser_new(NULL, 1, &p));
    const char *t = "<|tool_call>call:a{}<tool_call|><|tool_call>call:b{}<tool_call|>";
    TU_OK(tern_reply_parser_push(p, t, strlen(t), collect, &c));
    assert_int_equal(tern_reply_parser_tool_calls(p), 2);
    TU_OK(tern_reply_parser_finish(p, collect, &c));
    tern_reply_parser_free(p);
    tern_reply_parser_free(NULL);
}

/* Qwen's markup (Hermes-style): <think> reasoning, <tool_call> blocks holding a JSON call. */
static void test_stream_hermes(void **state) {
    (void)state;
    dialect = &tern_dialect_hermes;
    expect_reply("<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
                 "\"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
                 1, "R:\nThe user wants the weather.\nR|C:\n\nC|T:get_weather({\"city\":\"Paris\",\"days\":3})T|");
    /* Two calls; arguments given as a JSON text (as OpenAI messages carry them) read the same. */
    expect_reply("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", "
                 "\"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>",
                 1, "T:a({})T|T:b({\"x\":1})T|");
    expect_reply("<tool_call>{\"name\": \"a\"}</tool_call>", 0, "C:<tool_call>{\"name\": \"a\"}</tool_call>C|");
    /* Not a call after all: verbatim content. */
    expect_reply("<tool_call>{\"nom\": 1}</tool_call>ok", 1, "C:<tool_call>{\"nom\": 1}</tool_call>okC|");
    /* Arguments but no name (the arguments object, borrowed from the call, was once released on this path), a name
     * holding U+0000 (once cut there), a key holding it (no JSON reader here takes one): not calls. U+0000 in a
     * string value is JSON like any character. */
    expect_reply("<tool_call>{\"arguments\": {\"a\": 1}}</tool_call>", 1,
                 "C:<tool_call>{\"arguments\": {\"a\": 1}}</tool_call>C|");
    expect_reply("<tool_call>{\"name\": \"f\\u0000g\"}</tool_call>", 1, "C:<tool_call>{\"name\": \"f\\u0000g\"}</tool_call>C|");
    expect_reply("<tool_call>{\"name\": \"f\", \"arguments\": {\"k\\u0000\": 1}}</tool_call>", 1,
                 "C:<tool_call>{\"name\": \"f\", \"arguments\": {\"k\\u0000\": 1}}</tool_call>C|");
    expect_reply("<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": \"a\\u0000b\"}}</tool_call>", 1,
                 "T:f({\"k\":\"a\\u0000b\"})T|");
    expect_reply("Plain answer.", 1, "C:Plain answer.C|");
    dialect = NULL;
}

/* Llama 3's JSON calls: the whole reply one JSON object, or one after <|python_tag|>. */
static void test_stream_llama3(void **state) {
    (void)state;
    dialect = &tern_dialect_llama3;
    expect_reply("  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", 1,
                 "T:get_weather({\"city\":\"Paris\"})T|");
    expect_reply("<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", 1, "T:f({})T|");
    /* An answer that merely starts with '{' is content, whole; so is everything without tool parsing. */
    expect_reply("{curly} answer", 1, "C:{curly} answerC|");
    expect_reply("{\"name\": \"f\", \"parameters\": {}}", 0, "C:{\"name\": \"f\", \"parameters\": {}}C|");
    expect_reply("The answer is {x}.", 1, "C:The answer is {x}.C|");
    dialect = NULL;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_tool_call),     cmocka_unit_test(test_parse_tool_call_errors),
        cmocka_unit_test(test_parse_value),         cmocka_unit_test(test_stream_content_only),
        cmocka_unit_test(test_stream_reasoning),    cmocka_unit_test(test_stream_tool_calls),
        cmocka_unit_test(test_stream_counts_calls), cmocka_unit_test(test_stream_hermes),
        cmocka_unit_test(test_stream_llama3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
