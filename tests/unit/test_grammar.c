/* test_grammar.c — GBNF compiled to byte rules and matched byte by byte: literals, classes (ASCII, negated, beyond
 * ASCII in every UTF-8 length), groups, every repetition, recursion (nested brackets), the JSON grammar llama.cpp
 * ships, a token ending inside a UTF-8 sequence; errors naming line and column; left recursion refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/token_dfa.h"
#include "tokenizer/tokenizer.h"
#include "core/timeutil.h"
#include "testutil.h"

/* 1 if `text` is a complete sentence of g, 0 if it is a prefix of one only, -1 if it cannot be completed. */
static int match(const tern_grammar *g, const char *text) {
    tern_gstate s, tmp = {0};
    TU_OK(tern_gstate_init(g, &s));
    int ok = tern_gstate_bytes(g, &s, (const uint8_t *)text, strlen(text), &tmp);
    assert_true(ok >= 0);
    int r = ok == 0 ? -1 : tern_gstate_complete(&s) ? 1 : 0;
    tern_gstate_free(&s);
    tern_gstate_free(&tmp);
    return r;
}

static tern_grammar *compile(const char *text) {
    tern_grammar *g = NULL;
    TU_OK(tern_grammar_compile(text, strlen(text), &g));
    return g;
}

typedef struct { const char *text; int want; } probe;

static void expect(const char *grammar, const probe *p, size_t n) {
    tern_grammar *g = compile(grammar);
    for (size_t i = 0; i < n; i++) {
        int got = match(g, p[i].text);
        if (got != p[i].want)
            print_error("grammar %s: '%s' gave %d, expected %d\n", grammar, p[i].text, got, p[i].want);
        assert_int_equal(got, p[i].want);
    }
    tern_grammar_free(g);
}

#define EXPECT(grammar, ...)                                                   \
    do {                                                                       \
        static const probe p_[] = {__VA_ARGS__};                               \
        expect(grammar, p_, sizeof p_ / sizeof p_[0]);                         \
    } while (0)

static void test_basics(void **state) {
    EXPECT("root ::= \"yes\" | \"no\"", {"yes", 1}, {"no", 1}, {"y", 0}, {"", 0}, {"yess", -1}, {"x", -1});
    EXPECT("root ::= [a-c]+ \"!\"", {"a!", 1}, {"abcabc!", 1}, {"!", -1}, {"ab", 0}, {"ad!", -1});
    EXPECT("root ::= [^\"\\\\]*", {"", 1}, {"hello", 1}, {"a\"", -1}, {"é中😀", 1});
    EXPECT("root ::= (\"ab\" | \"c\")? \"d\"", {"d", 1}, {"abd", 1}, {"cd", 1}, {"abcd", -1});
    EXPECT("root ::= [0-9]{2,4}", {"1", 0}, {"12", 1}, {"1234", 1}, {"12345", -1});
    EXPECT("root ::= \"x\"{3}", {"xx", 0}, {"xxx", 1}, {"xxxx", -1});
    EXPECT("root ::= \"a\"{2,} \"b\"", {"ab", -1}, {"aab", 1}, {"aaaaab", 1});
    EXPECT("root ::= . .", {"ab", 1}, {"é😀", 1}, {"a", 0});
    EXPECT("# a comment\nroot ::= item (\",\" item)*   # trailing\nitem ::= [a-z]+\n", {"a,bc,d", 1},
           {"a,", 0}, {"a,,", -1});
    EXPECT("root ::= \"\\x41\\u00e9\\U0001F600\\n\"", {"Aé😀\n", 1}, {"A", 0});
    /* A literal's characters are its bytes in sequence: repeated as one symbol; a surrogate's escape matches nothing. */
    EXPECT("root ::= \"é中\"{2} \"😀\"?", {"é中é中", 1}, {"é中é中😀", 1}, {"é中", 0}, {"é", 0}, {"éé", -1});
    EXPECT("root ::= \"a\" | \"\\uD800\"", {"a", 1}, {"", 0}, {"\xed\xa0\x80", -1});
}

