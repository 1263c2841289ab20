/* test_tokenizer_hf.c — tokenizers from Hugging Face tokenizer.json: the oracle model's tokenizer against ids
 * computed by Hugging Face's own tokenizers.js, the gemma-4 and llama-bpe GGUF vocabularies rewritten as
 * tokenizer.json (Gemma-style and Llama-3-style declarations) against the shared test vectors, every
 * pipeline piece (split behaviors, Metaspace, ByteLevel, Digits, added-token stripping, unknown fusing,
 * templates, tokenizer_config overrides), and declarations that must be refused with a clear message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "formats/gguf.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

#define EXPECT_NONE(t, text, add, parse) tu_expect_ids((t), (text), strlen(text), (add), (parse), NULL, 0)

static void expect_decode(const tern_tokenizer *t, const tern_token *ids, size_t n, int render, const char *want) {
    char *text;
    size_t len;
    TU_OK(tern_detokenize(t, ids, n, render, &text, &len));
    assert_int_equal(len, strlen(want));
    assert_string_equal(text, want);
    free(text);
}

/* ---- the oracle model's tokenizer ------------------------------------------------------------------ */

static void test_oracle_tiny(void **state) {
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load(tu_testdata("oracle/tiny-v4096-f32"), &t));
    assert_int_equal(tern_tokenizer_vocab_size(t), 4096);
    assert_int_equal(tern_tokenizer_bos(t), 2);
    assert_int_equal(tern_tokenizer_eos(t), 106); /* tokenizer_config.json: eos_token "<end_of_turn>" */
    assert_int_equal(tern_tokenizer_pad(t), 0);
    assert_true(tern_tokenizer_adds_bos(t));
    assert_true(tern_tokenizer_is_eog(t, 106));
    assert_true(tern_tokenizer_is_special(t, 105));
    assert_false(tern_tokenizer_is_special(t, 6)); /* <unused0>: added, not special */
    /* Expected ids from @huggingface/tokenizers (tokens.js) 0.2.0 on this tokenizer.json/tokenizer_config.json,
     * encode(text, {add_special_tokens}) — which always parses added tokens, hence parse_special here. The
     * vocabulary is cut to 4096 ids, so most text goes through byte fallback (space = ▁ = E2 96 81). */
    TU_EXPECT_IDS(t, "Hello world", 0, 1, 310, 339, 346, 346, 349, 464, 388, 367, 357, 349, 352, 346, 338);
    TU_EXPECT_IDS(t, "Hello world", 1, 1, 2, 310, 339, 346, 346, 349, 464, 388, 367, 357, 349, 352, 346, 338);
    TU_EXPECT_IDS(t, " leading space", 0, 1, 464, 388, 367, 346, 339, 335, 338, 343, 348, 341, 464, 388, 367, 353, 350, 335,
           337, 339);
    TU_EXPECT_IDS(t, "two  spaces\n\nnewlines\n\n\n", 0, 1, 354, 357, 349, 464, 388, 367, 464, 388, 367, 353, 350, 335, 337,
           339, 353, 108, 348, 339, 357, 346, 343, 348, 339, 353, 109);
    TU_EXPECT_IDS(t, "<start_of_turn>user\nhi<end_of_turn>", 1, 1, 2, 105, 355, 353, 339, 352, 107, 342, 343, 106);
    TU_EXPECT_IDS(t, "<unused0> and <mask>", 0, 1, 6, 464, 388, 367, 335, 348, 338, 464, 388, 367, 4);
    TU_EXPECT_IDS(t, "\xc3\xa9\xf0\x9f\x98\x80 mixed \xc3\xbcn\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9", 0, 1, 433, 407, 478, 397, 390,
           366, 464, 388, 367, 347, 343, 358, 339, 338, 464, 388, 367, 433, 426, 348, 433, 413, 337, 433, 420, 338, 433,
           407);
    TU_EXPECT_IDS(t, "</div></span><b>", 0, 1, 235, 231, 200);
    TU_EXPECT_IDS(t, "\t tab", 0, 1, 247, 464, 388, 367, 354, 335, 336);
    EXPECT_NONE(t, "", 0, 1);
    /* Non-special added tokens match without parse_special; special ones then stay text. */
    TU_EXPECT_IDS(t, "<unused0>", 0, 0, 6);
    tern_tokens ids = {0};
    TU_OK(tern_tokenize(t, "<start_of_turn>", 15, 0, 0, &ids));
    assert_true(ids.n > 1);
    tern_tokens_free(&ids);
    /* Decoding as tokenizers.js does: the decoder's ▁ -> ' ' applies to vocabulary pieces, so ▁ spelled in
     * byte-fallback bytes stays ▁. */
    static const tern_token hello[] = {2, 310, 339, 346, 346, 349, 464, 388, 367, 357, 349, 352, 346, 338};
    expect_decode(t, hello, 14, 0, "Hello\xe2\x96\x81world");
    expect_decode(t, hello, 14, 1, "<bos>Hello\xe2\x96\x81world");
    tern_tokenizer_free(t);
}

/* ---- GGUF vocabularies rewritten as tokenizer.json --------------------------------------------------- */

