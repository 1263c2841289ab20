/* test_jinja.c — the Jinja renderer for chat templates (src/chat/jinja*.c), language by
 * language feature with hand-checked expected outputs: whitespace control as Hugging Face
 * configures it, expressions, undefined values, control flow, set/namespace, macros and
 * call blocks, filters, tests, methods and globals; then errors (line and column), the
 * resource limits, concurrency, and finding a model's template on disk.
 *
 * The expected strings are what @huggingface/jinja renders (checked against it when they
 * were written), except where a comment says tern goes beyond it. test_jinja_oracle.c
 * compares real model templates against that renderer directly. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"
#include "core/fileio.h"
#include "testutil.h"

/* A template, its context (JSON text) and the expected rendering; an expectation starting
 * with '!' is instead a substring of the expected error. */
typedef struct jcase {
    const char *tpl, *ctx, *expect;
} jcase;

#define CTX_EMPTY "{}"
#define CTX_CHAT                                                                                                   \
    "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"},"              \
    "{\"role\":\"assistant\",\"content\":\"Yo\"}],\"n\":5,\"s\":\"Hello World\",\"arr\":[3,1,2],"                  \
    "\"obj\":{\"b\":1,\"a\":2},\"t\":true,\"nul\":null}"

/* 2024-03-09 12:34:56 UTC, what strftime_now() sees in these tests */
#define FIXED_NOW 1709987696

/* Renders `tpl` with JSON text `ctx`; returns the error (NULL on success). */
static TERN_MUST_CHECK tern_err *render(const char *tpl, const char *ctx, const tern_jinja_limits *lim, char **out, size_t *len) {
    tern_jinja *t;
    json_t *c = NULL;
    *out = NULL;
    tern_err *e = tern_jinja_compile(tpl, strlen(tpl), "t", &t);
    if (e)
        return e;
    if (ctx) {
        json_error_t je;
        c = json_loads(ctx, JSON_ALLOW_NUL, &je);
        if (!c)
            fail_msg("bad test context: %s", je.text);
    }
    tern_jinja_limits l = lim ? *lim : (tern_jinja_limits){0};
    if (!l.now)
        l.now = FIXED_NOW;
    e = tern_jinja_render(t, c, &l, out, len);
    json_decref(c);
    tern_jinja_free(t);
    return e;
}

static void run_cases(const jcase *cases, size_t n) {
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        const jcase *k = &cases[i];
        char *out;
        size_t len;
        tern_err *e = render(k->tpl, k->ctx, NULL, &out, &len);
        if (k->expect[0] == '!') {
            if (!e) {
                print_error("case %zu: %s\n  expected an error containing '%s', rendered '%s'\n", i, k->tpl, k->expect + 1, out);
                failures++;
            } else if (!strstr(e->msg, k->expect + 1)) {
                print_error("case %zu: %s\n  expected an error containing '%s', got '%s'\n", i, k->tpl, k->expect + 1, e->msg);
                failures++;
            }
        } else if (e) {
            print_error("case %zu: %s\n  unexpected error: %s\n", i, k->tpl, e->msg);
            failures++;
        } else if (len != strlen(k->expect) || memcmp(out, k->expect, len)) {
            print_error("case %zu: %s\n  expected '%s'\n  rendered '%s'\n", i, k->tpl, k->expect, out);
            failures++;
        }
        tern_err_free(e);
        free(out);
    }
    assert_int_equal(failures, 0);
}

#define RUN(cases) run_cases(cases, sizeof cases / sizeof cases[0])

/* ------------------------------------------------------------------ the language, feature by feature */

static const jcase text_cases[] = {
    {"plain text\n",
     CTX_EMPTY, "plain text"},
    {"a\n{% if true %}\nb\n{% endif %}\nc",
     CTX_EMPTY, "a\nb\nc"},
    {"a\n    {% if true %}\n    b\n    {% endif %}\nc",
     CTX_EMPTY, "a\n    b\nc"},
    {"x  {%- if true -%}  y  {%- endif -%}  z",
     CTX_EMPTY, "xyz"},
    {"x {{- ' y ' -}} z",
     CTX_EMPTY, "x y z"},
    {"x {{ 1 }} {# note #} y",
     CTX_EMPTY, "x 1  y"},
    {"a {#- c -#} b",
     CTX_EMPTY, "ab"},
    {"{{ 1 }}\n{{ 2 }}",
     CTX_EMPTY, "1\n2"},
    {"a\r\n{% if true %}\r\nb{% endif %}",
     CTX_EMPTY, "a\r\n\r\nb"},
    {"{{ n }}{% generation %} mid {% endgeneration %}!",
     CTX_CHAT, "5 mid !"},
    {"a  {%- generation -%}  b  {%- endgeneration -%}  c",
     CTX_EMPTY, "abc"},
};

