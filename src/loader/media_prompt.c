/* media_prompt.c — chat prompts that carry audio and images: the template places a marker per clip and per image,
 * each is decoded and encoded by the model's tower, and the marker becomes start + one placeholder per soft token +
 * end, the placeholders fed the embedding rows (see loader.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "core/base64.h"
#include "core/log.h"
#include "loader/loader.h"

tern_err *tern_media_splice(const int32_t *ids, size_t n, const tern_splice_kind *kinds, int n_kinds, int32_t **out,
                            size_t *n_out, tern_prompt_embeds *spans) {
    *out = NULL;
    *n_out = 0;
    if (n_kinds > 8)
        return tern_errf(TERN_EINTERNAL, "%d kinds of media in one prompt; at most 8", n_kinds);
    size_t extra = 0;
    for (int k = 0; k < n_kinds; k++) {
        const tern_splice_kind *K = &kinds[k];
        size_t markers = 0;
        for (size_t i = 0; i < n; i++)
            markers += ids[i] == K->marker;
        const int groups = K->groups ? K->n_groups : K->n_items;
        if (markers != (size_t)groups)
            return tern_errf(TERN_EINVAL,
                             "the prompt has %zu %s markers for %d %s inputs (the chat template places one per input; "
                             "text must not contain the marker itself)",
                             markers, K->what, groups, K->what);
        for (int i = 0; i < K->n_items; i++)
            extra += (size_t)K->items[i].n + 2; /* n placeholders plus start and end, in place of one marker */
    }
    int32_t *o = malloc((n + extra) * sizeof *o);
    if (!o)
        return tern_errf(TERN_ENOMEM, "out of memory");
    int g[8] = {0}, c[8] = {0}; /* per kind: markers and items used */
    size_t w = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        const tern_splice_kind *K = NULL;
        int k = 0;
        for (; k < n_kinds && !K; k++)
            if (ids[i] == kinds[k].marker)
                K = &kinds[k];
        if (!K) {
            o[w++] = ids[i];
            continue;
        }
        k--;
        for (int j = 0; j < (K->groups ? K->groups[g[k]] : 1) && c[k] < K->n_items; j++, c[k]++) {
            const tern_prompt_embeds *it = &K->items[c[k]];
            o[w++] = K->start;
            spans[s++] = (tern_prompt_embeds){.pos = (int64_t)w, .n = it->n, .rows = it->rows, .key = it->key,
                                              .image = it->image};
            for (int64_t q = 0; q < it->n; q++)
                o[w++] = K->marker;
            o[w++] = K->end;
        }
        g[k]++;
    }
    *out = o;
    *n_out = w;
    return NULL;
}

/* The base64 payload of a media part ("data"), decoded. */
static TERN_MUST_CHECK tern_err *part_bytes(const json_t *part, const char *what, unsigned char **bytes, size_t *len) {
    const json_t *data = json_object_get(part, "data");
    TERN_TRY(tern_base64_decode(json_string_value(data), json_string_length(data), bytes, len));
    if (*len == 0) {
        free(*bytes);
        *bytes = NULL;
        return tern_errf(TERN_EINVAL, "the %s data is empty", what);
    }
    return NULL;
}

/* An error about one part: named by its path, a client's fault unless memory or the server failed. */
static TERN_MUST_CHECK tern_err *part_error(tern_err *err, const json_t *part) {
    if (err->code != TERN_ENOMEM && err->code != TERN_EINTERNAL)
        err->code = TERN_EINVAL;
    return tern_err_wrap(err, "%s", json_string_value(json_object_get(part, "path")));
}

/* One audio part {"data", "format", "path"} → its embeddings, one per 30 s window (*out, *n). */
static TERN_MUST_CHECK tern_err *encode_clip(const tern_model *m, const json_t *part, const tern_media_opts *o,
                             tern_audio_embeds **out, int *n) {
    unsigned char *bytes = NULL;
    size_t len = 0;
    tern_err *err = part_bytes(part, "audio", &bytes, &len);
    if (!err)
        err = tern_audio_input_embed_windows(m->audio, bytes, len, o->timeout_s, o->audio_windows, o->pool, out, n);
    free(bytes);
    return err ? part_error(err, part) : NULL;
}