static void jstr(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Writes dir/tokenizer.json for a GGUF vocabulary, declared the way the published models declare theirs:
 * Gemma (Replace ' ' -> ▁, Split ' ' MergedWithPrevious, byte fallback) or Llama 3 (Split regex + ByteLevel,
 * ignore_merges). Control tokens become special added tokens, user-defined ones non-special. */
static void gguf_to_json(const char *gguf_path, int gemma_style, const char *dir) {
    tern_gguf *g;
    TU_OK(tern_gguf_open(gguf_path, &g));
    tern_gguf_array toks, types, merges;
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.tokens", &toks));
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.token_type", &types));
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.merges", &merges));
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"version\":\"1.0\",\"added_tokens\":[", f);
    int first = 1;
    for (uint64_t i = 0; i < toks.count; i++) {
        int64_t ty;
        tern_gguf_str s;
        TU_OK(tern_gguf_array_i64(&types, i, &ty));
        if (ty != 3 && ty != 4)
            continue;
        TU_OK(tern_gguf_array_str(&toks, i, &s));
        fprintf(f, "%s{\"id\":%llu,\"content\":", first ? "" : ",", (unsigned long long)i);
        jstr(f, s.ptr, s.len);
        fprintf(f, ",\"special\":%s,\"lstrip\":false,\"rstrip\":false,\"normalized\":false}", ty == 3 ? "true" : "false");
        first = 0;
    }
    fputs("],", f);
    if (gemma_style)
        fputs("\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
              "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"MergedWithPrevious\","
              "\"invert\":false},"
              "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\","
              "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<bos>\":{\"id\":"
              "\"<bos>\",\"ids\":[2],\"tokens\":[\"<bos>\"]}}},"
              "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
              "\"\xe2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},"
              "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,"
              "\"ignore_merges\":false,\"vocab\":{",
              f);
    else
        fputs("\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
              "\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}|"
              " ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":"
              "\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
              "\"use_regex\":false}]},"
              "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},{\"type\":"
              "\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|begin_of_text|>\",\"type_id\":0}},"
              "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<|begin_of_text|>\":{\"id\":"
              "\"<|begin_of_text|>\",\"ids\":[128000],\"tokens\":[\"<|begin_of_text|>\"]}}}]},"
              "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
              "\"model\":{\"type\":\"BPE\",\"unk_token\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
              "\"ignore_merges\":true,\"vocab\":{",
              f);
    for (uint64_t i = 0; i < toks.count; i++) {
        tern_gguf_str s;
        TU_OK(tern_gguf_array_str(&toks, i, &s));
        if (i)
            fputc(',', f);
        jstr(f, s.ptr, s.len);
        fprintf(f, ":%llu", (unsigned long long)i);
    }
    fputs("},\"merges\":[", f);
    for (uint64_t i = 0; i < merges.count; i++) {
        tern_gguf_str s;
        TU_OK(tern_gguf_array_str(&merges, i, &s));
        const char *sp = memchr(s.ptr + 1, ' ', s.len - 1);
        assert_non_null(sp);
        fputs(i ? ",[" : "[", f);
        jstr(f, s.ptr, (size_t)(sp - s.ptr));
        fputc(',', f);
        jstr(f, sp + 1, s.len - (size_t)(sp - s.ptr) - 1);
        fputc(']', f);
    }
    fputs("]}}\n", f);
    assert_int_equal(fclose(f), 0);
    tern_gguf_close(g);
}

/* The shared vectors (no BOS, special text not parsed): each case gives exactly its ids. */
static void check_vector(void *ctx, const char *text, size_t len, const int32_t *want, size_t n_want) {
    tern_tokens got = {0};
    TU_OK(tern_tokenize(ctx, text, len, 0, 0, &got));
    if (got.n != n_want || (n_want && memcmp(got.ids, want, n_want * sizeof *want))) {
        print_error("case [%.*s]: want %zu ids, got %zu\n", (int)len, text, n_want, got.n);
        fail();
    }
    tern_tokens_free(&got);
}

static void run_vectors(const tern_tokenizer *t, const char *name) {
    assert_int_equal(tu_vocab_vectors(name, check_vector, (void *)t), 46);
}

static void test_gemma4_as_tokenizer_json(void **state) {
    const char *dir = tu_tmpdir("tok-gemma-json");
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    gguf_to_json(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), 1, d);
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load(d, &t));
    assert_int_equal(tern_tokenizer_vocab_size(t), 262144);
    run_vectors(t, "gemma-4");
    TU_EXPECT_IDS(t, "<bos><|turn>user\nWhat is 2+2?<turn|>\n", 0, 1, 2, 105, 2364, 107, 3689, 563, 236743, 236778, 236862,
           236778, 236881, 106, 107);
    TU_EXPECT_IDS(t, "Hi", 1, 0, 2, 10979);
    tern_tokenizer_free(t);
}

static void test_llama3_as_tokenizer_json(void **state) {
    const char *dir = tu_tmpdir("tok-llama3-json");
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    gguf_to_json(tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"), 0, d);
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", d);
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load(path, &t)); /* a tokenizer.json path works as well as its directory */
    run_vectors(t, "llama-bpe");
    TU_EXPECT_IDS(t, "Hello world", 1, 0, 128000, 9906, 1917);
    static const tern_token ids[] = {128000, 9906, 1917};
    expect_decode(t, ids, 3, 1, "<|begin_of_text|>Hello world");
    tern_tokenizer_free(t);
}