static const jcase expressions_cases[] = {
    {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 3 ** 2 }}",
     CTX_EMPTY, "7|9|3|-4|1|-1|3.5|64"},
    {"{{ 1.0 }}|{{ 2.5 * 2 }}|{{ 1 + 1.0 }}|{{ 4 / 2 }}|{{ 0.1 + 0.2 }}|{{ -0.0 }}",
     CTX_EMPTY, "1.0|5.0|2.0|2.0|0.30000000000000004|-0.0"},
    {"{{ 'a' + 'b' }}|{{ 'a' ~ 1 ~ 2.0 }}|{{ 'x' + 1 }}|{{ [1, 2] + [3] }}|{{ [1, 2] ~ '' }}",
     CTX_EMPTY, "ab|a12|x1|[1, 2, 3]|1,2"},
    {"{{ 1 == 1.0 }}{{ '1' == 1 }}{{ none == undefined_x }}{{ 1 != 2 }}{{ 2 > 1 }}{{ 2 <= 1 }}",
     CTX_EMPTY, "truetruetruetruetruefalse"},
    {"{{ 'ell' in s }}{{ 'z' not in s }}{{ 2 in arr }}{{ 'a' in obj }}{{ 'q' in obj }}{{ 1 in nothing }}",
     CTX_CHAT, "truetruetruetruefalsefalse"},
    {"{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ '' or [] }}|{{ not n }}|{{ not not n }}",
     CTX_CHAT, "x|b|[]|false|true"},
    {"{{ 'y' if t else 'n' }}|{{ 'y' if not t else 'n' }}|{{ 'only' if false }}|{{ 1 if false else 2 if false else 3 }}",
     CTX_CHAT, "y|n||3"},
    {"{{ s[0] }}{{ s[-1] }}|{{ s[1:4] }}|{{ s[::-1] }}|{{ arr[1:] }}|{{ arr[::2] }}|{{ arr[10] }}|{{ 'héllo'[1] }}",
     CTX_CHAT, "Hd|ell|dlroW olleH|[1, 2]|[3, 2]||é"},
    {"{{ obj.a }}{{ obj['b'] }}{{ obj.zz }}|{{ messages[1].content }}|{{ messages[-1]['role'] }}",
     CTX_CHAT, "21|Hi|assistant"},
    {"{{ [1, 'a', true, none] }}|{{ {'k': [1, {'z': none}]} }}|{{ (1, 2)|length }}",
     CTX_EMPTY, "[1, \"a\", true, null]|{\"k\": [1, {\"z\": null}]}|2"},
    {"{{ 'a\\tb\\n' }}|{{ \"q\\\"\" }}|{{ '\\x41\\u00e9\\uD83D\\uDE00' }}|{{ 'a' 'b' }}",
     CTX_EMPTY, "a\tb\n|q\"|Aé😀|ab"},
    {"{{ -n }}|{{ - -n }}|{{ -n|abs }}|{{ messages|length - 1 }}|{{ n-1 }}",
     CTX_CHAT, "-5|5|5|2|4"},
};

static const jcase undefined_cases[] = {
    {"[{{ missing }}][{{ missing.attr }}][{{ nul }}][{{ missing is defined }}][{{ missing is undefined }}][{{ nul is none }}]",
     CTX_CHAT, "[][][][false][true][true]"},
    {"{{ missing|default('d') }}|{{ nul|default('d') }}|{{ ''|default('d', true) }}|{{ s|default('d') }}",
     CTX_CHAT, "d||d|Hello World"},
    {"{{ missing + 1 }}",
     CTX_EMPTY, "!on undefined values"},
    {"{{ missing() }}",
     CTX_EMPTY, "!cannot call 'missing': not a function (got UndefinedValue)"},
    {"{{ 'a{}'.format(1) }}",
     CTX_EMPTY, "!cannot call 'format': not a function"},
    {"{{ missing|length }}",
     CTX_EMPTY, "!cannot apply the filter 'length'"},
    {"{{ nul + 'x' }}",
     CTX_CHAT, "!on null values"},
};

