/* test_tokenizer.c — tokenizers from GGUF vocabularies: every test vector in tests/data/vocab
 * (gemma-4, llama-bpe, llama-spm, qwen2; the ids were produced by Hugging Face tokenizers), GEMMA4.md §3's chat
 * check, added/special token rules, special ids, decoding and the streaming decoder on characters split
 * over several tokens, and a hand-made SentencePiece vocabulary whose merges can be worked out by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "formats/gguf.h"
#include "testutil.h"
#include "tokenizer/piece_index.h"
#include "tokenizer/tokenizer.h"

static tern_tokenizer *gemma, *llama_bpe, *llama_spm, *qwen2;

static int load_all(void **state) {
    tern_err *e = tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), &gemma);
    if (!e)
        e = tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"), &llama_bpe);
    if (!e)
        e = tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-llama-spm.gguf"), &llama_spm);
    if (!e)
        e = tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-qwen2.gguf"), &qwen2);
    if (e) {
        print_error("loading the test vocabularies: %s\n", tern_err_msg(e));
        tern_err_free(e);
        return -1;
    }
    return 0;
}

static int free_all(void **state) {
    tern_tokenizer_free(gemma);
    tern_tokenizer_free(llama_bpe);
    tern_tokenizer_free(llama_spm);
    tern_tokenizer_free(qwen2);
    return 0;
}


/* Checks that streaming decode emits only valid UTF-8 pieces that add up to the whole decode. */
static void check_stream(const tern_tokenizer *t, const tern_tokens *ids) {
    char *whole;
    size_t whole_len;
    TU_OK(tern_detokenize(t, ids->ids, ids->n, 1, &whole, &whole_len));
    tern_detok_stream *s;
    TU_OK(tern_detok_stream_new(t, 1, &s));
    char *acc = malloc(whole_len + 16);
    size_t n = 0;
    for (size_t i = 0; i <= ids->n; i++) {
        const char *piece;
        size_t len;
        if (i < ids->n)
            TU_OK(tern_detok_stream_push(s, ids->ids[i], &piece, &len));
        else
            tern_detok_stream_flush(s, &piece, &len);
        /* every chunk on its own is complete UTF-8: no character is cut */
        for (size_t k = 0; k < len;) {
            unsigned char c = (unsigned char)piece[k];
            size_t need = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            assert_true(c < 0x80 || c >= 0xc2);
            assert_true(k + need <= len);
            for (size_t j = 1; j < need; j++)
                assert_true(((unsigned char)piece[k + j] & 0xc0) == 0x80);
            k += need;
        }
        assert_true(n + len <= whole_len);
        memcpy(acc + n, piece, len);
        n += len;
    }
    assert_int_equal(n, whole_len);
    assert_memory_equal(acc, whole, n);
    free(acc);
    free(whole);
    tern_detok_stream_free(s);
}

/* One case of the shared vectors (no BOS/EOS, special text not parsed): exactly its ids, and decoding (whole and
 * streamed) gives its text back. */
static void check_vector(void *ctx, const char *text, size_t len, const int32_t *want, size_t n_want) {
    const tern_tokenizer *t = ctx;
    tu_expect_ids(t, text, len, 0, 0, want, n_want);
    tern_tokens ids = {0};
    TU_OK(tern_tokenize(t, text, len, 0, 0, &ids));
    char *back;
    size_t back_len;
    TU_OK(tern_detokenize(t, ids.ids, ids.n, 0, &back, &back_len));
    if (back_len != len || memcmp(back, text, back_len)) {
        print_error("round trip of [%.*s] gave [%s]\n", (int)len, text, back);
        fail();
    }
    check_stream(t, &ids);
    free(back);
    tern_tokens_free(&ids);
}

static int run_vectors(const tern_tokenizer *t, const char *name) {
    return tu_vocab_vectors(name, check_vector, (void *)t);
}

static void test_vectors_gemma4(void **state) { assert_int_equal(run_vectors(gemma, "gemma-4"), 46); }
static void test_vectors_llama_bpe(void **state) { assert_int_equal(run_vectors(llama_bpe, "llama-bpe"), 46); }
static void test_vectors_llama_spm(void **state) { assert_int_equal(run_vectors(llama_spm, "llama-spm"), 46); }
static void test_vectors_qwen2(void **state) { assert_int_equal(run_vectors(qwen2, "qwen2"), 46); }