/* Classes beyond ASCII: every UTF-8 length, ranges crossing length boundaries, negation, surrogates excluded. */
static void test_unicode_classes(void **state) {
    EXPECT("root ::= [α-ω]+", {"αβγ", 1}, {"a", -1}, {"Ω", -1});
    EXPECT("root ::= [\\x7e-\\u0800]", {"~", 1}, {"\x7f", 1}, {"é", 1}, {"\xe0\xa0\x80", 1}, {"\xe0\xa0\x81", -1},
           {"}", -1});
    EXPECT("root ::= [^a]", {"b", 1}, {"a", -1}, {"中", 1}, {"😀", 1}, {"\xed\xa0\x80", -1});
    /* A byte-fallback token may end inside a character: the state carries the partial sequence. */
    tern_grammar *g = compile("root ::= \"中\" \"x\"");
    tern_gstate s, t = {0};
    TU_OK(tern_gstate_init(g, &s));
    assert_int_equal(tern_gstate_bytes(g, &s, (const uint8_t *)"\xe4", 1, &t), 1);
    assert_int_equal(tern_gstate_bytes(g, &s, (const uint8_t *)"\xb8\xad", 2, &t), 1);
    assert_false(tern_gstate_complete(&s));
    assert_int_equal(tern_gstate_bytes(g, &s, (const uint8_t *)"x", 1, &t), 1);
    assert_true(tern_gstate_complete(&s));
    assert_true(tern_gstate_final(&s));
    tern_gstate_free(&s);
    tern_gstate_free(&t);
    tern_grammar_free(g);
}

/* llama.cpp's grammars/json.gbnf. */
static const char json_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "\n"
    "# Optional space: by convention, applied in this grammar after literal chars when allowed\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static void test_json(void **state) {
    EXPECT(json_gbnf, {"{}", 1}, {"{\"a\": [1, 2.5, -3e4, true, null, {\"b\": \"x\\u00e9\\n\"}]}", 1},
           {"{\"a\": }", -1}, {"{\"a\": [1,", 0}, {"[1]", -1}, {"{\"k\": \"é中\"}", 1}, {"{\"k\": 01}", -1},
           {"{\"a\":{\"b\":{\"c\":{\"d\":[[[]]]}}}}", 1});
}

