/* tokenizer.c — the tokenizer object: choosing a loader for a path, freeing, and the small accessors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "tokenizer/tok_internal.h"

tern_err *tern_tokenizer_load(const char *path, tern_tokenizer **out) {
    *out = NULL;
    if (tern_is_dir(path))
        return tern_tokenizer_load_dir(path, out);
    if (!tern_is_file(path))
        return tern_errf(TERN_ENOTFOUND, "%s: no such file or directory", path);
    /* Decide by content: GGUF files start with their magic; anything else must be tokenizer.json. */
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_errf(TERN_EIO, "%s: cannot open", path);
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    if (got == 4 && !memcmp(magic, "GGUF", 4))
        return tern_tokenizer_load_gguf(path, out);
    return tern_tokenizer_load_hf(path, NULL, out);
}

tern_err *tern_tokenizer_load_dir(const char *dir, tern_tokenizer **out) {
    *out = NULL;
    char *json = tern_path_join(dir, "tokenizer.json");
    char *config = tern_path_join(dir, "tokenizer_config.json");
    tern_err *e;
    if (!json || !config)
        e = tern_errf(TERN_ENOMEM, "out of memory");
    else if (!tern_is_file(json))
        e = tern_errf(TERN_ENOTFOUND, "%s: no tokenizer.json in this directory", dir);
    else
        e = tern_tokenizer_load_hf(json, tern_is_file(config) ? config : NULL, out);
    free(json);
    free(config);
    return e;
}

void tern_tokenizer_free(tern_tokenizer *t) {
    if (!t)
        return;
    free(t->describe);
    free(t->pool);
    free(t->text_off);
    free(t->text_len);
    free(t->attr);
    free(t->score);
    free(t->hash);
    free(t->merges);
    free(t->added_lens);
    free(t->no_split_after);
    free(t->prefix);
    free(t->suffix);
    tok_pipeline_free(t);
    free(t);
}

size_t tern_tokenizer_vocab_size(const tern_tokenizer *t) { return (size_t)t->n_vocab; }

const char *tern_tokenizer_token_text(const tern_tokenizer *t, tern_token id, size_t *len) {
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    if (len)
        *len = t->text_len[id];
    return t->pool ? t->pool + t->text_off[id] : "";
}

tern_token tern_tokenizer_token_id(const tern_tokenizer *t, const char *text, size_t len) {
    return tok_vocab_find(t, text, len);
}

tern_token tern_tokenizer_bos(const tern_tokenizer *t) { return t->bos; }
tern_token tern_tokenizer_eos(const tern_tokenizer *t) { return t->eos; }
tern_token tern_tokenizer_pad(const tern_tokenizer *t) { return t->pad; }
tern_token tern_tokenizer_unk(const tern_tokenizer *t) { return t->unk; }

int tern_tokenizer_is_special(const tern_tokenizer *t, tern_token id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & (TA_CONTROL | TA_UNKNOWN)) != 0;
}

int tern_tokenizer_is_added(const tern_tokenizer *t, tern_token id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & TA_ADDED) != 0;
}

int tern_tokenizer_is_eog(const tern_tokenizer *t, tern_token id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & TA_EOG) != 0;
}

int tern_tokenizer_adds_bos(const tern_tokenizer *t) {
    for (size_t i = 0; i < t->n_prefix; i++)
        if (t->prefix[i] == t->bos)
            return 1;
    return 0;
}

int tern_tokenizer_adds_eos(const tern_tokenizer *t) {
    for (size_t i = 0; i < t->n_suffix; i++)
        if (t->suffix[i] == t->eos)
            return 1;
    return 0;
}

const char *tern_tokenizer_describe(const tern_tokenizer *t) { return t->describe ? t->describe : "tokenizer"; }