static const jcase control_cases[] = {
    {"{% if n > 9 %}a{% elif n > 3 %}b{% else %}c{% endif %}",
     CTX_CHAT, "b"},
    {"{% for x in arr %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     CTX_CHAT, "1032truefalse3;2121falsefalse3;3210falsetrue3;"},
    {"{% for x in arr %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]{% endfor %}",
     CTX_CHAT, "[<3>1][3<1>2][1<2>]"},
    {"{% for x in arr if x > 1 %}{{ x }}:{{ loop.index }} {% endfor %}",
     CTX_CHAT, "3:1 2:2 "},
    {"{% for x in [] %}x{% else %}empty{% endfor %}",
     CTX_EMPTY, "empty"},
    {"{% for x in arr %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}|{% for x in arr %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% endfor %}",
     CTX_CHAT, "32|3"}, /* break drops the output of its own iteration, as the reference does */
    {"{% for x in [1] %}a{% continue %}{% else %}E{% endfor %}",
     CTX_EMPTY, "E"},
    {"{% for k, v in obj.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in obj %}{{ k }}{% endfor %}",
     CTX_CHAT, "b=1;a=2;|ba"},
    {"{% for k in {'b': 1, '10': 2, '2': 3} %}{{ k }},{% endfor %}",
     CTX_EMPTY, "b,10,2,"}, /* literal objects keep insertion order (context objects do not: see below) */
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }};{% endfor %}",
     CTX_EMPTY, "3;7;"},
    {"{% for x in arr %}{% for y in [7, 8] %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
     CTX_CHAT, "121|122|123|"},
    /* `loop` taken as a value keeps the state of its own iteration */
    {"{% set ns = namespace() %}{% for x in arr %}{% if loop.first %}{% set ns.first = loop %}{% endif %}{% endfor %}{{ ns.first.index }} {{ ns.first.last }} {{ ns.first|tojson }}",
     CTX_CHAT, "1 false {\"index\": 1, \"index0\": 0, \"revindex\": 3, \"revindex0\": 2, \"first\": true, \"last\": false, \"length\": 3, \"previtem\": null, \"nextitem\": 1}"},
    {"{% macro m() %}{{ loop.index }}{% endmacro %}{% for x in arr %}{{ m() }}{{ loop == loop }}{% endfor %}",
     CTX_CHAT, "1true2true3true"},
    {"{% for x in 5 %}{% endfor %}",
     CTX_EMPTY, "!expected an iterable"},
    {"{% for a, b in [[1, 2, 3]] %}{% endfor %}",
     CTX_EMPTY, "!too many items to unpack"},
    {"{% break %}",
     CTX_EMPTY, "!'break' outside a for loop"},
};

static const jcase set_cases[] = {
    {"{% set x = 1 %}{% set x = x + 1 %}{{ x }}|{% set a, b = [1, 2] %}{{ b }}{{ a }}|{% set y %}n={{ n }}{% endset %}{{ y }}",
     CTX_CHAT, "2|21|n=5"},
    {"{% for i in arr %}{% set inner = i %}{% endfor %}[{{ inner }}]{% if true %}{% set g = 1 %}{% endif %}{{ g }}",
     CTX_CHAT, "[]1"},
    {"{% set ns = namespace(found=false, n=0) %}{% for x in arr %}{% if x > 1 %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }} {{ ns }}",
     CTX_CHAT, "true 2 {\"found\": true, \"n\": 2}"},
    {"{% set obj.x = 1 %}",
     CTX_CHAT, "!only of a namespace"},
};

static const jcase macros_cases[] = {
    {"{% macro m(a, b=2, c='z') %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c='q') }}{{ m(a=5) }}{{ m() }}",
     CTX_EMPTY, "[12z][13z][12q][52z][2z]"},
    {"{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}",
     CTX_EMPTY, "1|[2, 3]|{\"x\": 4}"},
    {"{% macro show() %}{{ v }}{% endmacro %}{% set v = 'outer' %}{{ show() }}{% for v in ['loop'] %}{{ show() }}{% endfor %}",
     CTX_EMPTY, "outerloop"},
    {"{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * (fact(k - 1)|int) }}{% endif %}{% endmacro %}{{ fact(6) }}",
     CTX_EMPTY, "720"},
    {"{% macro wrap(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(v) wrap(21) %}got {{ v }}{% endcall %}",
     CTX_EMPTY, "<got 42>"},
    {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
     CTX_EMPTY, "!takes not more than 1 argument"},
    {"{% macro m(a) %}{% endmacro %}{{ m(b=1) }}",
     CTX_EMPTY, "!takes no keyword argument 'b'"},
    {"{% filter upper %}hi {{ n }}{% endfilter %}",
     CTX_CHAT, "HI 5"},
};