static void test_errors(void **state) {
    static const struct { const char *g, *err; } bad[] = {
        {"root ::= foo", "rule 'foo' is used but never defined"},
        {"root ::= \"a", "line 1, column 10: unterminated string literal"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= (\"a\"", "expected ')'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: a rule defined twice"},
        {"root := \"a\"", "expected '::='"},
        {"root ::= *", "a repetition with nothing before it"},
        {"root ::= \"a\"{5,2}", "n < m"},
        {"root ::= \"a\"{1001}", "over 1000"},
        {"root ::= [z-a]", "runs backwards"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"expr ::= \"x\"", "no 'root' rule"},
        {"root ::= root \"a\" | \"b\"", "left-recursive"},
        {"root ::= x root \"a\" | \"b\"\nx ::= \"c\"?", "left-recursive"},
        {"root ::= \"\\xff\\xfe\" [\\xc0]", NULL},
        {"root ::= (\"a\") root_1\nroot_1 ::= \"b\"", NULL}, /* helper rules never take a grammar's names */
        {"root ::= [] \"\"* \"a\"", "left-recursive"}, /* x* of what matches nothing */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tern_grammar *g = NULL;
        tern_err *e = tern_grammar_compile(bad[i].g, strlen(bad[i].g), &g);
        if (bad[i].err) {
            TU_FAILS_WITH(e, bad[i].err);
            assert_null(g);
        } else {
            TU_OK(e);
            tern_grammar_free(g);
        }
    }
}

/* The DFA's masks against the matcher run token by token, on a small vocabulary and on the real Gemma 4 one
 * (262,144 tokens) under llama.cpp's JSON grammar: at the start, inside a string, after a key, inside a number. */
static void check_masks(const tern_grammar *g, const tern_gvocab *v, size_t n, const uint8_t *const *bytes,
                        const uint32_t *lens, const uint8_t *eog, const char *prefix) {
    tern_gdfa *d;
    TU_OK(tern_gdfa_new(g, v, &d));
    int32_t s = tern_gdfa_start(d);
    tern_gstate ref, tmp = {0};
    TU_OK(tern_gstate_init(g, &ref));
    for (const char *c = prefix; *c; c++) { /* walk the prefix one single-byte token at a time */
        int32_t tok = -1;
        for (size_t t = 0; t < n && tok < 0; t++)
            if (lens[t] == 1 && bytes[t][0] == (uint8_t)*c && !eog[t])
                tok = (int32_t)t;
        assert_true(tok >= 0);
        s = tern_gdfa_token(d, s, tok);
        assert_true(s >= 0);
        assert_int_equal(tern_gstate_bytes(g, &ref, (const uint8_t *)c, 1, &tmp), 1);
    }
    uint64_t *m = calloc((n + 63) / 64, sizeof *m);
    double ms[2];
    for (int pass = 0; pass < 2; pass++) { /* built, then from the cache */
        double t0 = tern_now_s();
        TU_OK(tern_gdfa_mask(d, s, m) ? tern_errf(TERN_ENOMEM, "mask") : NULL);
        ms[pass] = (tern_now_s() - t0) * 1e3;
        size_t allowed = 0;
        tern_gstate one = {0};
        for (size_t t = 0; t < n; t++) {
            int want;
            if (eog[t])
                want = tern_gstate_complete(&ref);
            else if (!lens[t])
                want = 0;
            else {
                assert_int_equal(tern_gstate_copy(&one, &ref), 0);
                want = tern_gstate_bytes(g, &one, bytes[t], lens[t], &tmp) == 1;
            }
            int got = (int)(m[t / 64] >> (t % 64) & 1);
            if (got != want)
                print_error("prefix '%s': token %zu '%.*s': mask %d, matcher %d\n", prefix, t, (int)lens[t],
                            (const char *)bytes[t], got, want);
            assert_int_equal(got, want);
            allowed += (size_t)got;
            if (pass == 0 && got && !eog[t]) /* the token's own transition agrees */
                assert_true(tern_gdfa_token(d, s, (int32_t)t) >= 0);
        }
        tern_gstate_free(&one);
        if (pass == 1 && n > 1000)
            printf("  after '%s': %zu of %zu tokens allowed (mask %.2f ms to build, %.3f ms cached)\n", prefix,
                   allowed, n, ms[0], ms[1]);
    }
    free(m);
    tern_gstate_free(&ref);
    tern_gstate_free(&tmp);
    tern_gdfa_free(d);
}

static void test_token_masks(void **state) {
    static const char *toks[] = {"{", "}", "\"", "a", "ab", "\"}", "{\"", ":", "1", "12", " ", "", "\xe4", "\xb8\xad",
                                 "\xe4\xb8\xad", "\": ", ",\"", "<eos>"};
    const size_t n = sizeof toks / sizeof *toks;
    const uint8_t *bytes[32];
    uint32_t lens[32];
    uint8_t eog[32] = {0};
    for (size_t i = 0; i < n; i++)
        bytes[i] = (const uint8_t *)toks[i], lens[i] = (uint32_t)strlen(toks[i]);
    eog[n - 1] = 1, lens[n - 1] = 0;
    tern_gvocab *v;
    TU_OK(tern_gvocab_new(n, bytes, lens, eog, &v));
    tern_grammar *g = compile(json_gbnf);
    static const char *prefixes[] = {"", "{", "{\"", "{\"a", "{\"a\"", "{\"a\":", "{\"a\":1", "{\"a\":1}"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        check_masks(g, v, n, bytes, lens, eog, prefixes[i]);
    tern_grammar_free(g);
    tern_gvocab_free(v);

    /* The real vocabulary: what each token decodes to (byte-fallback tokens one byte; special tokens excluded). */
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load(TERN_ASSETS_DIR "/gemma4/vocab.gguf", &tok));
    size_t V = tern_tokenizer_vocab_size(tok);
    uint8_t **b = calloc(V, sizeof *b), *e = calloc(V, 1);
    uint32_t *l = calloc(V, sizeof *l);
    for (size_t t = 0; t < V; t++) {
        size_t len = 0;
        b[t] = (uint8_t *)tern_tokenizer_token_piece(tok, (tern_token)t, &len);
        e[t] = (uint8_t)tern_tokenizer_is_eog(tok, (tern_token)t);
        l[t] = tern_tokenizer_is_special(tok, (tern_token)t) ? 0 : (uint32_t)len;
    }
    TU_OK(tern_gvocab_new(V, (const uint8_t *const *)b, l, e, &v));
    g = compile(json_gbnf);
    static const char *real[] = {"", "{\"", "{\"name\": \"Ada", "{\"n\": -1", "{\"a\": [1, {\"b\": \"x\"}]}"};
    for (size_t i = 0; i < sizeof real / sizeof *real; i++)
        check_masks(g, v, V, (const uint8_t *const *)b, l, e, real[i]);
    tern_grammar_free(g);
    tern_gvocab_free(v);
    for (size_t t = 0; t < V; t++)
        free(b[t]);
    free(b), free(e), free(l);
    tern_tokenizer_free(tok);
}

/* Past the size limits is text this build cannot hold (TERN_EUNSUPPORTED, a 400 from the server), not a syntax
 * error: the JSON Schema converter's fuzz target tells the two apart. */
static void expect_too_large(const char *text, size_t n) {
    tern_grammar *gr = NULL;
    tern_err *err = tern_grammar_compile(text, n, &gr);
    assert_non_null(err);
    assert_null(gr);
    assert_int_equal(err->code, TERN_EUNSUPPORTED);
    assert_non_null(strstr(tern_err_msg(err), "too large"));
    tern_err_free(err);
}

/* Hostile grammars fail with a message, quickly: empty derivations repeated (exponentially many ways to read the
 * same text), repetitions multiplying a long literal, a long chain of rules. */
static void test_limits(void **state) {
    char g[8192];
    int n = snprintf(g, sizeof g, "root ::= ");
    for (int i = 0; i < 40; i++)
        n += snprintf(g + n, sizeof g - (size_t)n, "a ");
    snprintf(g + n, sizeof g - (size_t)n, "\"x\"\na ::= \"\" | \"\"\n");
    tern_grammar *gr = NULL;
    tern_gstate s, t = {0};
    TU_OK(tern_grammar_compile(g, strlen(g), &gr));
    TU_FAILS_WITH(tern_gstate_init(gr, &s), "too ambiguous");
    tern_grammar_free(gr);
    /* The same after the first byte: matching fails (-1), it does not hang. */
    n = snprintf(g, sizeof g, "root ::= \"x\" ");
    for (int i = 0; i < 40; i++)
        n += snprintf(g + n, sizeof g - (size_t)n, "a ");
    snprintf(g + n, sizeof g - (size_t)n, "\"y\"\na ::= \"\" | \"\"\n");
    TU_OK(tern_grammar_compile(g, strlen(g), &gr));
    TU_OK(tern_gstate_init(gr, &s));
    assert_int_equal(tern_gstate_bytes(gr, &s, (const uint8_t *)"x", 1, &t), -1);
    tern_gstate_free(&s);
    tern_gstate_free(&t);
    tern_grammar_free(gr);
    /* Five rules of a 1,000-character literal repeated 1,000 times: 5 KiB of text, 5 million elements. */
    char *big = malloc(8 * 1024 + 1);
    n = snprintf(big, 64, "root ::= r0 r1 r2 r3 r4\n");
    for (int r = 0; r < 5; r++) {
        n += snprintf(big + n, 16, "r%d ::= \"", r);
        memset(big + n, 'a', 1000);
        n += 1000;
        n += snprintf(big + n, 16, "\"{1000}\n");
    }
    expect_too_large(big, (size_t)n);
    free(big);
    /* 400 rules of a 13-range class repeated 1,000 times: 400,000 elements parsed, 5.2 million once lowered. */
    big = malloc(400 * 48 + 4096);
    n = snprintf(big, 16, "root ::=");
    for (int r = 0; r < 400; r++)
        n += snprintf(big + n, 16, " r%d", r);
    for (int r = 0; r < 400; r++)
        n += snprintf(big + n, 48, "\nr%d ::= [acegikmoqsuwy]{1000}", r);
    expect_too_large(big, (size_t)n);
    free(big);
    /* rN ::= rN+1 for 12,000 rules: past the rule limit */
    size_t cap = 20000 * 32, k = 0;
    char *chain = malloc(cap);
    k += (size_t)snprintf(chain + k, cap - k, "root ::= r1\n");
    for (int i = 1; i < 12000; i++)
        k += (size_t)snprintf(chain + k, cap - k, "r%d ::= r%d\n", i, i + 1);
    k += (size_t)snprintf(chain + k, cap - k, "r12000 ::= \"z\"\n");
    expect_too_large(chain, k);
    free(chain);
}

/* The same stack reached by several derivations is kept once, whether the state holds a few stacks (a scan finds
 * the duplicate) or many (an index does); and a grammar of thousands of named rules resolves every name. */
static void test_duplicate_stacks(void **state) {
    (void)state;
    char g[4096];
    for (int alts = 4; alts <= 32; alts += 28) { /* 4 and 32 distinct stacks, each reached 3 times */
        int n = snprintf(g, sizeof g, "root ::= x | x | x\nx ::= ");
        for (int i = 0; i < alts; i++)
            n += snprintf(g + n, sizeof g - (size_t)n, "%s\"a\" [%c]", i ? " | " : "",
                          "BCDEFGHIJKLMNOPQRSTUVWXYZbcdefghijklmnopqrstuvwxyz"[i]);
        snprintf(g + n, sizeof g - (size_t)n, "\n");
        tern_grammar *gr = compile(g);
        tern_gstate s, t = {0};
        TU_OK(tern_gstate_init(gr, &s));
        assert_int_equal(s.n, alts);
        assert_int_equal(tern_gstate_bytes(gr, &s, (const uint8_t *)"a", 1, &t), 1);
        assert_int_equal(s.n, alts);
        assert_int_equal(tern_gstate_bytes(gr, &s, (const uint8_t *)"D", 1, &t), 1);
        assert_int_equal(s.n, 1);
        assert_true(tern_gstate_complete(&s));
        tern_gstate_free(&s);
        tern_gstate_free(&t);
        tern_grammar_free(gr);
    }
    /* root ::= r0 | r1 | ... ; ri ::= "<i>" qi ; qi ::= "!": every rule defined after its use. */
    size_t cap = 3000 * 40, k = 0;
    char *many = malloc(cap);
    k += (size_t)snprintf(many + k, cap - k, "root ::= r0");
    for (int i = 1; i < 1000; i++)
        k += (size_t)snprintf(many + k, cap - k, " | r%d", i);
    for (int i = 0; i < 1000; i++)
        k += (size_t)snprintf(many + k, cap - k, "\nr%d ::= \"<%d>\" q%d\nq%d ::= \"!\"", i, i, i, i);
    tern_grammar *gr = NULL;
    TU_OK(tern_grammar_compile(many, k, &gr));
    free(many);
    assert_int_equal(match(gr, "<999>!"), 1);
    assert_int_equal(match(gr, "<1000>"), -1);
    tern_grammar_free(gr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basics),
        cmocka_unit_test(test_unicode_classes),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_token_masks),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_duplicate_stacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
