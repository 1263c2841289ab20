/* test_pretok.c — every pre-tokenizer llama.cpp knows by tokenizer.ggml.pre name, and the Unicode normalizers,
 * against pieces and texts computed by independent implementations (tests/data/pretok/vectors.json, written by
 * scripts/pretok/vectors.py with Python's `regex` module and `unicodedata`): whitespace runs, CRLF, newline runs
 * before text, trailing whitespace, digits, CJK, emoji, accents, and random mixes of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"
#include "testutil.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static json_t *vectors(void) {
    json_t *v;
    TU_OK(tern_json_load_file(tu_testdata("pretok/vectors.json"), 16u << 20, &v));
    return v;
}

typedef struct got_pieces {
    json_t *list;
} got_pieces;

static void collect(void *ctx, const char *s, size_t n) {
    json_array_append_new(((got_pieces *)ctx)->list, json_stringn_nocheck(s, n)); /* bytes as they are */
}

static json_t *pieces_of(const tern_tokenizer *t, const char *text) {
    got_pieces g = {json_array()};
    TU_OK(tern_pretokenize(t, text, strlen(text), collect, &g));
    return g.list;
}

static void expect_pieces(const tern_tokenizer *t, const char *what, const json_t *cases) {
    size_t i;
    const json_t *c;
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(json_array_get(c, 0));
        json_t *got = pieces_of(t, text);
        if (!json_equal(got, json_array_get(c, 1))) {
            char *g = json_dumps(got, JSON_ENSURE_ASCII), *w = json_dumps(json_array_get(c, 1), JSON_ENSURE_ASCII);
            fail_msg("%s: case %zu: got %s, want %s", what, i, g, w);
        }
        json_decref(got);
    }
}

/* Each list of regexes on the llama-bpe vocabulary under its first name; every other name must map to the same
 * list; and every name tern knows is in the vectors. */
static void test_named_pretokenizers(void **state) {
    json_t *v = vectors(), *pre = json_object_get(v, "pre");
    const char *type;
    json_t *entry;
    size_t names = 0;
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s", tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"));
    json_object_foreach(pre, type, entry) {
        const json_t *list = json_object_get(entry, "names"), *regexes = json_object_get(entry, "regexes");
        size_t i;
        const json_t *n;
        json_array_foreach(list, i, n) {
            const tok_pre_name *d = tok_pre_by_name(json_string_value(n));
            if (!d)
                fail_msg("%s: tern does not know the name", json_string_value(n));
            size_t k = 0;
            for (; d->regexes[k]; k++)
                assert_true(k < json_array_size(regexes) &&
                            !strcmp(d->regexes[k], json_string_value(json_array_get(regexes, k))));
            assert_int_equal(k, json_array_size(regexes));
            names++;
        }
        tern_tokenizer *t;
        TU_OK(tern_tokenizer_load_gguf_pre(vocab, json_string_value(json_array_get(list, 0)), &t));
        expect_pieces(t, type, json_object_get(entry, "cases"));
        tern_tokenizer_free(t);
    }
    print_message("%zu names, %zu lists of regexes\n", names, json_object_size(pre));
    assert_true(names >= 90);
    tern_tokenizer *t = (tern_tokenizer *)1;
    TU_FAILS_WITH(tern_tokenizer_load_gguf_pre(vocab, "no-such-pre", &t),
                  "tokenizer.ggml.pre 'no-such-pre' is not a pre-tokenizer llama.cpp knows");
    json_decref(v);
}

/* Each normalizer alone in a tokenizer.json (no pre-tokenizer: the normalized text is one piece). */
static void test_normalizers(void **state) {
    json_t *v = vectors(), *norms = json_object_get(v, "normalizers");
    const char *type;
    json_t *cases;
    json_object_foreach(norms, type, cases) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"normalizer\":{\"type\":\"%s\",\"strip_left\":true,\"strip_right\":true},"
                 "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
                 type);
        tern_tokenizer *t;
        TU_OK(tern_tokenizer_load_hf_buf(json, strlen(json), NULL, 0, type, &t));
        size_t i;
        const json_t *c;
        json_array_foreach(cases, i, c) {
            const char *want = json_string_value(json_array_get(c, 1));
            json_t *got = pieces_of(t, json_string_value(json_array_get(c, 0)));
            const char *g = json_array_size(got) ? json_string_value(json_array_get(got, 0)) : "";
            if (json_array_size(got) > 1 || strcmp(g, want))
                fail_msg("%s: case %zu: got '%s', want '%s'", type, i, g, want);
            json_decref(got);
        }
        tern_tokenizer_free(t);
    }
    json_decref(v);
}

/* Normalizers keep bytes that are not UTF-8 as they are and transform the valid text around them; a Sequence
 * applies its steps in order. */
static void test_normalizer_edges(void **state) {
    static const char json[] =
        "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"StripAccents\"},"
        "{\"type\":\"Lowercase\"},{\"type\":\"Strip\",\"strip_left\":false,\"strip_right\":true}]},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load_hf_buf(json, strlen(json), NULL, 0, "seq", &t));
    json_t *got = pieces_of(t, " \xc3\x89t\xc3\xa9\xff\xfeZ\xc3\x85\x80  ");
    assert_int_equal(json_array_size(got), 1);
    const char *want = " ete\xff\xfeza\x80";
    assert_memory_equal(json_string_value(json_array_get(got, 0)), want, strlen(want) + 1);
    json_decref(got);
    tern_tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_pretokenizers),
        cmocka_unit_test(test_normalizers),
        cmocka_unit_test(test_normalizer_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
