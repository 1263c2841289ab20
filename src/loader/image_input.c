/* image_input.c — image bytes → RGB → the processor's size → vision tower → soft-token embeddings (see
 * image_input.h). */
#include "loader/image_input.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/json_util.h"
#include "loader/mmproj.h"
#include "models/vision_encoder.h"

struct tern_image_input {
    tern_vision_enc *enc;
    int budget; /* the processor's max_soft_tokens */
};

static TERN_MUST_CHECK tern_err *wrap(tern_vision_enc *enc, tern_image_input **out) {
    tern_image_input *a = calloc(1, sizeof *a);
    if (!a) {
        tern_vision_enc_free(enc);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    a->enc = enc;
    a->budget = tern_vision_enc_budget_nearest(enc, 280);
    *out = a;
    return NULL;
}

tern_err *tern_image_input_load_gguf(const char *file, tern_image_input **out) {
    *out = NULL;
    tern_vision_enc *enc = NULL;
    TERN_TRY(tern_vision_enc_load_gguf(file, &enc));
    return wrap(enc, out);
}

tern_err *tern_image_input_find(const char *model_path, const char *mmproj, tern_image_input **out) {
    *out = NULL;
    tern_tower_source src;
    char *file = NULL;
    TERN_TRY(tern_mmproj_locate(model_path, mmproj, "vision", "v.patch_embd.weight", &src, &file));
    tern_err *err = src == TERN_TOWER_MMPROJ   ? tern_image_input_load_gguf(file, out)
                    : src == TERN_TOWER_FOLDER ? tern_image_input_load(model_path, out)
                                               : NULL;
    free(file);
    return err;
}

/* The processor's settings: the budget, and the refusal of a normalization the tower does not apply. */
static TERN_MUST_CHECK tern_err *processor(const json_t *ip, tern_image_input *a) {
    int64_t budget;
    TERN_TRY(tern_json_get_int(ip, "max_soft_tokens", a->budget, 1, 1 << 20, &budget));
    if (!tern_vision_enc_budget_ok(a->enc, (int)budget))
        return tern_errf(TERN_EUNSUPPORTED, "max_soft_tokens %lld is not one the vision tower takes (nearest: %d)",
                         (long long)budget, tern_vision_enc_budget_nearest(a->enc, (int)budget));
    a->budget = (int)budget;
    int norm = 0;
    TERN_TRY(tern_json_get_bool(ip, "do_normalize", 0, &norm));
    const json_t *mean = json_object_get(ip, "image_mean"), *std = json_object_get(ip, "image_std");
    for (int c = 0; norm && c < 3; c++) {
        const double m = json_number_value(json_array_get(mean, (size_t)c));
        const double s = json_is_number(json_array_get(std, (size_t)c)) ? json_number_value(json_array_get(std, (size_t)c)) : 1;
        if (m != 0 || s != 1)
            return tern_errf(TERN_EUNSUPPORTED, "do_normalize with image_mean/image_std other than 0/1: the Gemma 4 "
                                                "processor's pixels are x/255 only");
    }
    double rescale = 1.0 / 255.0;
    TERN_TRY(tern_json_get_num(ip, "rescale_factor", rescale, &rescale));
    if (fabs(rescale * 255.0 - 1.0) > 1e-6)
        return tern_errf(TERN_EUNSUPPORTED, "rescale_factor %g: the processor's pixels are x/255", rescale);
    return NULL;
}

tern_err *tern_image_input_load(const char *dir, tern_image_input **out) {
    *out = NULL;
    tern_vision_enc *enc = NULL;
    tern_err *err = tern_vision_enc_load(dir, &enc);
    if (err || !enc)
        return err;
    tern_image_input *a = NULL;
    TERN_TRY(wrap(enc, &a));
    static const char *names[] = {"processor_config.json", "preprocessor_config.json"};
    for (size_t i = 0; i < 2 && !err; i++) {
        char *p = tern_path_join(dir, names[i]);
        if (!p) {
            err = tern_errf(TERN_ENOMEM, "out of memory");
            break;
        }
        if (tern_is_file(p)) {
            json_t *root = NULL;
            err = tern_json_load_file(p, 4u << 20, &root);
            const json_t *ip = i == 0 ? json_object_get(root, "image_processor") : root;
            const int found = json_is_object(ip);
            if (!err && found)
                err = processor(ip, a);
            if (err)
                err = tern_err_wrap(err, "%s", p);
            json_decref(root);
            if (!err && found) {
                free(p);
                break;
            }
        }
        free(p);
    }
    if (err) {
        tern_image_input_free(a);
        return err;
    }
    *out = a;
    return NULL;
}

void tern_image_input_free(tern_image_input *a) {
    if (!a)
        return;
    tern_vision_enc_free(a->enc);
    free(a);
}

int64_t tern_image_input_dim(const tern_image_input *a) { return tern_vision_enc_dim(a->enc); }

int tern_image_input_default_budget(const tern_image_input *a) { return a->budget; }

int tern_image_input_budget_nearest(const tern_image_input *a, int want) {
    return tern_vision_enc_budget_nearest(a->enc, want);
}

uint64_t tern_image_input_work_bytes(const tern_image_input *a) {
    /* The largest budget on a square image: its tokens, the pixels the tower reads and their source's. */
    const int budget = tern_vision_enc_budget_nearest(a->enc, 1 << 20);
    tern_vision_plan p = {0};
    tern_err *err = tern_vision_enc_plan(a->enc, 4096, 4096, budget, &p);
    tern_err_free(err);
    return (uint64_t)TERN_IMAGE_MAX_PIXELS * 3 + (uint64_t)p.w * (uint64_t)p.h * 3 +
           tern_vision_enc_work_bytes(a->enc, p.tokens) + p.tokens * (uint64_t)tern_vision_enc_dim(a->enc) * 4;
}

void tern_image_input_describe(const tern_image_input *a, char *buf, size_t len) {
    tern_vision_enc_describe(a->enc, buf, len);
}

tern_err *tern_image_input_embed_rgb(const tern_image_input *a, const tern_image *im, int budget, tern_pool *pool,
                                     tern_image_embeds *out) {
    memset(out, 0, sizeof *out);
    if (budget == 0)
        budget = a->budget;
    if (!tern_vision_enc_budget_ok(a->enc, budget))
        return tern_errf(TERN_EINVAL, "%d soft tokens per image is not a budget the vision tower takes (70, 140, 280, "
                         "560 or 1120; nearest %d)", budget, tern_vision_enc_budget_nearest(a->enc, budget));
    tern_vision_plan p;
    TERN_TRY(tern_vision_enc_plan(a->enc, im->w, im->h, budget, &p));
    tern_image sized = {0};
    const tern_image *src = im;
    if (p.w != im->w || p.h != im->h) {
        TERN_TRY(tern_image_resize_bicubic(im, p.w, p.h, &sized));
        src = &sized;
    }
    const int64_t dim = tern_vision_enc_dim(a->enc);
    float *rows = malloc(p.tokens * (size_t)dim * sizeof *rows);
    tern_err *err = rows ? tern_vision_enc_run(a->enc, pool, src->rgb, &p, rows)
                         : tern_errf(TERN_ENOMEM, "out of memory for %zu image embeddings", p.tokens);
    if (!err) {
        *out = (tern_image_embeds){.rows = rows, .n = p.tokens, .dim = dim, .w = im->w, .h = im->h, .rw = p.w,
                                   .rh = p.h, .budget = budget};
        out->hash = tern_hash64(src->rgb, (size_t)p.w * (size_t)p.h * 3, 0x696d616765000000ull ^ (uint64_t)budget);
    } else {
        free(rows);
    }
    tern_image_free(&sized);
    return err;
}

tern_err *tern_image_input_embed(const tern_image_input *a, const void *bytes, size_t len, int budget,
                                 tern_pool *pool, tern_image_embeds *out) {
    memset(out, 0, sizeof *out);
    tern_image im;
    TERN_TRY(tern_image_decode(bytes, len, &im));
    tern_err *err = tern_image_input_embed_rgb(a, &im, budget, pool, out);
    tern_image_free(&im);
    return err;
}

void tern_image_embeds_free(tern_image_embeds *e) {
    if (!e)
        return;
    free(e->rows);
    memset(e, 0, sizeof *e);
}