/* ---- tokenizer.json pipelines against Hugging Face's tokenizers.js ------------------------------------- */

/* Writes dst/tokenizer.json: src's with its normalizer and pre-tokenizer replaced by `pipeline` (the JSON text
 * of both members, a comma after). */
static void with_pipeline(const char *src, const char *dst, const char *pipeline) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", src);
    char *json;
    size_t len;
    TU_OK(tern_read_file(path, 1u << 30, &json, &len));
    const char *a = strstr(json, "\"normalizer\":"), *b = strstr(json, "\"post_processor\":");
    assert_true(a && b && a < b);
    snprintf(path, sizeof path, "%s/tokenizer.json", dst);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(json, 1, (size_t)(a - json), f);
    fputs(pipeline, f);
    fwrite(b, 1, len - (size_t)(b - json), f);
    assert_int_equal(fclose(f), 0);
    free(json);
}

/* Normalizers and pre-tokenizers as tokenizer.json describes them (no llama.cpp name): Split with regexes and
 * literals (Isolated, Removed, inverted: the behaviors tokenizers.js implements; the others, and Metaspace's
 * split, which it ignores, are checked in test_split_behaviors and test_metaspace_and_normalizers), ByteLevel, Digits, Metaspace, Punctuation, Whitespace, WhitespaceSplit, Sequence,
 * NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip — on the llama-bpe and gemma-4 vocabularies, the ids of
 * each string against @huggingface/tokenizers (tests/oracles/tokenize_hf.mjs). */