static const jcase filters_cases[] = {
    {"{{ s|upper }}|{{ s|lower }}|{{ s|length }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ '  x \\n'|trim }}",
     CTX_CHAT, "HELLO WORLD|hello world|11|Hello World|HELLO|x"},
    {"{{ 'straße'|upper }}|{{ 'ΟΔΟΣ'|lower }}|{{ 'a😀'|length }}",
     CTX_EMPTY, "STRASSE|οδος|3"},
    {"{{ arr|first }}{{ arr|last }}{{ arr|length }}|{{ arr|reverse }}|{{ arr|sort }}|{{ arr|sort(reverse=true) }}|{{ ['b', 'A', 'c']|sort }}|{{ [1, 1, 2]|unique }}",
     CTX_CHAT, "323|[2, 1, 3]|[1, 2, 3]|[3, 2, 1]|[\"A\", \"b\", \"c\"]|[1, 2]"},
    {"{{ arr|join }}|{{ arr|join(', ') }}|{{ 'abc'|join('-') }}|{{ arr|list }}|{{ arr|string }}",
     CTX_CHAT, "312|3, 1, 2|a-b-c|[3, 1, 2]|[3, 1, 2]"},
    {"{{ obj|dictsort }}|{{ obj|dictsort(by='value', reverse=true) }}|{{ obj|items }}|{{ obj|length }}",
     CTX_CHAT, "[[\"a\", 2], [\"b\", 1]]|[[\"a\", 2], [\"b\", 1]]|[[\"b\", 1], [\"a\", 2]]|2"},
    {"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}|{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|join(',') }}",
     CTX_CHAT, "[\"Hi\"]|system,assistant"},
    {"{{ [{'a': {'b': 1}}, {'c': 2}]|map(attribute='a.b', default=0)|list }}",
     CTX_EMPTY, "[1, 0]"},
    /* beyond the reference (it throws): Python Jinja's map('filter'), select and reject */
    {"{{ ['a', 'b']|map('upper')|list }}|{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('odd')|list }}|{{ [0, 1, '']|select|list }}",
     CTX_EMPTY, "[\"A\", \"B\"]|[1, 3]|[2, 4]|[1]"},
    {"{{ 'a-b-a'|replace('a', 'x') }}|{{ 'a-b-a'|replace('a', 'x', 1) }}|{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}",
     CTX_EMPTY, "x-b-x|x-b-a|a\n    b\n\n    c|  a\n  b"},
    {"{{ '42'|int + 1 }}|{{ '4.5x'|float }}|{{ 'x'|int }}|{{ 4.7|int }}|{{ 3|float }}|{{ -3|abs }}|{{ 3.0|string }}|{{ true|int }}",
     CTX_EMPTY, "43|4.5|0|4|3.0|3|3.0|1"},
    {"{{ s|tojson }}|{{ obj|tojson }}|{{ 'q\"\\\\\\né'|tojson }}|{{ [1, none, true, 2.5]|tojson }}|{{ missing|tojson }}",
     CTX_CHAT, "\"Hello World\"|{\"b\": 1, \"a\": 2}|\"q\\\"\\\\\\né\"|[1, null, true, 2.5]|null"},
    {"{{ obj|tojson(indent=2) }}|{{ [1, [2]]|tojson(indent=1) }}|{{ {}|tojson(indent=2) }}",
     CTX_CHAT, "{\n  \"b\": 1,\n  \"a\": 2\n}|[\n 1,\n [\n  2\n ]\n]|{}"},
    {"{{ {'b': 1, 'a': [1]}|tojson(sort_keys=true, separators=(',', ':')) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}",
     CTX_EMPTY, "{\"a\":[1],\"b\":1}|\"\\u00e9\\ud83d\\ude00\""},
    {"{{ s|foo }}",
     CTX_CHAT, "!unknown filter 'foo'"},
};