static void test_gemma4_chat_check(void **state) {
    /* GEMMA4.md §3: the rendered prompt with special text parsed. */
    static const char prompt[] = "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";
    TU_EXPECT_IDS(gemma, prompt, 0, 1, 2, 105, 2364, 107, 3689, 563, 236743, 236778, 236862, 236778, 236881, 106, 107, 105,
           4368, 107, 100, 45518, 107, 101);
    /* Without parse_special the control tokens are plain text; the first tokens spell "<bos>" out. */
    tern_tokens ids = {0};
    TU_OK(tern_tokenize(gemma, prompt, strlen(prompt), 0, 0, &ids));
    assert_true(ids.n > 20);
    for (size_t i = 0; i < ids.n; i++)
        assert_true(ids.ids[i] != 2 && ids.ids[i] != 105 && ids.ids[i] != 106);
    char *text;
    TU_OK(tern_detokenize(gemma, ids.ids, ids.n, 0, &text, NULL));
    assert_string_equal(text, prompt);
    free(text);
    tern_tokens_free(&ids);
    /* add_special puts <bos> in front (Gemma 4 always does). */
    TU_EXPECT_IDS(gemma, "Hello world", 1, 0, 2, 9259, 1902);
    TU_EXPECT_IDS(gemma, "", 1, 0, 2);
    assert_true(tern_tokenizer_adds_bos(gemma));
    assert_false(tern_tokenizer_adds_eos(gemma));
    /* User-defined (added, not special) tokens are matched even without parse_special. */
    TU_EXPECT_IDS(gemma, "<|tool_call>", 0, 0, 48);
    TU_EXPECT_IDS(gemma, "call:f{a:<|\"|>x<|\"|>}", 0, 0, 6639, 236787, 236760, 236782, 236746, 236787, 52, 236781, 52, 236783);
}

/* The vocabulary by piece: the longest token starting a text, on a SentencePiece and a byte-level vocabulary;
 * control tokens are never proposed (their text is not theirs unless special tokens are parsed). */
static void test_piece_index(void **state) {
    (void)state;
    tern_piece_index *x;
    size_t len = 0;
    TU_OK(tern_piece_index_new(gemma, &x));
    assert_int_equal(tern_piece_index_longest(x, " is it", 6, &len), 563); /* "▁is" */
    assert_int_equal(len, 3);
    assert_int_equal(tern_piece_index_longest(x, "<|turn>", 7, &len), tern_tokenizer_token_id(gemma, "<", 1));
    assert_int_equal(len, 1); /* not the control token <|turn> (105) */
    assert_int_equal(tern_piece_index_longest(x, "\n", 1, &len), tern_tokenizer_token_id(gemma, "\n", 1));
    assert_int_equal(tern_piece_index_longest(x, "", 0, &len), TERN_TOKEN_NONE);
    assert_int_equal(len, 0);
    tern_piece_index_free(x);
    TU_OK(tern_piece_index_new(llama_bpe, &x));
    tern_tokens t = {0};
    TU_OK(tern_tokenize(llama_bpe, " world", 6, 0, 0, &t));
    assert_int_equal(t.n, 1);
    assert_int_equal(tern_piece_index_longest(x, " world!", 7, &len), t.ids[0]);
    assert_int_equal(len, 6);
    tern_tokens_free(&t);
    assert_int_equal(tern_piece_index_longest(x, "\xff", 1, &len), tern_tokenizer_token_id(llama_bpe, "\xc3\xbf", 2));
    tern_piece_index_free(x);
}