static void test_pipelines_vs_tokenizers_js(void **state) {
    static const char *const BL = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}";
    char v[9][1024];
    snprintf(v[0], sizeof v[0], "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
             "\"use_regex\":true},");
    /* Hugging Face's Whitespace is this Split (its \\w Oniguruma's); tokenizers.js's own Whitespace class uses
     * JavaScript's ASCII \\w, so it is compared on ASCII strings only (v[8]). */
    snprintf(v[1], sizeof v[1], "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":"
             "\"Lowercase\"}]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
             "{\"Regex\":\"\\\\w+|[^\\\\w\\\\s]+\"},\"behavior\":\"Removed\",\"invert\":true},%s]},", BL);
    snprintf(v[8], sizeof v[8], "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
             "{\"type\":\"Whitespace\"},%s]},", BL);
    /* Contiguous: tokenizers.js's Punctuation always groups a run of punctuation (Hugging Face's Rust code makes
     * each character a match, so with Isolated "__" is two pieces there and in tern). */
    snprintf(v[2], sizeof v[2], "\"normalizer\":{\"type\":\"NFD\"},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
             "{\"type\":\"Punctuation\",\"behavior\":\"Contiguous\"},{\"type\":\"Digits\",\"individual_digits\":true},"
             "{\"type\":\"WhitespaceSplit\"},%s]},", BL);
    snprintf(v[3], sizeof v[3], "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Strip\",\"strip_left\":true,"
             "\"strip_right\":true},{\"type\":\"NFKD\"},{\"type\":\"StripAccents\"}]},\"pre_tokenizer\":{\"type\":"
             "\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":"
             "\"Isolated\",\"invert\":false},{\"type\":\"Digits\",\"individual_digits\":false},{\"type\":\"ByteLevel\","
             "\"add_prefix_space\":false,\"use_regex\":true}]},");
    snprintf(v[4], sizeof v[4], "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
             "\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"Split\","
             "\"pattern\":{\"Regex\":\"[\\\\p{L}.]+\"},\"behavior\":\"Removed\",\"invert\":true},{\"type\":\"Split\","
             "\"pattern\":{\"String\":\".\"},\"behavior\":\"Isolated\",\"invert\":false},%s]},", BL);
    snprintf(v[5], sizeof v[5], "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
             "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?=(\\\\d{3})+(?!\\\\d))\"},\"behavior\":\"Isolated\","
             "\"invert\":false},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":"
             "\"Isolated\",\"invert\":false},%s]},", BL);
    snprintf(v[6], sizeof v[6], "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":"
             "\"\xe2\x96\x81\",\"prepend_scheme\":\"always\",\"split\":false},");
    snprintf(v[7], sizeof v[7], "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":"
             "\"\xe2\x96\x81\",\"prepend_scheme\":\"first\",\"split\":false},");
    /* No capital sigma ends a word here: tokenizers.js lowercases with String.toLowerCase (a final one becomes ς),
     * Hugging Face's Rust code character by character (σ), as tern does (test_pretok). */
    static const char *const fixed[] = {
        "hello world", "  hello", "hello   ", "hello\n\n\n", "\n\n  hello", "a\r\nb", "x  \n  y", " \t \n \t ",
        "1 22 333 4444 1234567", "3.14159 and 1,234,567!", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe4\xb8\xad\xe6\x96\x87",
        "emoji \xf0\x9f\x98\x80 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", "Caf\xc3\xa9 na\xc3\xafve \xc3\x85ngstr\xc3\xb6m",
        "e\xcc\x81 \xef\xac\x81 \xe2\x85\xab \xe2\x91\xa0", "don't I'll HE'D", "snake_case __init__ x.y.z",
        "def f(x):\n    return x  \n", "\xce\x86\xce\x9b\xce\xa6\xce\x91 \xce\x92\xce\x89\xce\xa4\xce\x91 \xc4\xb0stanbul",
        "\xe3\x80\x80wide\xe3\x80\x80space ", "\xc2\xa0nbsp\xc2\xa0"};
    json_t *strings = json_array();
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        json_array_append_new(strings, json_string(fixed[i]));
    static const char *const alpha[] = {" ", " ", "\t", "\n", "\r", "a", "B", "\xc3\xa9", "1", "2", ".", ",", "!", "_",
                                        "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "'", "\xcc\x81", "\xe3\x80\x80"};
    uint64_t rng = 99;
    for (int i = 0; i < 60; i++) {
        char s[128] = "";
        for (int k = 0, n = 1 + (int)(tern_splitmix64(&rng) % 14); k < n; k++)
            strcat(s, alpha[tern_splitmix64(&rng) % (sizeof alpha / sizeof alpha[0])]);
        json_array_append_new(strings, json_string(s));
    }
    char base[2][4096], dir[4096], strings_path[4200], cmd[12000];
    snprintf(base[0], sizeof base[0], "%s", tu_tmpdir("tok-js-llama"));
    snprintf(base[1], sizeof base[1], "%s", tu_tmpdir("tok-js-gemma"));
    gguf_to_json(tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"), 0, base[0]);
    gguf_to_json(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), 1, base[1]);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("tok-js"));
    snprintf(strings_path, sizeof strings_path, "%s/strings.json", dir);
    assert_int_equal(json_dump_file(strings, strings_path, 0), 0);
    const char *src = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    for (int k = 0; k < 9; k++) {
        with_pipeline(base[k == 6 || k == 7], dir, v[k]);
        char *out;
        snprintf(cmd, sizeof cmd, "node '%s/tests/oracles/tokenize_hf.mjs' '%s/tokenizer.json' '%s'", src, dir,
                 strings_path);
        assert_int_equal(tu_run(cmd, &out), 0);
        json_t *want = json_loads(out, 0, NULL);
        assert_non_null(want);
        free(out);
        tern_tokenizer *t;
        TU_OK(tern_tokenizer_load(dir, &t));
        size_t i;
        json_t *s;
        json_array_foreach(strings, i, s) {
            int ascii = 1;
            for (const char *c = json_string_value(s); *c; c++)
                ascii &= (unsigned char)*c < 0x80;
            if (k == 8 && !ascii)
                continue;
            tern_tokens got = {0};
            TU_OK(tern_tokenize(t, json_string_value(s), json_string_length(s), 0, 0, &got));
            json_t *w = json_array_get(want, i), *g = json_array();
            for (size_t j = 0; j < got.n; j++)
                json_array_append_new(g, json_integer(got.ids[j]));
            if (!json_equal(g, w)) {
                char *gs = json_dumps(g, 0), *ws = json_dumps(w, 0);
                fail_msg("pipeline %d, string %zu [%s]: tern %s, tokenizers.js %s", k, i, json_string_value(s), gs, ws);
            }
            json_decref(g);
            tern_tokens_free(&got);
        }
        tern_tokenizer_free(t);
        json_decref(want);
    }
    json_decref(strings);
}

/* ---- the vocabulary and merge tables kept between loads ---------------------------------------------- */

static void find_tables(void *ctx, const char *name, const char *path) {
    if (!strncmp(name, "tokenizer-", 10) && strstr(name, ".tables") && !strstr(name, ".tmp"))
        snprintf(ctx, 4200, "%s", path);
}

/* Loads dir's tokenizer, checks where its tables came from and its test vectors; returns the cache file. */
static const char *load_checked(const char *dir, const char *cache, int from_cache, const char *vectors) {
    static char file[4200];
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load(dir, &t));
    if (!!strstr(tern_tokenizer_describe(t), "tables from the cache") != from_cache)
        fail_msg("%s: %s, want the tables %s", dir, tern_tokenizer_describe(t), from_cache ? "from the cache" : "built");
    run_vectors(t, vectors);
    tern_tokenizer_free(t);
    file[0] = 0;
    TU_OK(tern_dir_files(cache, find_tables, file));
    assert_true(file[0] != 0);
    return file;
}

/* A large tokenizer.json's tables are built once and read back after (same ids, the gemma-4 and llama-bpe
 * vectors); a flipped byte, a cut file or another text's file is never used, only rebuilt; two processes
 * loading at once leave a whole file. The same for large GGUF vocabularies. */