static const jcase tests_cases[] = {
    {"{{ n is number }}{{ n is integer }}{{ 1.5 is integer }}{{ s is string }}{{ obj is mapping }}{{ arr is iterable }}{{ s is sequence }}{{ t is boolean }}{{ t is true }}{{ false is false }}",
     CTX_CHAT, "truetruefalsetruetruetruetruetruetruetrue"},
    {"{{ n is odd }}{{ n is even }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ range is callable }}{{ nul is not none }}{{ 1 is equalto }}",
     CTX_CHAT, "!needs a value"},
    {"{{ n is odd }}{{ n is even }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ range is callable }}{{ nul is not none }}",
     CTX_CHAT, "truefalsetruetruetruefalse"},
    {"{{ 10 is divisibleby(2) }}",
     CTX_EMPTY, "!unsupported: a test with arguments ('is divisibleby(...)')"},
    {"{{ n is prime }}",
     CTX_CHAT, "!unknown test 'prime'"},
};

static const jcase methods_cases[] = {
    {"{{ s.upper() }}|{{ s.lower() }}|{{ '  x '.strip() }}|{{ '  x '.lstrip() }}|{{ '  x '.rstrip() }}|{{ s.startswith('He') }}{{ s.endswith(('x', 'ld')) }}",
     CTX_CHAT, "HELLO WORLD|hello world|x|x |  x|truetrue"},
    {"{{ s.split() }}|{{ 'a,b,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ s.replace('l', 'L') }}|{{ s.title() }}",
     CTX_CHAT, "[\"Hello\", \"World\"]|[\"a\", \"b\", \"c\"]|[\"a\", \"b,c\"]|HeLLo WorLd|Hello World"},
    {"{{ obj.get('a') }}{{ obj.get('z', 'd') }}{{ obj.get('z') }}|{{ obj.keys() }}|{{ obj.values() }}|{{ obj.items() }}",
     CTX_CHAT, "2d|[\"b\", \"a\"]|[1, 2]|[[\"b\", 1], [\"a\", 2]]"},
    {"{{ range(3) }}|{{ range(1, 4) }}|{{ range(6, 0, -2) }}|{{ range(0) }}",
     CTX_EMPTY, "[0, 1, 2]|[1, 2, 3]|[6, 4, 2]|[]"},
    {"{{ strftime_now('%Y-%m-%d %H:%M %b %B %%') }}",
     CTX_EMPTY, "2024-03-09 12:34 Mar March %"},
    {"{{ raise_exception('Roles must alternate') }}",
     CTX_EMPTY, "!raise_exception: Roles must alternate"},
};

static void test_text_and_whitespace(void **state) { RUN(text_cases); }
static void test_expressions(void **state) { RUN(expressions_cases); }
static void test_undefined(void **state) { RUN(undefined_cases); }
static void test_control_flow(void **state) { RUN(control_cases); }
static void test_set_and_namespace(void **state) { RUN(set_cases); }
static void test_macros_and_calls(void **state) { RUN(macros_cases); }
static void test_filters(void **state) { RUN(filters_cases); }
static void test_tests(void **state) { RUN(tests_cases); }
static void test_methods_and_globals(void **state) { RUN(methods_cases); }

/* Context objects list integer-like keys first (JavaScript property order); JSON numbers
 * that are integral print without a decimal point, like JSON.parse'd numbers. */
static void test_context_conversion(void **state) {
    char *out;
    size_t len;
    TU_OK(render("{% for k, v in o.items() %}{{ k }}={{ v }} {% endfor %}|{{ o|tojson }}",
                 "{\"o\": {\"b\": 1.0, \"10\": 2.5, \"2\": -0.0, \"a\": 1e2}}", NULL, &out, &len));
    assert_string_equal(out, "2=0 10=2.5 b=1 a=100 |{\"2\": 0, \"10\": 2.5, \"b\": 1, \"a\": 100}");
    free(out);
    /* strings may hold NUL characters; the length says where the output ends */
    TU_OK(render("{{ s }}|{{ s|length }}", "{\"s\": \"a\\u0000b\"}", NULL, &out, &len));
    assert_int_equal(len, 5);
    assert_memory_equal(out, "a\0b|3", 5);
    free(out);
    /* no context at all is fine */
    TU_OK(render("[{{ messages }}]", NULL, NULL, &out, &len));
    assert_string_equal(out, "[]");
    free(out);
    /* a context variable may not replace a built-in */
    TU_FAILS_WITH(render("x", "{\"namespace\": 1}", NULL, &out, &len), "would redefine a built-in");
    /* the context must be an object */
    tern_jinja *t;
    TU_OK(tern_jinja_compile("x", 1, NULL, &t));
    json_t *arr = json_array();
    TU_FAILS_WITH(tern_jinja_render(t, arr, NULL, &out, &len), "must be a JSON object");
    json_decref(arr);
    tern_jinja_free(t);
}

