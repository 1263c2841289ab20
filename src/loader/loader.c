/* loader.c — the model half of the public API (tern.h): the network, its tokenizer and its chat format. */
#include "loader/loader.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "chat/jinja.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "formats/checkpoint_dir.h"
#include "formats/gguf.h"

/* The tokenizer loads on a thread of its own while the weights load: parsing a large tokenizer.json is about as
 * long as mapping (or reading back) the weights, and the two need different resources. */
typedef struct tokenizer_job {
    const char *path;
    tern_tokenizer *tok;
    tern_err *err;
    double seconds;
} tokenizer_job;

static void *load_tokenizer(void *arg) {
    tokenizer_job *j = arg;
    const double t0 = tern_now_s();
    j->err = tern_tokenizer_load(j->path, &j->tok);
    j->seconds = tern_now_s() - t0;
    return NULL;
}

/* tokenizer.chat_template of a GGUF file, when it has one (*text stays NULL otherwise). */
static TERN_MUST_CHECK tern_err *gguf_template(const char *path, char **text, char **origin) {
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(path, &g));
    tern_err *e = NULL;
    if (tern_gguf_find(g, "tokenizer.chat_template") >= 0) {
        e = tern_gguf_get_str_dup(g, "tokenizer.chat_template", text);
        size_t n = strlen(path) + 40;
        if (!e && (*origin = malloc(n)))
            snprintf(*origin, n, "%s (tokenizer.chat_template)", path);
        else if (!e)
            e = tern_errf(TERN_ENOMEM, "out of memory");
    }
    tern_gguf_close(g);
    return e;
}

