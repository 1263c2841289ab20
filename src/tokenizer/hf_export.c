/* hf_export.c — GGUF vocabulary -> tokenizer.json: SentencePiece-style BPE (byte fallback, '▁' space marker) as
 * Gemma's, or byte-level BPE (tokenizer.ggml.model "gpt2": Llama 3, Qwen) with the pre-tokenizer's regexes that
 * tokenizer.ggml.pre names.
 *
 * The JSON is streamed with our own string escaper: the Gemma 4 vocabulary has 262144
 * tokens and 514906 merges, and building that as a jansson tree would cost hundreds of
 * megabytes for a file that is written once. Token types follow llama.cpp's GGUF
 * convention: 3 = control (an added, special token), 4 = user-defined (added, not special). */
#include "tokenizer/hf_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "formats/gguf.h"
#include "tokenizer/tok_internal.h"

enum { GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_USER_DEFINED = 4 };

/* Writes s[0..len) as a JSON string literal (UTF-8 passed through, controls escaped). */
static void put_json_str(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

/* Open-addressing map from token text to id, for filtering merges of a cut vocabulary. */
typedef struct {
    const char **keys;
    size_t *lens;
    int64_t *ids;
    size_t cap;
} tok_map;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int64_t map_get(const tok_map *m, const char *s, size_t n) {
    for (size_t i = hash_bytes(s, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (m->lens[i] == n && !memcmp(m->keys[i], s, n))
            return m->ids[i];
    }
}

static void map_put(tok_map *m, const char *s, size_t n, int64_t id) {
    size_t i = hash_bytes(s, n) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->lens[i] == n && !memcmp(m->keys[i], s, n))
            return; /* first id wins, as in HF's vocab dict */
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = s;
    m->lens[i] = n;
    m->ids[i] = id;
}

/* The pipeline of a SentencePiece-style vocabulary (Gemma's), up to the model's vocab. */
static void write_sentencepiece(FILE *f) {
    fputs("\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}, "
          "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": "
          "\"MergedWithPrevious\", \"invert\": false}, "
          "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<bos>\", "
          "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [{\"SpecialToken\": {\"id\": "
          "\"<bos>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": "
          "\"<bos>\", \"type_id\": 1}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}], \"special_tokens\": "
          "{\"<bos>\": {\"id\": \"<bos>\", \"ids\": [2], \"tokens\": [\"<bos>\"]}}}, "
          "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
          "\"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}, "
          "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", \"continuing_subword_prefix\": "
          "null, \"end_of_word_suffix\": null, \"fuse_unk\": true, \"byte_fallback\": true, \"ignore_merges\": false, "
          "\"vocab\": {",
          f);
}

/* The pipeline of a byte-level vocabulary: the pre-tokenizer's regexes splitting in turn, GPT-2's byte stand-ins,
 * up to the model's vocab. */
static void write_bytelevel(FILE *f, const tok_pre_name *pre) {
    fputs("\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [", f);
    for (int i = 0; pre->regexes[i]; i++) {
        fputs("{\"type\": \"Split\", \"pattern\": {\"Regex\": ", f);
        put_json_str(f, pre->regexes[i], strlen(pre->regexes[i]));
        fputs("}, \"behavior\": \"Isolated\", \"invert\": false}, ", f);
    }
    fprintf(f, "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": "
               "false}]}, \"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
               "true, \"trim_offsets\": true, \"use_regex\": true}, \"model\": {\"type\": \"BPE\", \"dropout\": "
               "null, \"unk_token\": null, \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
               "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": %s, \"vocab\": {",
            pre->flags & TOK_PRE_IGNORE_MERGES ? "true" : "false");
}

/* The pre-tokenizer of a byte-level vocabulary (NULL for a SentencePiece-style one); an error for a byte-level
 * one whose pre-tokenizer is unknown. */
static TERN_MUST_CHECK tern_err *bytelevel_pre(const tern_gguf *g, const tok_pre_name **pre) {
    *pre = NULL;
    tern_gguf_str model = {0}, name = {0};
    if (tern_gguf_find(g, "tokenizer.ggml.model") >= 0)
        TERN_TRY(tern_gguf_get_str(g, "tokenizer.ggml.model", &model));
    if (model.len != 4 || memcmp(model.ptr, "gpt2", 4))
        return NULL;
    if (tern_gguf_find(g, "tokenizer.ggml.pre") >= 0)
        TERN_TRY(tern_gguf_get_str(g, "tokenizer.ggml.pre", &name));
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)name.len, name.ptr ? name.ptr : "");
    if (!(*pre = tok_pre_by_name(buf)))
        return tern_errf(TERN_EUNSUPPORTED, "tokenizer.ggml.pre \"%s\" is not a pre-tokenizer tern knows", buf);
    return NULL;
}