/* Errors name the template, the line and the column of the construct at fault. */
static void test_error_locations(void **state) {
    char *out;
    size_t len;
    /* compile errors */
    TU_FAILS_WITH(render("line one\n    {% include 'x.jinja' %}", CTX_EMPTY, NULL, &out, &len),
                  "t:2:8: unsupported statement '{% include %}'");
    TU_FAILS_WITH(render("a\n{% raw %}{{ x }}{% endraw %}", CTX_EMPTY, NULL, &out, &len), "t:2:4: unsupported statement '{% raw %}'");
    TU_FAILS_WITH(render("{% for x in y %}\n{% if x %}\n{% endfor %}", CTX_EMPTY, NULL, &out, &len), "t:3:4: unexpected '{% endfor %}' inside the '{% if %}' of line 2 (expected '{% endif %}')");
    TU_FAILS_WITH(render("a{% endif %}", CTX_EMPTY, NULL, &out, &len), "t:1:5: unexpected '{% endif %}' outside the block");
    TU_FAILS_WITH(render("\n\n  {% if x %}never closed", CTX_EMPTY, NULL, &out, &len),
                  "t:3:6: unclosed '{% if %}': no '{% endif %}' before the end of the template");
    TU_FAILS_WITH(render("{{ 'abc }}", CTX_EMPTY, NULL, &out, &len), "t:1:4: unterminated string literal");
    TU_FAILS_WITH(render("ok\n{{ x ^ y }}", CTX_EMPTY, NULL, &out, &len), "t:2:6: unexpected character '^'");
    TU_FAILS_WITH(render("{{ x y }}", CTX_EMPTY, NULL, &out, &len), "t:1:6: expected '}}', found name");
    TU_FAILS_WITH(render("{{ 'a\\q' }}", CTX_EMPTY, NULL, &out, &len), "t:1:6: unexpected escaped character 'q'");
    TU_FAILS_WITH(render("{# open comment", CTX_EMPTY, NULL, &out, &len), "t:1:1: unterminated comment");
    TU_FAILS_WITH(render("{% macro m(a, a) %}{% endmacro %}", CTX_EMPTY, NULL, &out, &len), "t:1:15: duplicate parameter name 'a'");
    tern_jinja *t;
    TU_FAILS_WITH(tern_jinja_compile("ab\n\xff", 4, "bad.jinja", &t), "bad.jinja:2:1: invalid UTF-8");
    /* runtime errors: the position of the failing expression */
    TU_FAILS_WITH(render("a\n{% for m in messages %}\n  {{ m.content | nosuch }}\n{% endfor %}", CTX_CHAT, NULL, &out, &len),
                  "t:3:18: unknown filter 'nosuch' for a StringValue");
    TU_FAILS_WITH(render("{% if true %}\n    {{ raise_exception('Conversation roles must alternate!') }}\n{% endif %}",
                         CTX_EMPTY, NULL, &out, &len),
                  "t:2:8: raise_exception: Conversation roles must alternate!");
    TU_FAILS_WITH(render("\n{{ n * s }}", CTX_CHAT, NULL, &out, &len),
                  "t:2:6: unsupported operator '*' between IntegerValue and StringValue");
    /* the error code says what kind of failure it is */
    tern_err *e = render("{% frobnicate %}", CTX_EMPTY, NULL, &out, &len);
    assert_non_null(e);
    assert_int_equal(e->code, TERN_EFORMAT);
    tern_err_free(e);
    e = render("{{ raise_exception('no') }}", CTX_EMPTY, NULL, &out, &len);
    assert_non_null(e);
    assert_int_equal(e->code, TERN_EINVAL);
    tern_err_free(e);
    assert_null(out);
}