static void test_table_cache(void **state) {
    char gemma[4096], llama[4096], cache[4096], cmd[8600];
    snprintf(gemma, sizeof gemma, "%s", tu_tmpdir("tok-cache-gemma"));
    snprintf(llama, sizeof llama, "%s", tu_tmpdir("tok-cache-llama"));
    snprintf(cache, sizeof cache, "%s", tu_tmpdir("tok-cache"));
    gguf_to_json(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), 1, gemma);
    gguf_to_json(tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"), 0, llama);
    const char *saved = getenv("TERN_CACHE_DIR");
    char *old = saved ? strdup(saved) : NULL;
    setenv("TERN_CACHE_DIR", cache, 1);
    char file[4200];
    snprintf(file, sizeof file, "%s", load_checked(gemma, cache, 0, "gemma-4"));
    load_checked(gemma, cache, 1, "gemma-4");
    snprintf(cmd, sizeof cmd, "printf '\\001' | dd of='%s' bs=1 seek=9000000 conv=notrunc status=none", file);
    assert_int_equal(system(cmd), 0);
    load_checked(gemma, cache, 0, "gemma-4");
    load_checked(gemma, cache, 1, "gemma-4");
    assert_int_equal(truncate(file, 5000000), 0);
    load_checked(gemma, cache, 0, "gemma-4");
    load_checked(gemma, cache, 1, "gemma-4");
    /* Another text: its own file (the first stays). */
    assert_int_equal(unlink(file), 0);
    load_checked(llama, cache, 0, "llama-bpe");
    load_checked(llama, cache, 1, "llama-bpe");
    snprintf(cmd, sizeof cmd, "rm -f '%s'/tokenizer-*.tables", cache);
    assert_int_equal(system(cmd), 0);
    pid_t kids[2];
    for (int k = 0; k < 2; k++)
        if ((kids[k] = fork()) == 0) {
            tern_tokenizer *t;
            tern_err *e = tern_tokenizer_load(gemma, &t);
            tern_tokenizer_free(t);
            _exit(e ? 1 : 0);
        }
    for (int k = 0; k < 2; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    load_checked(gemma, cache, 1, "gemma-4");
    /* GGUF vocabularies too (the tables keyed by the stored tokens, types and merges). */
    char gguf[4096];
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "rm -f '%s'/tokenizer-*.tables", cache);
        assert_int_equal(system(cmd), 0);
        snprintf(gguf, sizeof gguf, "%s", tu_testdata(k ? "vocab/ggml-vocab-llama-bpe.gguf" : "vocab/ggml-vocab-gemma-4.gguf"));
        snprintf(file, sizeof file, "%s", load_checked(gguf, cache, 0, k ? "llama-bpe" : "gemma-4"));
        load_checked(gguf, cache, 1, k ? "llama-bpe" : "gemma-4");
        assert_int_equal(truncate(file, 1000), 0);
        load_checked(gguf, cache, 0, k ? "llama-bpe" : "gemma-4");
    }
    /* Small tokenizers build their tables faster than a file is checked: none is written for them. */
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load(tu_testdata("oracle/tiny-v4096-f32"), &t));
    assert_null(strstr(tern_tokenizer_describe(t), "cache"));
    tern_tokenizer_free(t);
    if (old)
        setenv("TERN_CACHE_DIR", old, 1);
    else
        unsetenv("TERN_CACHE_DIR");
    free(old);
}

/* ---- pipeline pieces on a hand-made vocabulary ------------------------------------------------------ */

static const char *VOCAB =
    "{\"a\":0,\"b\":1,\"-\":2,\"ab\":3,\"a-\":4,\"-b\":5,\"a-b\":6,\"--\":7,\"\xe2\x96\x81\":8,\"\xe2\x96\x81" "a\":9,"
    "\"<unk>\":10,\"<s>\":11,\"</s>\":12,\"1\":13,\"12\":14,\"2\":15,\"<0x7A>\":16,\"<tool>\":17,\" \":18}";
static const char *MERGES =
    "[[\"a\",\"-\"],[\"-\",\"b\"],[\"a-\",\"b\"],[\"a\",\"b\"],[\"-\",\"-\"],[\"\xe2\x96\x81\",\"a\"],\"1 2\"]";

/* Builds a tokenizer.json around VOCAB/MERGES with the given declarations (NULL = null) and loads it. */
static TERN_MUST_CHECK tern_err *make(const char *model_extra, const char *added, const char *norm, const char *pre, const char *post,
                      const char *dec, const char *config, tern_tokenizer **out) {
    size_t cap = 8192;
    char *json = malloc(cap);
    int n = snprintf(json, cap,
                     "{\"version\":\"1.0\",\"added_tokens\":%s,\"normalizer\":%s,\"pre_tokenizer\":%s,"
                     "\"post_processor\":%s,\"decoder\":%s,\"model\":{\"type\":\"BPE\",%s\"vocab\":%s,\"merges\":%s}}",
                     added ? added : "[]", norm ? norm : "null", pre ? pre : "null", post ? post : "null",
                     dec ? dec : "null", model_extra ? model_extra : "", VOCAB, MERGES);
    assert_true(n > 0 && (size_t)n < cap);
    tern_err *e = tern_tokenizer_load_hf_buf(json, (size_t)n, config, config ? strlen(config) : 0, "t.json", out);
    free(json);
    return e;
}

static tern_tokenizer *make_ok(const char *model_extra, const char *added, const char *norm, const char *pre,
                               const char *post, const char *dec, const char *config) {
    tern_tokenizer *t = NULL;
    TU_OK(make(model_extra, added, norm, pre, post, dec, config, &t));
    return t;
}