/* One image part {"data" | "url", "detail", "path"} → its embeddings at the detail's budget. */
static TERN_MUST_CHECK tern_err *encode_image(const tern_model *m, const json_t *part, const tern_media_opts *o,
                              tern_image_embeds *out) {
    const char *detail = json_string_value(json_object_get(part, "detail"));
    const char *url = json_string_value(json_object_get(part, "url"));
    int budget = 0; /* auto: the processor's default */
    if (detail && !strcmp(detail, "low"))
        budget = tern_image_input_budget_nearest(m->image, 70);
    else if (detail && !strcmp(detail, "high"))
        budget = tern_image_input_budget_nearest(m->image, 1120);
    void *bytes = NULL;
    size_t len = 0;
    tern_err *err = NULL;
    if (url && !o->fetch)
        err = tern_errf(TERN_EINVAL, "image URLs are not fetched by this server: send the image as a data: URI "
                        "(data:image/png;base64,...), or start the server with --allow-image-urls");
    else if (url)
        err = o->fetch(o->fetch_ctx, url, &bytes, &len);
    else
        err = part_bytes(part, "image", (unsigned char **)&bytes, &len);
    if (!err)
        err = tern_image_input_embed(m->image, bytes, len, budget, o->pool, out);
    free(bytes);
    return err ? part_error(err, part) : NULL;
}

static TERN_MUST_CHECK tern_err *encode_audio_parts(const tern_model *m, const json_t *audio, const tern_media_opts *o,
                                    tern_media_prompt *out, int *groups) {
    for (size_t k = 0; k < json_array_size(audio); k++) {
        tern_audio_embeds *w = NULL;
        int nw = 0;
        tern_err *err = encode_clip(m, json_array_get(audio, k), o, &w, &nw);
        tern_audio_embeds *all = err ? NULL : realloc(out->clips, (size_t)(out->n_clips + nw) * sizeof *all);
        if (!err && !all)
            err = tern_errf(TERN_ENOMEM, "out of memory");
        if (err) {
            for (int i = 0; i < nw; i++)
                tern_audio_embeds_free(&w[i]);
            free(w);
            return err;
        }
        memcpy(all + out->n_clips, w, (size_t)nw * sizeof *all);
        out->clips = all;
        out->n_clips += nw;
        groups[k] = nw;
        free(w);
    }
    return NULL;
}