/* Hostile templates end in errors, not crashes or hangs. */
static void test_limits(void **state) {
    char *out;
    size_t len;
    /* runaway recursion */
    tern_err *e = render("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", CTX_EMPTY, NULL, &out, &len);
    assert_non_null(e);
    assert_non_null(strstr(e->msg, "levels deep"));
    assert_int_equal(e->code, TERN_EOVERLOAD);
    tern_err_free(e);
    /* too much work */
    tern_jinja_limits lim = {.max_steps = 100000};
    TU_FAILS_WITH(render("{% for i in range(1000) %}{% for j in range(1000) %}{{ j }}{% endfor %}{% endfor %}", CTX_EMPTY,
                         &lim, &out, &len),
                  "more than 100000 evaluation steps");
    /* too much output */
    lim = (tern_jinja_limits){.max_output = 5000};
    TU_FAILS_WITH(render("{% for i in range(1000) %}0123456789{% endfor %}", CTX_EMPTY, &lim, &out, &len),
                  "exceeds 5000 bytes");
    /* too much memory: a string doubling in a loop */
    lim = (tern_jinja_limits){.max_memory = 1 << 20, .max_output = (size_t)1 << 30};
    TU_FAILS_WITH(render("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                         CTX_EMPTY, &lim, &out, &len),
                  "bytes of memory");
    /* a namespace that contains itself */
    TU_FAILS_WITH(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}", CTX_EMPTY, NULL, &out, &len),
                  "nested more than 512 levels");
    /* deeply nested syntax */
    char deep[2000];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 600; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 600; i++)
        deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    TU_FAILS_WITH(render(deep, CTX_EMPTY, NULL, &out, &len), "nested too deeply");
    /* a long but legitimate loop within the defaults is fine */
    TU_OK(render("{% set ns = namespace(n=0) %}{% for i in range(20000) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
                 CTX_EMPTY, NULL, &out, &len));
    assert_string_equal(out, "199990000");
    free(out);
}

/* ------------------------------------------------------------------ real templates */

static char *read_template(const char *name) {
    char rel[256], *src;
    size_t n;
    snprintf(rel, sizeof rel, "templates/%s", name);
    TU_OK(tern_read_file(tu_testdata(rel), 1 << 20, &src, &n));
    return src;
}

static const char qwen_ctx[] =
    "{\"add_generation_prompt\": true, \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nHello\"},"
    " {\"role\": \"user\", \"content\": \"Bye\"}], \"enable_thinking\": false}";
static const char qwen_expect[] = "<|im_start|>system\nBe brief.<|im_end|>\n"
                                  "<|im_start|>user\nHi<|im_end|>\n"
                                  "<|im_start|>assistant\nHello<|im_end|>\n"
                                  "<|im_start|>user\nBye<|im_end|>\n"
                                  "<|im_start|>assistant\n<think>\n\n</think>\n\n";

static void test_qwen_template(void **state) {
    char *src = read_template("Qwen-Qwen3-0.6B.jinja"), *out;
    size_t len;
    TU_OK(render(src, qwen_ctx, NULL, &out, &len));
    assert_string_equal(out, qwen_expect);
    free(out);
    free(src);
}