static tern_tokenizer *with_split(const char *behavior, const char *invert) {
    char pre[256];
    snprintf(pre, sizeof pre, "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"%s\",\"invert\":%s}",
             behavior, invert);
    return make_ok(NULL, NULL, NULL, pre, NULL, NULL, NULL);
}

static void test_split_behaviors(void **state) {
    tern_tokenizer *t = make_ok(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    TU_EXPECT_IDS(t, "a-b", 0, 0, 6); /* a- (rank 0), then a-b (rank 2) */
    TU_EXPECT_IDS(t, "ab-", 0, 0, 3, 2); /* a- never forms: ab (rank 3) is the only pair... after "a","b","-": (b,-) none */
    tern_tokenizer_free(t);
    t = with_split("Isolated", "false");
    TU_EXPECT_IDS(t, "a-b", 0, 0, 0, 2, 1);
    TU_EXPECT_IDS(t, "a--b", 0, 0, 0, 2, 2, 1);
    tern_tokenizer_free(t);
    t = with_split("Removed", "false");
    TU_EXPECT_IDS(t, "a-b", 0, 0, 0, 1);
    tern_tokenizer_free(t);
    t = with_split("Removed", "true"); /* inverted: the '-' are kept, the rest dropped */
    TU_EXPECT_IDS(t, "a-b-", 0, 0, 2, 2);
    tern_tokenizer_free(t);
    t = with_split("MergedWithPrevious", "false");
    TU_EXPECT_IDS(t, "a-b", 0, 0, 4, 1);
    TU_EXPECT_IDS(t, "a--b", 0, 0, 4, 2, 1); /* a second delimiter in a row stands alone */
    tern_tokenizer_free(t);
    t = with_split("MergedWithNext", "false");
    TU_EXPECT_IDS(t, "a-b", 0, 0, 0, 5);
    TU_EXPECT_IDS(t, "-b-", 0, 0, 5, 2);
    tern_tokenizer_free(t);
    t = with_split("Contiguous", "false");
    TU_EXPECT_IDS(t, "a--b", 0, 0, 0, 7, 1);
    tern_tokenizer_free(t);
    /* Regex patterns and Digits. */
    t = make_ok(NULL, NULL, NULL, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\d\"},\"behavior\":\"Isolated\"}", NULL,
                NULL, NULL);
    TU_EXPECT_IDS(t, "12", 0, 0, 13, 15);
    tern_tokenizer_free(t);
    t = make_ok(NULL, NULL, NULL, "{\"type\":\"Digits\",\"individual_digits\":false}", NULL, NULL, NULL);
    TU_EXPECT_IDS(t, "12", 0, 0, 14);
    tern_tokenizer_free(t);
    t = make_ok(NULL, NULL, NULL,
                "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"WhitespaceSplit\"},{\"type\":\"Digits\","
                "\"individual_digits\":true}]}",
                NULL, NULL, NULL);
    TU_EXPECT_IDS(t, " 12  ab ", 0, 0, 13, 15, 3);
    tern_tokenizer_free(t);
}

static void test_metaspace_and_normalizers(void **state) {
    /* Metaspace: spaces -> ▁, ▁ prepended, split before each ▁; the decoder takes the prefix off again. */
    tern_tokenizer *t = make_ok(NULL, NULL, NULL,
                                "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"always\","
                                "\"split\":true}",
                                NULL, "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"always\"}",
                                NULL);
    TU_EXPECT_IDS(t, "a a", 0, 0, 9, 9);
    static const tern_token aa[] = {9, 9};
    expect_decode(t, aa, 2, 0, "a a");
    tern_tokenizer_free(t);
    /* Llama-2 style: Prepend ▁ + Replace, decoder Replace/ByteFallback/Fuse/Strip. */
    t = make_ok("\"byte_fallback\":true,\"unk_token\":\"<unk>\",",
                NULL,
                "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
                "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]}",
                NULL, NULL,
                "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},"
                "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \","
                "\"start\":1,\"stop\":0}]}",
                NULL);
    TU_EXPECT_IDS(t, "a z", 0, 0, 9, 8, 16); /* ▁a ▁ <0x7A> */
    static const tern_token ids[] = {9, 8, 16};
    expect_decode(t, ids, 3, 0, "a z");
    TU_EXPECT_IDS(t, "y", 0, 0, 8, 10); /* no byte token for 'y': <unk> */
    tern_tokenizer_free(t);
    /* A regex Replace normalizer and NFC (accepted as a no-op). */
    t = make_ok(NULL, NULL,
                "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Replace\",\"pattern\":{\"Regex\":"
                "\"[0-9]+\"},\"content\":\"-\"}]}",
                NULL, NULL, NULL, NULL);
    TU_EXPECT_IDS(t, "a123b", 0, 0, 6);
    tern_tokenizer_free(t);
}

static void test_bytelevel(void **state) {
    static const char json[] =
        "{\"added_tokens\":[],\"normalizer\":null,"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true},"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"post_processor\":null,"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"\xc4\xa0\":2,\"\xc4\xa0" "a\":3,\"ab\":4,\"\xc4\x8a\":5},"
        "\"merges\":[\"\xc4\xa0 a\",\"a b\"]}}";
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load_hf_buf(json, strlen(json), NULL, 0, "bl.json", &t));
    /* " a ab\n" after the prefix space: " a" | " ab" | "\n" -> Ġa | Ġa b | Ċ */
    TU_EXPECT_IDS(t, "a ab\n", 0, 0, 3, 3, 1, 5);
    static const tern_token ids[] = {3, 3, 1, 5};
    expect_decode(t, ids, 4, 0, " a ab\n");
    tern_tokenizer_free(t);
}