static TERN_MUST_CHECK tern_err *write_tokenizer_json(const tern_gguf *g, int64_t V, const char *path) {
    tern_gguf_array toks, types, merges;
    const tok_pre_name *pre;
    TERN_TRY(bytelevel_pre(g, &pre));
    TERN_TRY(tern_gguf_get_array(g, "tokenizer.ggml.tokens", &toks));
    TERN_TRY(tern_gguf_get_array(g, "tokenizer.ggml.token_type", &types));
    TERN_TRY(tern_gguf_get_array(g, "tokenizer.ggml.merges", &merges));
    if ((uint64_t)V > toks.count)
        return tern_errf(TERN_EINVAL, "vocab_size %lld exceeds the %llu tokens of the GGUF vocabulary", (long long)V,
                         (unsigned long long)toks.count);
    if (types.count != toks.count)
        return tern_errf(TERN_EFORMAT, "tokenizer.ggml.token_type has %llu entries for %llu tokens",
                         (unsigned long long)types.count, (unsigned long long)toks.count);
    tok_map m = {0};
    m.cap = 1;
    while (m.cap < (size_t)V * 2)
        m.cap <<= 1;
    m.keys = calloc(m.cap, sizeof *m.keys);
    m.lens = calloc(m.cap, sizeof *m.lens);
    m.ids = calloc(m.cap, sizeof *m.ids);
    FILE *f = fopen(path, "wb");
    tern_err *err = NULL;
    if (!m.keys || !m.lens || !m.ids)
        err = tern_errf(TERN_ENOMEM, "out of memory exporting the tokenizer");
    else if (!f)
        err = tern_errf(TERN_EIO, "%s: cannot create: %s", path, strerror(errno));
    if (err)
        goto done;
    fputs("{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [", f);
    int first = 1;
    for (int64_t i = 0; i < V && !err; i++) {
        tern_gguf_str s;
        int64_t type;
        err = tern_gguf_array_str(&toks, (uint64_t)i, &s);
        if (!err)
            err = tern_gguf_array_i64(&types, (uint64_t)i, &type);
        if (err)
            break;
        map_put(&m, s.ptr, s.len, i);
        if (type != GGUF_TOKEN_CONTROL && type != GGUF_TOKEN_USER_DEFINED)
            continue;
        fprintf(f, "%s{\"id\": %lld, \"content\": ", first ? "" : ", ", (long long)i);
        put_json_str(f, s.ptr, s.len);
        fprintf(f, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
                   "\"special\": %s}",
                type == GGUF_TOKEN_CONTROL ? "true" : "false");
        first = 0;
    }
    if (err)
        goto done;
    fputs("], ", f);
    if (pre)
        write_bytelevel(f, pre);
    else
        write_sentencepiece(f);
    for (int64_t i = 0; i < V && !err; i++) {
        tern_gguf_str s;
        err = tern_gguf_array_str(&toks, (uint64_t)i, &s);
        if (err)
            break;
        if (map_get(&m, s.ptr, s.len) != i)
            continue; /* a duplicate text keeps its first id */
        if (i)
            fputs(", ", f);
        put_json_str(f, s.ptr, s.len);
        fprintf(f, ": %lld", (long long)i);
    }
    fputs("}, \"merges\": [", f);
    first = 1;
    for (uint64_t i = 0; i < merges.count && !err; i++) {
        tern_gguf_str s;
        err = tern_gguf_array_str(&merges, i, &s);
        if (err)
            break;
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            err = tern_errf(TERN_EFORMAT, "tokenizer.ggml.merges[%llu] has no separating space", (unsigned long long)i);
            break;
        }
        size_t la = (size_t)(sp - s.ptr), lb = s.len - la - 1;
        char *joined = malloc(la + lb + 1);
        if (!joined) {
            err = tern_errf(TERN_ENOMEM, "out of memory");
            break;
        }
        memcpy(joined, s.ptr, la);
        memcpy(joined + la, sp + 1, lb);
        int keep = map_get(&m, s.ptr, la) >= 0 && map_get(&m, sp + 1, lb) >= 0 && map_get(&m, joined, la + lb) >= 0;
        free(joined);
        if (!keep)
            continue;
        fputs(first ? "[" : ", [", f);
        put_json_str(f, s.ptr, la);
        fputs(", ", f);
        put_json_str(f, sp + 1, lb);
        fputc(']', f);
        first = 0;
    }
    fputs("]}}\n", f);