static void test_llama_template(void **state) {
    char *src = read_template("meta-llama-Llama-3.1-8B-Instruct.jinja"), *out;
    size_t len;
    TU_OK(render(src,
                 "{\"bos_token\": \"<|begin_of_text|>\", \"add_generation_prompt\": true,"
                 " \"messages\": [{\"role\": \"system\", \"content\": \" Sys \"}, {\"role\": \"user\", \"content\": \"Hi\"}]}",
                 NULL, &out, &len));
    assert_string_equal(out, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                             "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nSys<|eot_id|>"
                             "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(out);
    /* the template's own checks surface as errors carrying its message */
    TU_FAILS_WITH(render(src,
                         "{\"bos_token\": \"\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": ["
                         "{\"function\": {\"name\": \"a\", \"arguments\": {}}}, {\"function\": {\"name\": \"b\", \"arguments\": {}}}]}]}",
                         NULL, &out, &len),
                  "raise_exception: This model only supports single tool-calls at once!");
    free(src);
}

/* A long conversation through the template with the quadratic look-back (Gemma 4):
 * well inside the default limits, and every turn rendered. */
static void test_long_conversation(void **state) {
    char *src = read_template("google-gemma-4-31B-it.jinja"), *out;
    size_t len;
    tern_jinja *t;
    TU_OK(tern_jinja_compile(src, strlen(src), "gemma", &t));
    json_t *msgs = json_array();
    for (int i = 0; i < 1500; i++)
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", i % 2 ? "assistant" : "user", "content", "turn"));
    json_t *ctx = json_pack("{s:o, s:b, s:s}", "messages", msgs, "add_generation_prompt", 1, "bos_token", "<bos>");
    TU_OK(tern_jinja_render(t, ctx, NULL, &out, &len));
    size_t turns = 0;
    for (const char *p = out; (p = strstr(p, "<|turn>")); p++)
        turns++;
    assert_int_equal(turns, 1501);
    assert_true(len > 1500 * 20);
    free(out);
    json_decref(ctx);
    tern_jinja_free(t);
    free(src);
}

typedef struct render_job {
    const tern_jinja *tpl;
    json_t *ctx;
    int mismatches;
} render_job;

static void *render_many(void *arg) {
    render_job *j = arg;
    for (int i = 0; i < 50; i++) {
        char *out;
        size_t len;
        tern_err *e = tern_jinja_render(j->tpl, j->ctx, NULL, &out, &len);
        if (e || strcmp(out, qwen_expect))
            j->mismatches++;
        tern_err_free(e);
        free(out);
    }
    return NULL;
}

/* One compiled template serves concurrent renders. */
static void test_concurrent_renders(void **state) {
    char *src = read_template("Qwen-Qwen3-0.6B.jinja");
    tern_jinja *t;
    TU_OK(tern_jinja_compile(src, strlen(src), "qwen", &t));
    json_t *ctx = json_loads(qwen_ctx, 0, NULL);
    assert_non_null(ctx);
    render_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (render_job){t, ctx, 0};
        assert_int_equal(pthread_create(&th[i], NULL, render_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    json_decref(ctx);
    tern_jinja_free(t);
    free(src);
}

/* ------------------------------------------------------------------ finding a model's template */

static void test_template_load(void **state) {
    const char *dir = tu_tmpdir("jinja_load");
    char *src, *origin;
    size_t len;
    /* nothing there */
    tern_err *e = tern_chat_template_load(dir, &src, &len, &origin);
    assert_non_null(e);
    assert_int_equal(e->code, TERN_ENOTFOUND);
    tern_err_free(e);
    /* tokenizer_config.json with a string */
    const char *str = "{\"chat_template\": \"{{ 1 }}\"}";
    tu_write(dir, "tokenizer_config.json", str, strlen(str));
    TU_OK(tern_chat_template_load(dir, &src, &len, &origin));
    assert_string_equal(src, "{{ 1 }}");
    assert_int_equal(len, 7);
    assert_non_null(strstr(origin, "tokenizer_config.json[chat_template]"));
    free(src);
    free(origin);
    /* the list form: the one named "default" */
    const char *list = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", \"template\": \"D\"}]}";
    tu_write(dir, "tokenizer_config.json", list, strlen(list));
    TU_OK(tern_chat_template_load(dir, &src, NULL, NULL));
    assert_string_equal(src, "D");
    free(src);
    const char *nodef = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}]}";
    tu_write(dir, "tokenizer_config.json", nodef, strlen(nodef));
    TU_FAILS_WITH(tern_chat_template_load(dir, &src, NULL, NULL), "no template named 'default' (it has 'tool_use')");
    /* chat_template.jinja wins over the config */
    tu_write(dir, "chat_template.jinja", "J\n", 2);
    TU_OK(tern_chat_template_load(dir, &src, &len, &origin));
    assert_string_equal(src, "J\n");
    assert_non_null(strstr(origin, "chat_template.jinja"));
    free(src);
    free(origin);
}

int main(void) {
    setenv("TZ", "UTC", 1);
    tzset();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_and_whitespace),
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_undefined),
        cmocka_unit_test(test_control_flow),
        cmocka_unit_test(test_set_and_namespace),
        cmocka_unit_test(test_macros_and_calls),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_tests),
        cmocka_unit_test(test_methods_and_globals),
        cmocka_unit_test(test_context_conversion),
        cmocka_unit_test(test_error_locations),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_qwen_template),
        cmocka_unit_test(test_llama_template),
        cmocka_unit_test(test_long_conversation),
        cmocka_unit_test(test_concurrent_renders),
        cmocka_unit_test(test_template_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