static void test_added_tokens_and_templates(void **state) {
    static const char added[] =
        "[{\"id\":11,\"content\":\"<s>\",\"special\":true},{\"id\":12,\"content\":\"</s>\",\"special\":true},"
        "{\"id\":17,\"content\":\"<tool>\",\"special\":false,\"lstrip\":true,\"rstrip\":true},"
        "{\"id\":10,\"content\":\"<unk>\",\"special\":true}]";
    static const char tmpl[] =
        "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":"
        "{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":"
        "{\"id\":\"<s>\",\"ids\":[11]},\"</s>\":{\"id\":\"</s>\",\"ids\":[12]}}}";
    tern_tokenizer *t = make_ok("\"unk_token\":\"<unk>\",\"fuse_unk\":true,", added, NULL, NULL, tmpl, NULL, NULL);
    TU_EXPECT_IDS(t, "ab", 1, 0, 11, 3, 12);
    TU_EXPECT_IDS(t, "a <tool> b", 0, 0, 0, 17, 1); /* the spaces around <tool> are swallowed */
    TU_EXPECT_IDS(t, "<s>a", 0, 1, 11, 0);
    TU_EXPECT_IDS(t, "xyz", 0, 0, 10); /* three unknown characters fuse into one <unk> */
    assert_int_equal(tern_tokenizer_bos(t), 11);
    assert_int_equal(tern_tokenizer_eos(t), 12);
    assert_true(tern_tokenizer_is_special(t, 10));
    tern_tokenizer_free(t);
    /* tokenizer_config.json overrides the template: no EOS, and names BOS/EOS itself. */
    t = make_ok("\"unk_token\":\"<unk>\",", added, NULL, NULL, tmpl, NULL,
                "{\"add_bos_token\":true,\"add_eos_token\":false,\"bos_token\":{\"content\":\"<s>\"},\"eos_token\":\"</s>\"}");
    TU_EXPECT_IDS(t, "ab", 1, 0, 11, 3);
    TU_EXPECT_IDS(t, "xy", 0, 0, 10, 10); /* without fuse_unk, one <unk> each */
    assert_false(tern_tokenizer_adds_eos(t));
    tern_tokenizer_free(t);
    /* RobertaProcessing: cls/sep around the text. */
    t = make_ok(NULL, added, NULL, NULL, "{\"type\":\"RobertaProcessing\",\"cls\":[\"<s>\",11],\"sep\":[\"</s>\",12]}", NULL,
                NULL);
    TU_EXPECT_IDS(t, "a", 1, 0, 11, 0, 12);
    tern_tokenizer_free(t);
}

/* model.vocab and model.merges are read from the text by the loader itself (not the JSON library): every string
 * form JSON allows, both merge forms, members in any order and spacing; and what JSON does not allow, refused. */
static void test_vocab_and_merges_text(void **state) {
    static const char json[] =
        "{ \"model\" : { \"merges\" : [ [ \"\\u00e9\" , \"\\ud83d\\ude00\" ] ,\n \"a\\/ \\\"q\" ],\n"
        "\"type\":\"BPE\", \"vocab\" :\t{ \"\\u00e9\" : 0 , \"\\ud83d\\ude00\": 1,\"\xc3\xa9\xf0\x9f\x98\x80\":2,"
        "\"a/\":3, \"\\\"q\":4, \"a/\\\"q\":5, \"\\t\\n\\r\\b\\f\\\\\":6 } } }";
    tern_tokenizer *t;
    TU_OK(tern_tokenizer_load_hf_buf(json, strlen(json), NULL, 0, "v.json", &t));
    assert_int_equal(tern_tokenizer_vocab_size(t), 7);
    TU_EXPECT_IDS(t, "\xc3\xa9\xf0\x9f\x98\x80", 0, 0, 2);
    static const char *const texts[] = {"\xc3\xa9", "\xf0\x9f\x98\x80", NULL, "a/", "\"q", "a/\"q", "\t\n\r\b\f\\"};
    for (int id = 0; id < 7; id++) {
        size_t len;
        char *piece = tern_tokenizer_token_piece(t, id, &len);
        if (texts[id] && (len != strlen(texts[id]) || memcmp(piece, texts[id], len)))
            fail_msg("token %d: '%.*s', want '%s'", id, (int)len, piece, texts[id]);
        free(piece);
    }
    tern_tokenizer_free(t);
    static const char *const bad[][2] = {
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,}}}", "model.vocab: a ',' after the last entry"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0.5}}}", "model.vocab['a']: expected a non-negative integer id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":01}}}", "model.vocab['a']: expected a non-negative integer id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\\ud83d\":0}}}", "model.vocab: entry 0 is not \"token\": id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"\tb\":1}}}", "model.vocab: entry 1 is not \"token\": id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\xff\":0}}}", "model.vocab: entry 0 is not \"token\": id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\" 0}}}", "model.vocab: entry 0 is not \"token\": id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0 \"b\":1}}}", "model.vocab: expected ',' or '}' after entry 0"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a a\",]}}", "model.merges: a ',' after the last entry"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\"]]}}", "model.merges[0]: expected \"left right\" or [left, right]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"aa\"]}}", "model.merges[0]: 'aa' is not \"left right\""},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":{}}}", "model.merges: expected an array"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":[]}}", "model.vocab: expected an object of token -> id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"model\":{}}", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t = (tern_tokenizer *)1;
        tern_err *e = tern_tokenizer_load_hf_buf(bad[i][0], strlen(bad[i][0]), NULL, 0, "b.json", &t);
        if (!e || !strstr(tern_err_msg(e), bad[i][1]))
            fail_msg("case %zu (%s): %s, want '%s'", i, bad[i][0], e ? tern_err_msg(e) : "loaded", bad[i][1]);
        assert_null(t);
        tern_err_free(e);
    }
}

