/* media_prompt.c — chat prompts that carry audio: the template places a marker per clip, each clip is decoded and
 * encoded by the model's audio tower, and the marker becomes start + one placeholder per soft token + end, the
 * placeholders fed the clip's embedding rows (see loader.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "core/base64.h"
#include "core/log.h"
#include "loader/loader.h"

tern_err *tern_audio_splice(const int32_t *ids, size_t n, int32_t marker, int32_t start, int32_t end,
                            const tern_audio_embeds *clips, int n_clips, const int *groups, int n_groups, int32_t **out,
                            size_t *n_out, tern_prompt_embeds *spans) {
    *out = NULL;
    *n_out = 0;
    if (!groups)
        n_groups = n_clips;
    size_t markers = 0, extra = 0;
    for (size_t i = 0; i < n; i++)
        markers += ids[i] == marker;
    if (markers != (size_t)n_groups)
        return tern_errf(TERN_EINVAL,
                         "the prompt has %zu audio markers for %d audio clips (the chat template places one per clip; "
                         "text must not contain the marker itself)",
                         markers, n_groups);
    for (int k = 0; k < n_clips; k++)
        extra += clips[k].n + 2; /* n placeholders plus start and end, in place of one marker per group */
    int32_t *o = malloc((n + extra) * sizeof *o);
    if (!o)
        return tern_errf(TERN_ENOMEM, "out of memory");
    size_t w = 0;
    int g = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != marker) {
            o[w++] = ids[i];
            continue;
        }
        for (int j = 0; j < (groups ? groups[g] : 1) && c < n_clips; j++, c++) {
            o[w++] = start;
            spans[c] = (tern_prompt_embeds){.pos = (int64_t)w, .n = (int64_t)clips[c].n, .rows = clips[c].rows,
                                            .key = clips[c].hash};
            for (size_t q = 0; q < clips[c].n; q++)
                o[w++] = marker;
            o[w++] = end;
        }
        g++;
    }
    *out = o;
    *n_out = w;
    return NULL;
}

/* One audio part {"data", "format", "path"} → its embeddings, one per 30 s window (*out, *n). */
static tern_err *encode_clip(const tern_model *m, const json_t *part, const tern_media_opts *o,
                             tern_audio_embeds **out, int *n) {
    const char *path = json_string_value(json_object_get(part, "path"));
    const json_t *data = json_object_get(part, "data");
    unsigned char *bytes = NULL;
    size_t len = 0;
    tern_err *err = tern_base64_decode(json_string_value(data), json_string_length(data), &bytes, &len);
    if (!err && len == 0)
        err = tern_errf(TERN_EINVAL, "the audio data is empty");
    if (!err)
        err = tern_audio_input_embed_windows(m->audio, bytes, len, o->timeout_s, o->audio_windows, o->pool, out, n);
    free(bytes);
    if (err) {
        if (err->code != TERN_ENOMEM && err->code != TERN_EINTERNAL)
            err->code = TERN_EINVAL;
        return tern_err_wrap(err, "%s", path);
    }
    return NULL;
}

tern_err *tern_model_chat_prompt_media(const tern_model *m, const json_t *messages, const json_t *tools,
                                       const json_t *kwargs, int add_generation_prompt, const tern_media_opts *o,
                                       tern_media_prompt *out) {
    static const tern_media_opts defaults = {0};
    if (!o)
        o = &defaults;
    memset(out, 0, sizeof *out);
    json_t *audio = m->audio ? json_array() : NULL;
    if (m->audio && !audio)
        return tern_errf(TERN_ENOMEM, "out of memory");
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    int *groups = NULL;
    tern_err *err = tern_chat_format_render_media(m->chat, messages, tools, kwargs, add_generation_prompt, audio,
                                                  &text, &len);
    if (!err)
        err = tern_chat_tokenize(m->tok, text, len, &ids, &n_ids);
    free(text);
    size_t n_parts = audio ? json_array_size(audio) : 0;
    const tern_chat_format *f = m->chat;
    if (!err && n_parts > TERN_MAX_AUDIO_CLIPS)
        err = tern_errf(TERN_EINVAL, "%zu audio clips in one request; at most %d", n_parts, TERN_MAX_AUDIO_CLIPS);
    if (!err && n_parts && !(f->audio_start && f->audio_token && f->audio_end))
        err = tern_errf(TERN_EUNSUPPORTED, "the model's vocabulary has no audio markers (<|audio>, <|audio|>, <audio|>)");
    if (!err && n_parts && !(groups = calloc(n_parts, sizeof *groups)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t k = 0; !err && k < n_parts; k++) {
        tern_audio_embeds *w = NULL;
        int nw = 0;
        err = encode_clip(m, json_array_get(audio, k), o, &w, &nw);
        tern_audio_embeds *all = err ? NULL : realloc(out->clips, (size_t)(out->n_clips + nw) * sizeof *all);
        if (!err && !all)
            err = tern_errf(TERN_ENOMEM, "out of memory");
        if (err) {
            for (int i = 0; i < nw; i++)
                tern_audio_embeds_free(&w[i]);
        } else {
            memcpy(all + out->n_clips, w, (size_t)nw * sizeof *all);
            out->clips = all;
            out->n_clips += nw;
            groups[k] = nw;
        }
        free(w);
    }
    if (!err && n_parts && !(out->spans = calloc((size_t)out->n_clips, sizeof *out->spans)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err && n_parts) {
        int32_t mk = tern_tokenizer_token_id(m->tok, f->audio_token, strlen(f->audio_token));
        int32_t st = tern_tokenizer_token_id(m->tok, f->audio_start, strlen(f->audio_start));
        int32_t en = tern_tokenizer_token_id(m->tok, f->audio_end, strlen(f->audio_end));
        err = tern_audio_splice(ids, n_ids, mk, st, en, out->clips, out->n_clips, groups, (int)n_parts, &out->ids,
                                &out->n, out->spans);
        tern_free(ids);
        ids = NULL;
        if (!err)
            TLOG_DEBUG("prompt: %zu audio clip(s) in %d window(s) spliced in, %zu tokens", n_parts, out->n_clips,
                       out->n);
    } else if (!err) {
        out->ids = ids;
        out->n = n_ids;
        ids = NULL;
    }
    tern_free(ids);
    free(groups);
    json_decref(audio);
    if (err)
        tern_media_prompt_free(out);
    return err;
}

void tern_media_prompt_free(tern_media_prompt *p) {
    if (!p)
        return;
    for (int k = 0; k < p->n_clips; k++)
        tern_audio_embeds_free(&p->clips[k]);
    free(p->clips);
    free(p->spans);
    free(p->ids); /* malloc'd here, or by tern_chat_tokenize (tern_free is free) */
    memset(p, 0, sizeof *p);
}
