/* fuzz_tokenizer.c — fuzz target for encoding and decoding. Two small tokenizers are built in memory (a
 * Gemma-style one: ▁ for spaces, merges, <0xXX> byte fallback, added tokens; and a byte-level one with the
 * GPT-2 regex). The first input byte picks the tokenizer and the flags, the rest is the text. Checked
 * properties, beyond "no crash, no out-of-bounds": every id is in range; decoding never yields invalid
 * UTF-8; the streaming decoder's pieces add up to the whole decode; valid UTF-8 text round-trips exactly
 * (without ▁ in it for the Gemma-style one, whose decoder turns ▁ into a space). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static tern_tokenizer *tok[2];

static void check(int ok) {
    if (!ok)
        __builtin_trap();
}

/* Appends printf output to a growing string. */
static void add(char **s, size_t *n, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char **s, size_t *n, size_t *cap, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(*s + *n, *cap - *n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < *cap - *n) {
            *n += (size_t)k;
            return;
        }
        *cap *= 2;
        *s = realloc(*s, *cap);
        check(*s != NULL);
    }
}

static void build(void) {
    size_t cap = 1 << 16, n = 0;
    char *j = malloc(cap);
    /* Gemma-style: specials, letters, ▁-words, 256 byte tokens. */
    static const char *const words[] = {"\xe2\x96\x81", "a", "b", "c", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab",
                                        "\n", "\n\n", "\xe2\x96\x81\xe2\x96\x81", "\xc3\xa9"};
    add(&j, &n, &cap, "{\"added_tokens\":[{\"id\":0,\"content\":\"<bos>\",\"special\":true},{\"id\":1,\"content\":"
                      "\"<eos>\",\"special\":true},{\"id\":2,\"content\":\"<tool>\",\"special\":false,\"lstrip\":true}],"
                      "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
                      "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\"}},"
                      "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<bos>\":{\"id\":\"<bos>\",\"ids\":[0]}}},"
                      "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
                      "\"\xe2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},"
                      "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"fuse_unk\":true,\"unk_token\":\"<unk>\","
                      "\"vocab\":{\"<bos>\":0,\"<eos>\":1,\"<tool>\":2,\"<unk>\":3");
    int id = 4;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        const char *w = words[i];
        add(&j, &n, &cap, ",\"%s\":%d", w[0] == '\n' ? (w[1] ? "\\n\\n" : "\\n") : w, id++);
    }
    for (int b = 0; b < 256; b++)
        add(&j, &n, &cap, ",\"<0x%02X>\":%d", b, id++);
    add(&j, &n, &cap, "},\"merges\":[\"\xe2\x96\x81 a\",\"a b\",\"\xe2\x96\x81 ab\",\"\\n \\n\",\"\xe2\x96\x81 \xe2\x96\x81\"]}}");
    tern_err *e = tern_tokenizer_load_hf_buf(j, n, NULL, 0, "fuzz-gemma", &tok[0]);
    check(e == NULL);

    /* Byte-level: all 256 stand-ins plus a few merges, GPT-2 regex. */
    n = 0;
    add(&j, &n, &cap, "{\"added_tokens\":[{\"id\":256,\"content\":\"<|end|>\",\"special\":true}],"
                      "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
                      "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        unsigned cp = b <= 0x20 ? 256u + b : (b >= 0x7f && b <= 0xa0) ? 289u + (b - 0x7f) : b == 0xad ? 323u : (unsigned)b;
        if (cp == '"' || cp == '\\')
            add(&j, &n, &cap, "%s\"\\%c\":%d", b ? "," : "", cp, b);
        else
            add(&j, &n, &cap, "%s\"\\u%04x\":%d", b ? "," : "", cp, b);
    }
    add(&j, &n, &cap, ",\"<|end|>\":256,\"\\u0120t\":257,\"he\":258,\"\\u0120the\":259},"
                      "\"merges\":[\"\\u0120 t\",\"h e\",\"\\u0120t he\"]}}");
    e = tern_tokenizer_load_hf_buf(j, n, NULL, 0, "fuzz-bytelevel", &tok[1]);
    check(e == NULL);
    free(j);
}

static int valid_utf8(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t m = 1; m < k; m++)
            if ((p[i + m] & 0xc0) != 0x80)
                return 0;
        if ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] > 0x9f) || (c == 0xf0 && p[i + 1] < 0x90) ||
            (c == 0xf4 && p[i + 1] > 0x8f))
            return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok[0])
        build();
    if (size == 0)
        return 0;
    unsigned flags = data[0];
    const tern_tokenizer *t = tok[flags & 1];
    int add_special = (flags >> 1) & 1, parse_special = (flags >> 2) & 1, render = (flags >> 3) & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    tern_tokens ids = {0};
    tern_err *e = tern_tokenize(t, text, len, add_special, parse_special, &ids);
    check(e == NULL);
    for (size_t i = 0; i < ids.n; i++)
        check(ids.ids[i] >= 0 && (size_t)ids.ids[i] < tern_tokenizer_vocab_size(t));

    char *out;
    size_t out_len;
    check(tern_detokenize(t, ids.ids, ids.n, render, &out, &out_len) == NULL);
    check(valid_utf8((const unsigned char *)out, out_len));
    /* Round trip holds for plain text: no template tokens, no parsed specials, and for the Gemma-style
     * tokenizer no ▁ (decodes as a space) and no <tool> (it swallows the whitespace on its left). */
    int plain = valid_utf8((const unsigned char *)text, len) && !add_special && !render && !parse_special &&
                !((flags & 1) == 0 && (memmem(text, len, "\xe2\x96\x81", 3) || memmem(text, len, "<tool>", 6)));
    if (plain)
        check(out_len == len && !memcmp(out, text, len));

    /* The stream's pieces are whole characters and add up to the full decode. */
    tern_detok_stream *s;
    check(tern_detok_stream_new(t, render, &s) == NULL);
    size_t at = 0;
    for (size_t i = 0; i <= ids.n; i++) {
        const char *piece;
        size_t n;
        if (i < ids.n)
            check(tern_detok_stream_push(s, ids.ids[i], &piece, &n) == NULL);
        else
            tern_detok_stream_flush(s, &piece, &n);
        check(valid_utf8((const unsigned char *)piece, n));
        check(at + n <= out_len && !memcmp(out + at, piece, n));
        at += n;
    }
    check(at == out_len);
    tern_detok_stream_free(s);
    free(out);
    tern_tokens_free(&ids);

    /* Arbitrary id sequences (two bytes each) decode without trouble; out-of-range ones are refused. */
    tern_token raw[64];
    size_t nraw = 0;
    for (size_t i = 1; i + 1 < size && nraw < 64; i += 2)
        raw[nraw++] = (tern_token)((data[i] << 8 | data[i + 1]) % (tern_tokenizer_vocab_size(t) + 2));
    e = tern_detokenize(t, raw, nraw, render, &out, &out_len);
    if (e)
        tern_err_free(e);
    else {
        check(valid_utf8((const unsigned char *)out, out_len));
        free(out);
    }
    return 0;
}