static void test_refused_declarations(void **state) {
    tern_tokenizer *t = (tern_tokenizer *)1;
    TU_FAILS_WITH(make(NULL, NULL, "{\"type\":\"Precompiled\"}", NULL, NULL, NULL, NULL, &t),
                  "t.json: normalizer: normalizer type 'Precompiled' is not supported");
    assert_null(t);
    TU_FAILS_WITH(make(NULL, NULL, NULL, "{\"type\":\"BertPreTokenizer\"}", NULL, NULL, NULL, &t),
                  "pre_tokenizer type 'BertPreTokenizer' is not supported");
    TU_FAILS_WITH(make(NULL, NULL, NULL, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a\"},\"behavior\":\"Isolated\"}", NULL,
                       NULL, NULL, &t),
                  "regex /(a/: missing closing parenthesis");
    TU_FAILS_WITH(make(NULL, NULL, NULL, "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Sideways\"}",
                       NULL, NULL, NULL, &t),
                  "unknown behavior 'Sideways'");
    TU_FAILS_WITH(make(NULL, NULL, NULL, NULL, NULL, "{\"type\":\"WordPiece\"}", NULL, &t),
                  "decoder type 'WordPiece' is not supported");
    TU_FAILS_WITH(make(NULL, NULL, NULL, NULL,
                       "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<nope>\"}}]}", NULL, NULL,
                       &t),
                  "special token '<nope>' is not in the vocabulary");
    TU_FAILS_WITH(make(NULL, NULL, NULL, NULL, NULL, NULL, "[1,2]", &t), "tokenizer_config.json: expected a JSON object");
    TU_FAILS_WITH(make(NULL, NULL, NULL, NULL, NULL, NULL, "{bad", &t), "tokenizer_config.json: invalid JSON at line 1");

    static const char unigram[] = "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(unigram, strlen(unigram), NULL, 0, "u.json", &t),
                  "u.json: model type 'Unigram' is not supported (only BPE is)");
    static const char bad_merge[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a q\"]}}";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(bad_merge, strlen(bad_merge), NULL, 0, "m.json", &t),
                  "model.merges[0]: 'a' + 'q' names a token missing from the vocabulary");
    static const char no_result[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"a\",\"b\"]]}}";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(no_result, strlen(no_result), NULL, 0, "m.json", &t),
                  "model.merges[0]: the merged token 'ab' is missing from the vocabulary");
    static const char huge_id[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":2000000000},\"merges\":[]}}";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(huge_id, strlen(huge_id), NULL, 0, "h.json", &t),
                  "largest id 2000000000 for 1 tokens");
    static const char neg_id[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1}}}";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(neg_id, strlen(neg_id), NULL, 0, "n.json", &t),
                  "model.vocab['a']: expected a non-negative integer id");
    static const char not_json[] = "{\"model\": [";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(not_json, strlen(not_json), NULL, 0, "x.json", &t), "x.json: invalid JSON at line 1");
    static const char no_model[] = "{}";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(no_model, 2, NULL, 0, "e.json", &t), "e.json: missing \"model\" object");
    static const char suffix[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"end_of_word_suffix\":\"</w>\"}}";
    TU_FAILS_WITH(tern_tokenizer_load_hf_buf(suffix, strlen(suffix), NULL, 0, "s.json", &t),
                  "continuing_subword_prefix/end_of_word_suffix is not supported");
    assert_null(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_tiny),
        cmocka_unit_test(test_gemma4_as_tokenizer_json),
        cmocka_unit_test(test_vocab_and_merges_text),
        cmocka_unit_test(test_table_cache),
        cmocka_unit_test(test_pipelines_vs_tokenizers_js),
        cmocka_unit_test(test_llama3_as_tokenizer_json),
        cmocka_unit_test(test_split_behaviors),
        cmocka_unit_test(test_metaspace_and_normalizers),
        cmocka_unit_test(test_bytelevel),
        cmocka_unit_test(test_added_tokens_and_templates),
        cmocka_unit_test(test_refused_declarations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