tern_err *tern_model_load(const tern_model_opts *o, tern_model **out) {
    *out = NULL;
    if (!o || !o->model_dir)
        return tern_errf(TERN_EINVAL, "tern_model_load: no model directory given");
    if (o->threads < 0 || o->threads > 1024)
        return tern_errf(TERN_EINVAL, "threads must be in [0, 1024], got %d", o->threads);
    tern_model *m = calloc(1, sizeof *m);
    if (!m || !(m->dir = strdup(o->model_dir))) {
        free(m);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    /* A GGUF model carries its vocabulary and chat template in its metadata. */
    char *gguf = NULL;
    tern_checkpoint_gguf_file(o->model_dir, &gguf);
    tokenizer_job job = {.path = o->tokenizer_path ? o->tokenizer_path : gguf ? gguf : o->model_dir};
    json_object_seed(0); /* jansson's hash seed, set once before two threads parse JSON */
    pthread_t th;
    const int threaded = pthread_create(&th, NULL, load_tokenizer, &job) == 0;
    if (!threaded)
        load_tokenizer(&job);
    const double t0 = tern_now_s();
    tern_err *err = tern_lm_load(o->model_dir, o->threads, &m->lm);
    const double t_weights = tern_now_s() - t0;
    if (threaded)
        pthread_join(th, NULL);
    m->tok = job.tok;
    if (!err)
        err = job.err;
    else
        tern_err_free(job.err);
    if (!err) {
        const tern_lm_desc *d = tern_lm_desc_of(m->lm);
        if ((int64_t)tern_tokenizer_vocab_size(m->tok) > d->vocab)
            err = tern_errf(TERN_EFORMAT, "%s: the tokenizer has %zu tokens but the model only %lld",
                            o->tokenizer_path ? o->tokenizer_path : o->model_dir, tern_tokenizer_vocab_size(m->tok),
                            (long long)d->vocab);
    }
    if (!err && o->chat_template_path) {
        size_t len;
        err = tern_read_file(o->chat_template_path, 16u << 20, &m->chat_template, &len);
        if (!err && !(m->template_origin = strdup(o->chat_template_path)))
            err = tern_errf(TERN_ENOMEM, "out of memory");
    } else if (!err && gguf) {
        err = gguf_template(gguf, &m->chat_template, &m->template_origin);
    } else if (!err) {
        tern_err *e = tern_chat_template_load(o->model_dir, &m->chat_template, NULL, &m->template_origin);
        if (e && e->code != TERN_ENOTFOUND)
            err = e; /* a template that is present but broken is worth hearing about */
        else
            tern_err_free(e);
    }
    if (!err) {
        const tern_lm_desc *d = tern_lm_desc_of(m->lm);
        err = tern_chat_format_build(m->tok, m->chat_template, m->template_origin, d->eos, d->n_eos, &m->chat);
    }
    if (!err) /* the audio and vision towers: the folder's own, or a GGUF multimodal projector file */
        err = tern_audio_input_find(o->model_dir, o->mmproj_path, &m->audio);
    if (!err)
        err = tern_image_input_find(o->model_dir, o->mmproj_path, &m->image);
    if (!err && o->mmproj_path && !m->audio && !m->image)
        err = tern_errf(TERN_EUNSUPPORTED, "%s: the projector file has neither an audio nor a vision tower this build "
                        "knows (clip.audio.projector_type / clip.vision.projector_type)", o->mmproj_path);
    if (!err && m->audio && tern_audio_input_dim(m->audio) != tern_lm_desc_of(m->lm)->hidden)
        err = tern_errf(TERN_EFORMAT, "%s: the audio tower's embeddings are %lld wide but the text model's hidden size "
                        "is %lld", o->model_dir, (long long)tern_audio_input_dim(m->audio),
                        (long long)tern_lm_desc_of(m->lm)->hidden);
    if (!err && m->image && tern_image_input_dim(m->image) != tern_lm_desc_of(m->lm)->hidden)
        err = tern_errf(TERN_EFORMAT, "%s: the vision tower's embeddings are %lld wide but the text model's hidden size "
                        "is %lld", o->model_dir, (long long)tern_image_input_dim(m->image),
                        (long long)tern_lm_desc_of(m->lm)->hidden);
    TLOG_DEBUG("%s: weights %.3f s, tokenizer %.3f s (beside them), loaded in %.3f s", o->model_dir, t_weights,
               job.seconds, tern_now_s() - t0);
    free(gguf);
    if (err) {
        tern_model_free(m);
        return err;
    }
    *out = m;
    return NULL;
}

void tern_model_free(tern_model *m) {
    if (!m)
        return;
    tern_lm_free(m->lm);
    tern_audio_input_free(m->audio);
    tern_image_input_free(m->image);
    tern_chat_format_free(m->chat);
    tern_tokenizer_free(m->tok);
    free(m->chat_template);
    free(m->template_origin);
    free(m->dir);
    free(m);
}

void tern_model_get_info(const tern_model *m, tern_model_info *out) {
    const tern_lm_desc *d = tern_lm_desc_of(m->lm);
    memset(out, 0, sizeof *out);
    out->dir = m->dir;
    out->vocab_size = d->vocab;
    out->n_layers = d->n_layers;
    out->hidden_size = d->hidden;
    out->sliding_window = d->sliding_window;
    out->ctx_train = d->ctx_train;
    out->weights_bytes = d->weights_bytes;
    tern_lm_desc_kv_bytes(d, TERN_KV_BF16, TERN_KV_BF16, &out->kv_full_bytes_per_token, &out->kv_sliding_bytes_per_token);
    out->threads = tern_lm_layout_threads(m->lm);
    out->audio = m->audio != NULL;
    out->vision = m->image != NULL;
}

const char *tern_model_chat_template(const tern_model *m, const char **origin) {
    if (origin)
        *origin = m->template_origin;
    return m->chat_template;
}

tern_err *tern_model_tokenize(const tern_model *m, const char *text, size_t len, int add_special, int parse_special,
                              int32_t **ids, size_t *n) {
    tern_tokens t = {0};
    *ids = NULL;
    *n = 0;
    tern_err *err = tern_tokenize(m->tok, text, len, add_special, parse_special, &t);
    if (err) {
        tern_tokens_free(&t);
        return err;
    }
    *ids = t.ids;
    *n = t.n;
    return NULL;
}

tern_err *tern_model_prompt_ids(const tern_model *m, const char *text, size_t len, int32_t **ids, size_t *n) {
    return tern_chat_tokenize(m->tok, text, len, ids, n);
}

tern_err *tern_model_detokenize(const tern_model *m, const int32_t *ids, size_t n, int render_special, char **text,
                                size_t *len) {
    return tern_detokenize(m->tok, ids, n, render_special, text, len);
}

char *tern_model_token_piece(const tern_model *m, int32_t id, size_t *len) {
    return tern_tokenizer_token_piece(m->tok, id, len);
}

int tern_model_is_eog(const tern_model *m, int32_t id) {
    return tern_chat_format_is_stop(m->chat, id) ||
           (id >= 0 && (size_t)id < tern_tokenizer_vocab_size(m->tok) && tern_tokenizer_is_eog(m->tok, id));
}

const tern_chat_format *tern_model_chat_format(const tern_model *m) { return m->chat; }

tern_err *tern_model_chat_prompt(const tern_model *m, const json_t *messages, const json_t *tools,
                                 const json_t *kwargs, int add_generation_prompt, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    char *text = NULL;
    size_t len = 0;
    tern_err *err = tern_chat_format_render(m->chat, messages, tools, kwargs, add_generation_prompt, &text, &len);
    if (!err) {
        if (tern_log_get_level() >= TERN_LOG_DEBUG)
            TLOG_DEBUG("prompt (%zu bytes): %.2000s", len, text);
        err = tern_chat_tokenize(m->tok, text, len, ids, n);
    }
    free(text);
    return err;
}

void tern_model_chat_info(const tern_model *m, tern_chat_info *out) {
    const tern_chat_format *f = m->chat;
    memset(out, 0, sizeof *out);
    out->has_template = f->tpl != NULL;
    out->bos = f->bos_text;
    out->eos = f->eos_text;
    out->stop_ids = f->stop_ids;
    out->n_stop_ids = f->n_stop_ids;
    out->turn_start = f->turn_start;
    out->turn_end = f->turn_end;
    out->generation_prompt = f->generation_prompt;
    out->audio_start = f->audio_start;
    out->audio_token = f->audio_token;
    out->audio_end = f->audio_end;
    out->image_start = f->image_start;
    out->image_token = f->image_token;
    out->image_end = f->image_end;
}

int32_t tern_model_bos(const tern_model *m) { return tern_tokenizer_bos(m->tok); }

void tern_free(void *p) { free(p); }