static TERN_MUST_CHECK tern_err *encode_image_parts(const tern_model *m, const json_t *images, const tern_media_opts *o,
                                    tern_media_prompt *out) {
    const size_t n = json_array_size(images);
    if (n && !(out->images = calloc(n, sizeof *out->images)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        TERN_TRY(encode_image(m, json_array_get(images, k), o, &out->images[k]));
        out->n_images++;
    }
    return NULL;
}

/* The spans' items of one kind: rows, length and key of each clip or image. */
static tern_prompt_embeds *items_of(const tern_media_prompt *p, int audio) {
    const int n = audio ? p->n_clips : p->n_images;
    tern_prompt_embeds *v = calloc(n ? (size_t)n : 1, sizeof *v);
    for (int i = 0; v && i < n; i++)
        v[i] = audio ? (tern_prompt_embeds){.n = (int64_t)p->clips[i].n, .rows = p->clips[i].rows,
                                            .key = p->clips[i].hash}
                     : (tern_prompt_embeds){.n = (int64_t)p->images[i].n, .rows = p->images[i].rows,
                                            .key = p->images[i].hash, .image = 1};
    return v;
}

static TERN_MUST_CHECK tern_err *splice(const tern_model *m, const int32_t *ids, size_t n_ids, const int *groups, int n_audio_parts,
                        tern_media_prompt *out) {
    const tern_chat_format *f = m->chat;
    tern_splice_kind kinds[2];
    int nk = 0;
    tern_prompt_embeds *ai = items_of(out, 1), *ii = items_of(out, 0);
    tern_err *err = ai && ii ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    if (!err && n_audio_parts)
        kinds[nk++] = (tern_splice_kind){
            .marker = tern_tokenizer_token_id(m->tok, f->audio_token, strlen(f->audio_token)),
            .start = tern_tokenizer_token_id(m->tok, f->audio_start, strlen(f->audio_start)),
            .end = tern_tokenizer_token_id(m->tok, f->audio_end, strlen(f->audio_end)),
            .items = ai, .n_items = out->n_clips, .groups = groups, .n_groups = n_audio_parts, .what = "audio"};
    if (!err && out->n_images)
        kinds[nk++] = (tern_splice_kind){
            .marker = tern_tokenizer_token_id(m->tok, f->image_token, strlen(f->image_token)),
            .start = tern_tokenizer_token_id(m->tok, f->image_start, strlen(f->image_start)),
            .end = tern_tokenizer_token_id(m->tok, f->image_end, strlen(f->image_end)),
            .items = ii, .n_items = out->n_images, .what = "image"};
    out->n_spans = out->n_clips + out->n_images;
    if (!err && !(out->spans = calloc((size_t)out->n_spans, sizeof *out->spans)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err)
        err = tern_media_splice(ids, n_ids, kinds, nk, &out->ids, &out->n, out->spans);
    free(ai);
    free(ii);
    return err;
}

tern_err *tern_model_chat_prompt_media(const tern_model *m, const json_t *messages, const json_t *tools,
                                       const json_t *kwargs, int add_generation_prompt, const tern_media_opts *o,
                                       tern_media_prompt *out) {
    static const tern_media_opts defaults = {0};
    if (!o)
        o = &defaults;
    memset(out, 0, sizeof *out);
    json_t *audio = m->audio ? json_array() : NULL, *images = m->image ? json_array() : NULL;
    if ((m->audio && !audio) || (m->image && !images)) {
        json_decref(audio);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    int *groups = NULL;
    tern_err *err = tern_chat_format_render_media(m->chat, messages, tools, kwargs, add_generation_prompt, audio,
                                                  images, &text, &len);
    if (!err)
        err = tern_chat_tokenize(m->tok, text, len, &ids, &n_ids);
    free(text);
    const size_t n_audio = audio ? json_array_size(audio) : 0, n_images = images ? json_array_size(images) : 0;
    const tern_chat_format *f = m->chat;
    if (!err && n_audio > TERN_MAX_AUDIO_CLIPS)
        err = tern_errf(TERN_EINVAL, "%zu audio clips in one request; at most %d", n_audio, TERN_MAX_AUDIO_CLIPS);
    if (!err && n_images > TERN_MAX_IMAGES)
        err = tern_errf(TERN_EINVAL, "%zu images in one request; at most %d", n_images, TERN_MAX_IMAGES);
    if (!err && n_audio && !(f->audio_start && f->audio_token && f->audio_end))
        err = tern_errf(TERN_EUNSUPPORTED, "the model's vocabulary has no audio markers (<|audio>, <|audio|>, <audio|>)");
    if (!err && n_images && !(f->image_start && f->image_token && f->image_end))
        err = tern_errf(TERN_EUNSUPPORTED, "the model's vocabulary has no image markers (<|image>, <|image|>, <image|>)");
    if (!err && n_audio && !(groups = calloc(n_audio, sizeof *groups)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err)
        err = encode_audio_parts(m, audio, o, out, groups);
    if (!err)
        err = encode_image_parts(m, images, o, out);
    if (!err && (n_audio || n_images)) {
        err = splice(m, ids, n_ids, groups, (int)n_audio, out);
        if (!err)
            TLOG_DEBUG("prompt: %zu audio clip(s) in %d window(s) and %d image(s) spliced in, %zu tokens", n_audio,
                       out->n_clips, out->n_images, out->n);
    } else if (!err) {
        out->ids = ids;
        out->n = n_ids;
        ids = NULL;
    }
    tern_free(ids);
    free(groups);
    json_decref(audio);
    json_decref(images);
    if (err)
        tern_media_prompt_free(out);
    return err;
}

void tern_media_prompt_free(tern_media_prompt *p) {
    if (!p)
        return;
    for (int k = 0; k < p->n_clips; k++)
        tern_audio_embeds_free(&p->clips[k]);
    for (int k = 0; k < p->n_images; k++)
        tern_image_embeds_free(&p->images[k]);
    free(p->clips);
    free(p->images);
    free(p->spans);
    free(p->ids); /* malloc'd here, or by tern_chat_tokenize (tern_free is free) */
    memset(p, 0, sizeof *p);
}