static void test_special_ids(void **state) {
    assert_int_equal(tern_tokenizer_vocab_size(gemma), 262144);
    assert_int_equal(tern_tokenizer_bos(gemma), 2);
    assert_int_equal(tern_tokenizer_eos(gemma), 1);
    assert_int_equal(tern_tokenizer_pad(gemma), 0);
    assert_int_equal(tern_tokenizer_unk(gemma), 3);
    assert_true(tern_tokenizer_is_special(gemma, 105));
    assert_false(tern_tokenizer_is_special(gemma, 48)); /* <|tool_call> is user-defined */
    assert_false(tern_tokenizer_is_special(gemma, 9259));
    assert_false(tern_tokenizer_is_special(gemma, -1));
    assert_true(tern_tokenizer_is_eog(gemma, 1));
    assert_true(tern_tokenizer_is_eog(gemma, 106)); /* <turn|> */
    assert_false(tern_tokenizer_is_eog(gemma, 105));
    size_t len;
    const char *s = tern_tokenizer_token_text(gemma, 105, &len);
    assert_int_equal(len, 7);
    assert_memory_equal(s, "<|turn>", 7);
    assert_null(tern_tokenizer_token_text(gemma, 262144, &len));
    assert_int_equal(tern_tokenizer_token_id(gemma, "<|turn>", 7), 105);
    assert_int_equal(tern_tokenizer_token_id(gemma, "no such token here", 18), TERN_TOKEN_NONE);
    char *piece = tern_tokenizer_token_piece(gemma, 563, &len); /* "▁is" */
    assert_int_equal(len, 3);
    assert_memory_equal(piece, " is", 3);
    free(piece);
    piece = tern_tokenizer_token_piece(gemma, tern_tokenizer_token_id(gemma, "<0x0A>", 6), &len);
    assert_int_equal(len, 1);
    assert_int_equal(piece[0], '\n');
    free(piece);

    assert_int_equal(tern_tokenizer_bos(llama_bpe), 128000);
    assert_int_equal(tern_tokenizer_eos(llama_bpe), 128001);
    assert_true(tern_tokenizer_adds_bos(llama_bpe));
    assert_true(tern_tokenizer_is_eog(llama_bpe, 128009)); /* <|eot_id|> */
    TU_EXPECT_IDS(llama_bpe, "Hello world", 1, 0, 128000, 9906, 1917);
    TU_EXPECT_IDS(llama_bpe, "<|begin_of_text|>hi", 0, 1, 128000, 6151);
    assert_int_equal(tern_tokenizer_bos(llama_spm), 1);
    assert_int_equal(tern_tokenizer_eos(llama_spm), 2);
    TU_EXPECT_IDS(llama_spm, "Hello world", 1, 0, 1, 15043, 3186);
    /* SentencePiece: the space prefix is taken off again when decoding. */
    tern_token ids[] = {1, 15043, 3186};
    char *text;
    TU_OK(tern_detokenize(llama_spm, ids, 3, 0, &text, NULL));
    assert_string_equal(text, "Hello world");
    free(text);
    TU_OK(tern_detokenize(llama_spm, ids, 3, 1, &text, NULL));
    assert_string_equal(text, "<s>Hello world");
    free(text);
}

static void test_decode(void **state) {
    tern_token ids[] = {2, 9259, 1902, 106};
    char *text;
    size_t len;
    TU_OK(tern_detokenize(gemma, ids, 4, 1, &text, &len));
    assert_string_equal(text, "<bos>Hello world<turn|>");
    assert_int_equal(len, strlen(text));
    free(text);
    TU_OK(tern_detokenize(gemma, ids, 4, 0, &text, NULL));
    assert_string_equal(text, "Hello world");
    free(text);
    TU_OK(tern_detokenize(gemma, ids, 0, 0, &text, &len));
    assert_string_equal(text, "");
    free(text);
    tern_token bad[] = {9259, 262144};
    TU_FAILS_WITH(tern_detokenize(gemma, bad, 2, 0, &text, NULL), "token id 262144 out of range [0, 262144)");
    tern_token neg[] = {-5};
    TU_FAILS_WITH(tern_detokenize(gemma, neg, 1, 0, &text, NULL), "token id -5 out of range");
    /* Byte-level: "Ġworld" decodes through the byte map. */
    tern_token bl[] = {9906, 1917, 198};
    TU_OK(tern_detokenize(llama_bpe, bl, 3, 0, &text, NULL));
    assert_string_equal(text, "Hello world\n");
    free(text);
}