done:
    if (f && (fclose(f) != 0) && !err)
        err = tern_errf(TERN_EIO, "%s: write failed", path);
    free(m.keys);
    free(m.lens);
    free(m.ids);
    return err;
}

/* Writes "key": the text of the token tokenizer.ggml.<id_key> names, or null when there is none below V. */
static TERN_MUST_CHECK tern_err *put_special(FILE *f, const tern_gguf *g, const char *key, const char *id_key, int64_t V) {
    char k[96];
    snprintf(k, sizeof k, "tokenizer.ggml.%s", id_key);
    uint32_t id = 0;
    tern_gguf_array toks;
    tern_gguf_str text = {0};
    if (tern_gguf_find(g, k) >= 0) {
        TERN_TRY(tern_gguf_get_u32(g, k, &id));
        TERN_TRY(tern_gguf_get_array(g, "tokenizer.ggml.tokens", &toks));
        if ((int64_t)id < V)
            TERN_TRY(tern_gguf_array_str(&toks, id, &text));
    }
    fprintf(f, "  \"%s\": ", key);
    if (text.ptr)
        put_json_str(f, text.ptr, text.len);
    else
        fputs("null", f);
    fputs(",\n", f);
    return NULL;
}

static TERN_MUST_CHECK tern_err *write_tokenizer_config(const tern_gguf *g, int64_t V, const char *path) {
    const tok_pre_name *pre;
    TERN_TRY(bytelevel_pre(g, &pre));
    int add_bos = !pre;
    if (tern_gguf_find(g, "tokenizer.ggml.add_bos_token") >= 0)
        TERN_TRY(tern_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos));
    FILE *f = fopen(path, "wb");
    if (!f)
        return tern_errf(TERN_EIO, "%s: cannot create: %s", path, strerror(errno));
    tern_err *err = NULL;
    if (pre) {
        fprintf(f, "{\n  \"add_bos_token\": %s,\n  \"add_eos_token\": false,\n", add_bos ? "true" : "false");
        err = put_special(f, g, "bos_token", "bos_token_id", V);
        if (!err)
            err = put_special(f, g, "eos_token", "eos_token_id", V);
        if (!err)
            err = put_special(f, g, "pad_token", "padding_token_id", V);
        fprintf(f, "  \"clean_up_tokenization_spaces\": false,\n  \"model_max_length\": 131072,\n"
                   "  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n");
    } else {
        fprintf(f,
                "{\n  \"add_bos_token\": %s,\n  \"add_eos_token\": false,\n  \"bos_token\": \"<bos>\",\n"
                "  \"eos_token\": \"<eos>\",\n  \"pad_token\": \"<pad>\",\n  \"unk_token\": \"<unk>\",\n"
                "  \"clean_up_tokenization_spaces\": false,\n  \"model_max_length\": %lld,\n"
                "  \"padding_side\": \"left\",\n  \"spaces_between_special_tokens\": false,\n"
                "  \"tokenizer_class\": \"GemmaTokenizer\"\n}\n",
                add_bos ? "true" : "false", (long long)(V < 131072 ? 131072 : V));
    }
    if (fclose(f) != 0 && !err)
        err = tern_errf(TERN_EIO, "%s: write failed", path);
    return err;
}

tern_err *tern_hf_export_tokenizer(const char *gguf_path, int64_t vocab_size, const char *out_dir) {
    if (!gguf_path)
        return tern_errf(TERN_EINVAL, "no vocabulary file given (a GGUF with tokenizer.ggml.* metadata)");
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(gguf_path, &g));
    char *p1 = tern_path_join(out_dir, "tokenizer.json");
    char *p2 = tern_path_join(out_dir, "tokenizer_config.json");
    char *p3 = tern_path_join(out_dir, "chat_template.jinja");
    tern_err *err = (!p1 || !p2 || !p3) ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
    if (!err)
        err = write_tokenizer_json(g, vocab_size, p1);
    if (!err)
        err = write_tokenizer_config(g, vocab_size, p2);
    if (!err && tern_gguf_find(g, "tokenizer.chat_template") >= 0) {
        tern_gguf_str t;
        err = tern_gguf_get_str(g, "tokenizer.chat_template", &t);
        if (!err)
            err = tern_write_file(p3, t.ptr, t.len);
    }
    free(p1);
    free(p2);
    free(p3);
    tern_gguf_close(g);
    return tern_err_wrap(err, "%s", gguf_path);
}
