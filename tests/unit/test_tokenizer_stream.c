/* test_tokenizer_stream.c — streaming detokenization over every token of the Gemma 4 vocabulary and over
 * random byte strings: each chunk the stream releases is complete, valid UTF-8, and the chunks add up to
 * exactly what whole-sequence decoding gives (and, for valid UTF-8 input, to the input itself). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n)
            return 0;
        unsigned cp = len == 1 ? c : c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void append(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* Streams ids through a decoder, checking every chunk; returns the concatenation. */
static buf stream_all(const tern_tokenizer *t, const tern_token *ids, size_t n, int render_special) {
    tern_detok_stream *s;
    TU_OK(tern_detok_stream_new(t, render_special, &s));
    buf out = {0};
    for (size_t i = 0; i < n; i++) {
        const char *text;
        size_t len;
        TU_OK(tern_detok_stream_push(s, ids[i], &text, &len));
        if (!valid_utf8((const unsigned char *)text, len))
            fail_msg("stream chunk after id %d (index %zu) is not valid UTF-8", ids[i], i);
        append(&out, text, len);
    }
    const char *text;
    size_t len;
    tern_detok_stream_flush(s, &text, &len);
    assert_true(valid_utf8((const unsigned char *)text, len));
    append(&out, text, len);
    tern_detok_stream_free(s);
    return out;
}

static void expect_same_as_whole(const tern_tokenizer *t, const tern_token *ids, size_t n, int render_special,
                                 const char *what) {
    buf got = stream_all(t, ids, n, render_special);
    char *want;
    size_t wlen;
    TU_OK(tern_detokenize(t, ids, n, render_special, &want, &wlen));
    if (got.n != wlen || memcmp(got.p, want, wlen))
        fail_msg("%s: streamed text (%zu bytes) differs from whole-sequence decoding (%zu bytes)", what, got.n, wlen);
    free(want);
    free(got.p);
}

static tern_tokenizer *gemma;

static int setup(void **state) {
    tern_err *e = tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), &gemma);
    if (e) {
        tern_err_free(e);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    tern_tokenizer_free(gemma);
    return 0;
}

static void test_every_token(void **state) {
    const size_t V = tern_tokenizer_vocab_size(gemma);
    assert_int_equal(V, 262144);
    tern_token *ids = malloc(V * sizeof *ids);
    for (size_t i = 0; i < V; i++)
        ids[i] = (tern_token)i;
    /* All ids in order, then all in a shuffled order (byte tokens meet other neighbours). */
    expect_same_as_whole(gemma, ids, V, 1, "all ids in order, specials rendered");
    expect_same_as_whole(gemma, ids, V, 0, "all ids in order, specials dropped");
    uint64_t r = 12345;
    for (size_t i = V - 1; i > 0; i--) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)(r >> 33) % (i + 1);
        tern_token tmp = ids[i];
        ids[i] = ids[j];
        ids[j] = tmp;
    }
    expect_same_as_whole(gemma, ids, V, 1, "all ids shuffled");
    /* Every token on its own. */
    for (size_t i = 0; i < V; i++) {
        tern_token id = (tern_token)i;
        buf got = stream_all(gemma, &id, 1, 1);
        char *want;
        size_t wlen;
        TU_OK(tern_detokenize(gemma, &id, 1, 1, &want, &wlen));
        if (got.n != wlen || memcmp(got.p, want, wlen))
            fail_msg("token %zu alone: streamed and whole decoding differ", i);
        free(want);
        free(got.p);
    }
    free(ids);
}

static void test_random_bytes(void **state) {
    uint64_t r = 987654321;
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + (size_t)(round * 7 % 200);
        unsigned char text[256];
        int valid_only = round % 3 == 0; /* a third: random valid UTF-8 (multi-byte characters of every length) */
        size_t k = 0;
        while (k < n) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            unsigned v = (unsigned)(r >> 40);
            if (!valid_only) {
                text[k++] = (unsigned char)v;
                continue;
            }
            /* (not U+2581: the Gemma decoder turns the space marker back into a space by design) */
            static const unsigned samples[] = {'a', ' ', '\n', 0xe9, 0x4e2d, 0x1f600, 0x20ac, 0x10348, '<', 0x3b1};
            unsigned cp = samples[v % 10];
            if (cp < 0x80 && k < n)
                text[k++] = (unsigned char)cp;
            else if (cp < 0x800 && k + 2 <= n) {
                text[k++] = (unsigned char)(0xc0 | (cp >> 6));
                text[k++] = (unsigned char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000 && k + 3 <= n) {
                text[k++] = (unsigned char)(0xe0 | (cp >> 12));
                text[k++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                text[k++] = (unsigned char)(0x80 | (cp & 0x3f));
            } else if (k + 4 <= n) {
                text[k++] = (unsigned char)(0xf0 | (cp >> 18));
                text[k++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
                text[k++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                text[k++] = (unsigned char)(0x80 | (cp & 0x3f));
            } else {
                text[k++] = 'z';
            }
        }
        tern_tokens ids = {0};
        TU_OK(tern_tokenize(gemma, (const char *)text, n, 0, 0, &ids));
        expect_same_as_whole(gemma, ids.ids, ids.n, 0, "random bytes");
        if (valid_only) { /* byte fallback round-trips valid text exactly */
            buf got = stream_all(gemma, ids.ids, ids.n, 0);
            if (got.n != n || memcmp(got.p, text, n))
                fail_msg("round %d: valid UTF-8 input did not round-trip through tokenize + stream decode", round);
            free(got.p);
        }
        tern_tokens_free(&ids);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_token),
        cmocka_unit_test(test_random_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