/* Ids of the <0xXX> tokens of the bytes of s. */
static size_t byte_ids(const tern_tokenizer *t, const char *s, tern_token *out) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned char)s[i]);
        out[i] = tern_tokenizer_token_id(t, name, 6);
        assert_true(out[i] >= 0);
    }
    return n;
}

static void test_stream_multibyte(void **state) {
    /* "a😀é" as single-byte fallback tokens: each character comes out only with its last byte. */
    tern_token ids[16];
    size_t n = byte_ids(gemma, "a\xf0\x9f\x98\x80\xc3\xa9", ids);
    assert_int_equal(n, 7);
    static const char *const expect[] = {"a", "", "", "", "\xf0\x9f\x98\x80", "", "\xc3\xa9"};
    tern_detok_stream *s;
    TU_OK(tern_detok_stream_new(gemma, 0, &s));
    for (size_t i = 0; i < n; i++) {
        const char *text;
        size_t len;
        TU_OK(tern_detok_stream_push(s, ids[i], &text, &len));
        assert_int_equal(len, strlen(expect[i]));
        assert_memory_equal(text, expect[i], len);
    }
    /* An unfinished character at the end becomes U+FFFD on flush; the stream then starts afresh. */
    const char *text;
    size_t len;
    TU_OK(tern_detok_stream_push(s, ids[1], &text, &len)); /* 0xF0: the start of a 4-byte character */
    assert_int_equal(len, 0);
    tern_detok_stream_flush(s, &text, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(text, "\xef\xbf\xbd", 3);
    /* A continuation byte with no lead, and a lead cut short by an ASCII token, are replaced at once. */
    tern_token bad[2];
    byte_ids(gemma, "\x98", bad);
    TU_OK(tern_detok_stream_push(s, bad[0], &text, &len));
    assert_int_equal(len, 3);
    assert_memory_equal(text, "\xef\xbf\xbd", 3);
    TU_OK(tern_detok_stream_push(s, ids[5], &text, &len)); /* 0xC3 */
    assert_int_equal(len, 0);
    TU_OK(tern_detok_stream_push(s, 9259, &text, &len)); /* "Hello" */
    assert_int_equal(len, 8);
    assert_memory_equal(text, "\xef\xbf\xbdHello", 8);
    TU_FAILS_WITH(tern_detok_stream_push(s, 300000, &text, &len), "out of range");
    tern_detok_stream_free(s);

    /* Byte-level BPE splits emoji over several tokens too: streaming never cuts a character. */
    static const char emoji[] = "\xf0\x9f\x9a\x80 (normal) \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f \xe6\x88\x91\xe6\x83\xb3";
    tern_tokens t = {0};
    TU_OK(tern_tokenize(llama_bpe, emoji, strlen(emoji), 0, 0, &t));
    assert_true(t.n > 8);
    check_stream(llama_bpe, &t);
    tern_tokens_free(&t);
    TU_OK(tern_tokenize(gemma, emoji, strlen(emoji), 0, 0, &t));
    check_stream(gemma, &t);
    tern_tokens_free(&t);
}

static void test_invalid_utf8_and_long_input(void **state) {
    /* Bytes that are not UTF-8 go through byte fallback and decode to U+FFFD, never to broken UTF-8. */
    tern_token want[2];
    byte_ids(gemma, "\xff\xfe", want);
    tu_expect_ids(gemma, "\xff\xfe", 2, 0, 0, want, 2);
    char *text;
    TU_OK(tern_detokenize(gemma, want, 2, 0, &text, NULL));
    assert_string_equal(text, "\xef\xbf\xbd\xef\xbf\xbd");
    free(text);
    /* Byte-level: invalid bytes are ordinary bytes. */
    tern_tokens ids = {0};
    TU_OK(tern_tokenize(llama_bpe, "a\xff" "b\x80", 4, 0, 0, &ids));
    TU_OK(tern_detokenize(llama_bpe, ids.ids, ids.n, 0, &text, NULL));
    assert_string_equal(text, "a\xef\xbf\xbd" "b\xef\xbf\xbd");
    free(text);
    tern_tokens_free(&ids);

    /* A long single line (one pre-token for SentencePiece styles) tokenizes and round-trips exactly. */
    size_t n = 200000;
    char *big = malloc(n + 1);
    static const char words[] = "the quick brown fox jumps over the lazy dog >  </ é 😀 ";
    for (size_t i = 0; i < n; i++)
        big[i] = words[i % (sizeof words - 1)];
    n -= n % (sizeof words - 1); /* whole repetitions only: no cut character */
    big[n] = 0;
    const tern_tokenizer *all[] = {gemma, llama_spm, llama_bpe};
    for (int k = 0; k < 3; k++) {
        TU_OK(tern_tokenize(all[k], big, n, 0, 0, &ids));
        assert_true(ids.n > n / 8 && ids.n < n);
        TU_OK(tern_detokenize(all[k], ids.ids, ids.n, 0, &text, NULL));
        assert_string_equal(text, big);
        free(text);
        tern_tokens_free(&ids);
    }
    free(big);
}

/* ---- a SentencePiece vocabulary small enough to reason about ---------------------------------------- */

typedef struct gbuf {
    unsigned char *p;
    size_t n, cap;
} gbuf;

static void put(gbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(gbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(gbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(gbuf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void kv_str(gbuf *b, const char *k, const char *v) {
    put_str(b, k);
    put_u32(b, TERN_GGUF_STRING);
    put_str(b, v);
}

/* tokens <unk> <s> </s> ▁ a b c ▁a ab ▁ab abc bc <0x63>-style bytes for 'c'..., scores make "▁ab" win. bos: NULL,
 * or a tokenizer.ggml.bos_token_id to write: "u32:N" or "str:TEXT". */
static gbuf spm_vocab(const char *model, int with_pre, const char *bos) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab",
                                       "\xe2\x96\x81" "ab", "bc", "<0x63>", "<0x64>", "<0x21>", "<0xE2>", "<0x96>", "<0x81>"};
    static const float scores[] = {0, 0, 0, -1, -2, -2, -3, -1, -0.5f, -4, 0, 0, 0, 0, 0, 0};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6, 6, 6, 6, 6};
    size_t n = sizeof toks / sizeof toks[0];
    gbuf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 4 + (with_pre ? 1 : 0) + (bos ? 1 : 0));
    kv_str(&b, "tokenizer.ggml.model", model);
    if (bos && !strncmp(bos, "str:", 4))
        kv_str(&b, "tokenizer.ggml.bos_token_id", bos + 4);
    else if (bos) {
        put_str(&b, "tokenizer.ggml.bos_token_id");
        put_u32(&b, TERN_GGUF_U32);
        put_u32(&b, (uint32_t)atoi(bos + 4));
    }
    if (with_pre)
        kv_str(&b, "tokenizer.ggml.pre", "nonsense");
    put_str(&b, "tokenizer.ggml.tokens");
    put_u32(&b, TERN_GGUF_ARRAY);
    put_u32(&b, TERN_GGUF_STRING);
    put_u64(&b, n);
    for (size_t i = 0; i < n; i++)
        put_str(&b, toks[i]);
    put_str(&b, "tokenizer.ggml.scores");
    put_u32(&b, TERN_GGUF_ARRAY);
    put_u32(&b, TERN_GGUF_F32);
    put_u64(&b, n);
    put(&b, scores, sizeof scores);
    put_str(&b, "tokenizer.ggml.token_type");
    put_u32(&b, TERN_GGUF_ARRAY);
    put_u32(&b, TERN_GGUF_I32);
    put_u64(&b, n);
    put(&b, types, sizeof types);
    return b;
}

static void test_small_spm(void **state) {
    gbuf b = spm_vocab("llama", 0, NULL);
    tern_gguf *g;
    TU_OK(tern_gguf_parse(b.p, b.n, "small.gguf", &g));
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_from_gguf(g, &t));
    tern_gguf_close(g); /* the tokenizer keeps no pointer into the file */
    /* " ab" -> "▁▁ab" with the space prefix. Candidates: ▁+▁ (no token), ▁+a = ▁a (-3), a+b = ab (-1):
     * ab wins; then ▁+ab = ▁ab (-0.5) -> [▁, ▁ab]. */
    TU_EXPECT_IDS(t, " ab", 0, 0, 3, 8);
    /* "abc": ab (-1) beats nothing else; "c" is not a token -> byte fallback <0x63>; "!" likewise. */
    TU_EXPECT_IDS(t, "abc!", 0, 0, 8, 10, 12);
    /* 'z' has no byte token either: <unk>. Default SPM ids: <s>=1 added by add_special. */
    TU_EXPECT_IDS(t, "z", 1, 0, 1, 3, 0);
    /* Special text is plain unless parsed; parsed it is the control token. */
    TU_EXPECT_IDS(t, "<s>", 0, 1, 1);
    char *text;
    tern_token ids[] = {1, 3, 8, 10, 12};
    TU_OK(tern_detokenize(t, ids, 5, 0, &text, NULL));
    assert_string_equal(text, " abc!"); /* one leading space stripped of "  abc!" */
    free(text);
    tern_tokenizer_free(t);

    /* The same vocabulary declared with models this build does not know, or a bad pre-tokenizer. */
    free(b.p);
    b = spm_vocab("bert", 0, NULL);
    TU_OK(tern_gguf_parse(b.p, b.n, "bert.gguf", &g));
    TU_FAILS_WITH(tern_tokenizer_from_gguf(g, &t), "bert.gguf: vocabulary: tokenizer.ggml.model 'bert' is not supported");
    assert_null(t);
    tern_gguf_close(g);
    free(b.p);
    b = spm_vocab("gpt2", 1, NULL);
    TU_OK(tern_gguf_parse(b.p, b.n, "gpt2.gguf", &g));
    TU_FAILS_WITH(tern_tokenizer_from_gguf(g, &t), "key 'tokenizer.ggml.merges' not found");
    tern_gguf_close(g);
    free(b.p);

    /* Special ids: one of another type is refused by name; one outside the vocabulary is ignored (with a warning),
     * as llama.cpp does; a good one is taken. */
    b = spm_vocab("llama", 0, "str:1");
    TU_OK(tern_gguf_parse(b.p, b.n, "bos-str.gguf", &g));
    TU_FAILS_WITH(tern_tokenizer_from_gguf(g, &t), "tokenizer.ggml.bos_token_id");
    tern_gguf_close(g);
    free(b.p);
    b = spm_vocab("llama", 0, "u32:99999");
    TU_OK(tern_gguf_parse(b.p, b.n, "bos-far.gguf", &g));
    TU_OK(tern_tokenizer_from_gguf(g, &t));
    assert_int_equal(tern_tokenizer_bos(t), 1); /* SentencePiece's default <s> stays */
    tern_tokenizer_free(t);
    tern_gguf_close(g);
    free(b.p);
    b = spm_vocab("llama", 0, "u32:2");
    TU_OK(tern_gguf_parse(b.p, b.n, "bos-2.gguf", &g));
    TU_OK(tern_tokenizer_from_gguf(g, &t));
    assert_int_equal(tern_tokenizer_bos(t), 2);
    tern_tokenizer_free(t);
    tern_gguf_close(g);
    free(b.p);

    TU_FAILS_WITH(tern_tokenizer_load(tu_testdata("vocab/no-such.gguf"), &t), "no-such.gguf: no such file");
    const char *dir = tu_tmpdir("tok-empty");
    TU_FAILS_WITH(tern_tokenizer_load(dir, &t), "no tokenizer.json in this directory");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_gemma4),   cmocka_unit_test(test_vectors_llama_bpe),
        cmocka_unit_test(test_vectors_llama_spm), cmocka_unit_test(test_vectors_qwen2),
        cmocka_unit_test(test_gemma4_chat_check),
        cmocka_unit_test(test_special_ids),      cmocka_unit_test(test_decode),
        cmocka_unit_test(test_stream_multibyte), cmocka_unit_test(test_invalid_utf8_and_long_input),
        cmocka_unit_test(test_small_spm),        cmocka_unit_test(test_piece_index),
    };
    return cmocka_run_group_tests(tests, load_all, free_all);
}
