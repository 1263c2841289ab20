/* test_audio_tower.c — the Gemma 4 audio tower against an independent implementation: tests/data/audio holds the
 * tower of the shared audio-tiny model (2 conformer blocks, hidden 96, clipped linears; its text decoder left out),
 * one 1.3 s clip and the embeddings a numpy implementation of the Hugging Face semantics computes for it
 * (audio.json: max abs difference below 1e-3).
 *
 *   - `tern audio-embed` writes embeddings within 1e-3 of the golden, on every kernel path;
 *   - the same tower re-stored in mlx-vlm's layout (names without "model.", convolutions [out, kh, kw, in]) gives
 *     the same numbers, and with its linears MLX-quantized to 8 bits stays close to them;
 *   - the tower as llama.cpp's converter writes it to a GGUF multimodal projector (mmproj, tests/data/gguf) gives
 *     the same numbers; a folder holding a GGUF model and its projector loads as a model with audio;
 *   - a missing or mis-shaped tensor is an error naming it; a model without audio_config has no tower. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "core/json_util.h"
#include "formats/safetensors.h"
#include "loader/audio_input.h"
#include "loader/loader.h"
#include "tensor/quant_mlx.h"
#include "audio_testutil.h"
#include "testutil.h"

#define TOKENS 33
#define DIM 128

static float *golden(void) {
    char *buf;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("audio/audio-short.hf.emb.bin"), 1 << 20, &buf, &len));
    assert_int_equal(len, TOKENS * DIM * sizeof(float));
    return (float *)buf;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Embeds short.wav with the tower in dir. */
static void embed(const char *dir, tern_audio_embeds *e) {
    tern_audio_input *ai = NULL;
    TU_OK(tern_audio_input_load(dir, &ai));
    assert_non_null(ai);
    char *wav;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("audio/short.wav"), 1 << 20, &wav, &len));
    TU_OK(tern_audio_input_embed(ai, wav, len, 0, NULL, e));
    free(wav);
    tern_audio_input_free(ai);
    assert_int_equal(e->n, TOKENS);
    assert_int_equal(e->dim, DIM);
}

static void test_cli_matches_golden(void **state) {
    tern_isa isa = tu_isa_begin(state);
    (void)isa;
    const char *out = tu_tmpdir("audio_tower_cli");
    char *log = NULL, model[512];
    snprintf(model, sizeof model, "%s", tu_testdata("audio/audio-tiny"));
    int rc = tu_runf(&log, "TERN_ISA=%s %s audio-embed %s %s --out %s/emb.bin --threads 2", tern_isa_name(isa),
                     tu_tern_bin(), model, tu_testdata("audio/short.wav"), out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(log, "soft_tokens:  33 x 128"));
    free(log);
    char path[512], *buf;
    size_t len;
    snprintf(path, sizeof path, "%s/emb.bin", out);
    TU_OK(tern_read_file(path, 1 << 20, &buf, &len));
    assert_int_equal(len, TOKENS * DIM * sizeof(float));
    float *g = golden();
    double d = max_diff((float *)buf, g, TOKENS * DIM);
    printf("  audio-embed vs golden [%s]: max |diff| %.3g\n", tern_isa_name(isa), d);
    assert_true(d < 1e-3);
    free(buf);
    free(g);
}

/* The projector file llama.cpp's converter made of the same tower (per-dimension scales stored softplus'd, the
 * linears' names shortened, the depthwise taps flattened): the same embeddings; found beside a GGUF text model in a
 * folder, and named with --mmproj; a file without an audio tower says so. */
static void test_gguf_mmproj(void **state) {
    (void)state;
    tern_audio_input *ai = NULL;
    TU_OK(tern_audio_input_load_gguf(tu_testdata("gguf/mmproj-audio-tiny-f32.gguf"), &ai));
    char *wav;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("audio/short.wav"), 1 << 20, &wav, &len));
    tern_audio_embeds e = {0}, st = {0};
    TU_OK(tern_audio_input_embed(ai, wav, len, 0, NULL, &e));
    free(wav);
    tern_audio_input_free(ai);
    assert_int_equal(e.n, TOKENS);
    assert_int_equal(e.dim, DIM);
    embed(tu_testdata("audio/audio-tiny"), &st);
    float *g = golden();
    const double d = max_diff(e.rows, g, TOKENS * DIM), ds = max_diff(e.rows, st.rows, TOKENS * DIM);
    printf("  mmproj GGUF vs golden: max |diff| %.3g; vs the safetensors tower %.3g\n", d, ds);
    assert_true(d < 1e-3);
    assert_true(ds < 1e-4); /* only the scales' softplus, rounded once more to f32, differs */
    free(g);
    tern_audio_embeds_free(&e);
    tern_audio_embeds_free(&st);
    /* A folder of GGUF files: the text model and its projector (their widths agree: 128). */
    const char *dir = tu_tmpdir("gguf_mmproj_folder");
    char cmd[2048], *text = realpath(tu_testdata("gguf/tiny-v4096-f32.gguf"), NULL);
    char *proj = realpath(tu_testdata("gguf/mmproj-audio-tiny-f32.gguf"), NULL);
    assert_non_null(text);
    assert_non_null(proj);
    snprintf(cmd, sizeof cmd, "ln -sf %s %s/model.gguf && ln -sf %s %s/mmproj-audio.gguf", text, dir, proj, dir);
    free(text);
    free(proj);
    assert_int_equal(system(cmd), 0);
    tern_model *m = NULL;
    tern_model_opts mo = {.model_dir = dir, .threads = 1};
    TU_OK(tern_model_load(&mo, &m));
    tern_model_info info;
    tern_model_get_info(m, &info);
    assert_true(info.audio);
    tern_model_free(m);
    /* The text file alone has no tower; with --mmproj it has. */
    char *text_file = strdup(tu_testdata("gguf/tiny-v4096-f32.gguf"));
    mo.model_dir = text_file;
    TU_OK(tern_model_load(&mo, &m));
    tern_model_get_info(m, &info);
    assert_false(info.audio);
    tern_model_free(m);
    mo.mmproj_path = tu_testdata("gguf/mmproj-audio-tiny-f32.gguf");
    TU_OK(tern_model_load(&mo, &m));
    tern_model_get_info(m, &info);
    assert_true(info.audio);
    tern_model_free(m);
    free(text_file);
    TU_FAILS_WITH(tern_audio_input_load_gguf(tu_testdata("gguf/tiny-v4096-q8_0.gguf"), &ai),
                  "no audio tower in this file (no clip.audio.projector_type)");
}

/* Rewrites the tower in mlx-vlm's layout into dir; with bits > 0 the linears become MLX affine (group 32), with
 * bits < 0 they are -bits affine codes turned back into float32 (the same values the quantized copy holds). */
static void write_mlx_copy(const char *dir, int bits) {
    int dequant = bits < 0;
    bits = abs(bits);
    tern_checkpoint *ck;
    TU_OK(tern_checkpoint_open(tu_testdata("audio/audio-tiny"), &ck));
    size_t n = tern_checkpoint_count(ck);
    tern_st_spec *specs = calloc(3 * n, sizeof *specs);
    char (*names)[200] = calloc(3 * n, sizeof *names);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        const tern_tensor *t = tern_checkpoint_at(ck, i);
        const char *rel = t->name + strlen("model.");
        int linear = t->ndim == 2 && strstr(rel, ".weight") && !strstr(rel, "conv");
        tern_st_spec s = {.name = names[ns], .dtype = t->dtype, .ndim = t->ndim};
        memcpy(s.shape, t->shape, sizeof s.shape);
        if (strstr(rel, "conv.weight")) { /* [out, in, kh, kw] -> [out, kh, kw, in] */
            s.shape[1] = t->shape[2], s.shape[2] = t->shape[3], s.shape[3] = t->shape[1];
        } else if (strstr(rel, "depthwise_conv1d")) { /* [D, 1, k] -> [D, k, 1] */
            s.shape[1] = t->shape[2], s.shape[2] = 1;
        }
        snprintf(names[ns], sizeof names[ns], "%s", rel);
        if (linear && bits && !dequant) {
            int64_t rows = t->shape[0], in = t->shape[1];
            s.dtype = TERN_DT_U32;
            s.shape[1] = tern_mlx_row_words(in, bits);
            specs[ns++] = s;
            for (int k = 0; k < 2; k++) {
                size_t base = strlen(rel) - strlen("weight");
                snprintf(names[ns], sizeof names[ns], "%.*s%s", (int)base, rel, k ? "biases" : "scales");
                specs[ns] = (tern_st_spec){.name = names[ns], .dtype = TERN_DT_F32, .ndim = 2, .shape = {rows, in / 32}};
                ns++;
            }
            continue;
        }
        specs[ns++] = s;
    }
    char path[512];
    TU_OK(tern_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tern_st_writer *w;
    TU_OK(tern_st_writer_open(path, specs, ns, NULL, &w));
    for (size_t i = 0; i < n; i++) {
        const tern_tensor *t = tern_checkpoint_at(ck, i);
        const char *rel = t->name + strlen("model.");
        const float *x = t->data;
        assert_int_equal(t->dtype, TERN_DT_F32);
        int linear = t->ndim == 2 && strstr(rel, ".weight") && !strstr(rel, "conv");
        if (strstr(rel, "conv.weight")) {
            int64_t co = t->shape[0], ci = t->shape[1];
            float *y = malloc(t->nbytes);
            for (int64_t o = 0; o < co; o++)
                for (int64_t c = 0; c < ci; c++)
                    for (int k = 0; k < 9; k++)
                        y[(o * 9 + k) * ci + c] = x[(o * ci + c) * 9 + k];
            TU_OK(tern_st_writer_write(w, y, t->nbytes));
            free(y);
        } else if (linear && bits) {
            int64_t rows = t->shape[0], in = t->shape[1], words = tern_mlx_row_words(in, bits);
            uint32_t *q = malloc((size_t)(rows * words) * 4);
            float *sc = malloc((size_t)(rows * in / 32) * 4), *bi = malloc((size_t)(rows * in / 32) * 4);
            for (int64_t r = 0; r < rows; r++)
                tern_mlx_quantize_row(x + r * in, in, bits, 32, TERN_DT_F32, q + r * words, sc + r * in / 32,
                                      bi + r * in / 32);
            if (dequant) {
                float *y = malloc((size_t)(rows * in) * 4);
                for (int64_t r = 0; r < rows; r++)
                    tern_mlx_dequantize_row(q + r * words, sc + r * in / 32, bi + r * in / 32, TERN_DT_F32, bits, 32,
                                            in, y + r * in);
                TU_OK(tern_st_writer_write(w, y, (size_t)(rows * in) * 4));
                free(y);
            } else {
                TU_OK(tern_st_writer_write(w, q, (size_t)(rows * words) * 4));
                TU_OK(tern_st_writer_write(w, sc, (size_t)(rows * in / 32) * 4));
                TU_OK(tern_st_writer_write(w, bi, (size_t)(rows * in / 32) * 4));
            }
            free(q), free(sc), free(bi);
        } else {
            TU_OK(tern_st_writer_write(w, t->data, t->nbytes));
        }
    }
    TU_OK(tern_st_writer_close(w));
    tern_checkpoint_close(ck);
    free(specs);
    free(names);
    json_t *cfg;
    TU_OK(tern_json_load_file(tu_testdata("audio/audio-tiny/config.json"), 1 << 20, &cfg));
    if (bits && !dequant)
        json_object_set_new(cfg, "quantization", json_pack("{s:i,s:i}", "group_size", 32, "bits", bits));
    snprintf(path, sizeof path, "%s/config.json", dir);
    TU_OK(tern_json_save_file(cfg, path));
    json_decref(cfg);
}

static double rel_rms(const float *a, const float *ref, size_t n) {
    double se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        se += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        sr += (double)ref[i] * ref[i];
    }
    return sqrt(se / sr);
}

/* The portable kernels multiply MLX codes exactly as their float32 values; the SIMD ones quantize the activations
 * to int8 as they do for the text model, which this random tower amplifies to a few percent. */
static void test_mlx_layouts(void **state) {
    tern_isa isa = tu_isa_begin(state);
    float *g = golden();
    tern_audio_embeds hf = {0}, mlx = {0}, q8 = {0}, dq = {0};
    embed(tu_testdata("audio/audio-tiny"), &hf);
    char d1[512], d2[512], d3[512];
    snprintf(d1, sizeof d1, "%s", tu_tmpdir("audio_tower_mlx"));
    snprintf(d2, sizeof d2, "%s", tu_tmpdir("audio_tower_mlx_q8"));
    snprintf(d3, sizeof d3, "%s", tu_tmpdir("audio_tower_mlx_q8_f32"));
    write_mlx_copy(d1, 0);
    write_mlx_copy(d2, 8);
    write_mlx_copy(d3, -8);
    embed(d1, &mlx);
    embed(d2, &q8);
    embed(d3, &dq);
    assert_memory_equal(hf.rows, mlx.rows, TOKENS * DIM * sizeof(float));
    assert_int_equal(hf.hash, mlx.hash);
    double kern = rel_rms(q8.rows, dq.rows, TOKENS * DIM), quant = rel_rms(dq.rows, g, TOKENS * DIM);
    printf("  [%s] mlx-vlm layout identical; 8-bit codes as float32 vs golden: relative RMS %.3g; the q8 kernels vs "
           "those: %.3g (max |diff| %.3g)\n",
           tern_isa_name(isa), quant, kern, max_diff(q8.rows, dq.rows, TOKENS * DIM));
    assert_true(quant > 0 && quant < 0.03); /* the codes were really used, and are close */
    if (isa == TERN_ISA_PORTABLE)
        assert_true(max_diff(q8.rows, dq.rows, TOKENS * DIM) < 1e-4);
    else
        assert_true(kern < 0.05);
    tern_audio_embeds_free(&hf);
    tern_audio_embeds_free(&mlx);
    tern_audio_embeds_free(&q8);
    tern_audio_embeds_free(&dq);
    free(g);
}

/* A copy of the tower's config with one tensor renamed or cut: errors name it. */
static void test_bad_checkpoints(void **state) {
    const char *dir = tu_tmpdir("audio_tower_bad");
    tern_checkpoint *ck;
    TU_OK(tern_checkpoint_open(tu_testdata("audio/audio-tiny"), &ck));
    size_t n = tern_checkpoint_count(ck);
    for (int variant = 0; variant < 2; variant++) {
        tern_st_spec *specs = calloc(n, sizeof *specs);
        char (*names)[200] = calloc(n, sizeof *names);
        for (size_t i = 0; i < n; i++) {
            const tern_tensor *t = tern_checkpoint_at(ck, i);
            snprintf(names[i], sizeof names[i], "%s", t->name);
            specs[i] = (tern_st_spec){.name = names[i], .dtype = t->dtype, .ndim = t->ndim};
            memcpy(specs[i].shape, t->shape, sizeof specs[i].shape);
            if (!strcmp(t->name, "model.audio_tower.layers.1.self_attn.k_proj.linear.weight")) {
                if (variant == 0)
                    snprintf(names[i], sizeof names[i], "model.audio_tower.layers.1.self_attn.k_proj.linear.weigh");
                else
                    specs[i].shape[0] -= 1;
            }
        }
        char path[512];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        tern_st_writer *w;
        TU_OK(tern_st_writer_open(path, specs, n, NULL, &w));
        for (size_t i = 0; i < n; i++) {
            const tern_tensor *t = tern_checkpoint_at(ck, i);
            size_t nb = t->nbytes;
            if (variant == 1 && !strcmp(t->name, "model.audio_tower.layers.1.self_attn.k_proj.linear.weight"))
                nb -= (size_t)t->shape[1] * 4;
            TU_OK(tern_st_writer_write(w, t->data, nb));
        }
        TU_OK(tern_st_writer_close(w));
        free(specs);
        free(names);
        char cfg[512];
        snprintf(cfg, sizeof cfg, "cp %s %s/config.json", tu_testdata("audio/audio-tiny/config.json"), dir);
        assert_int_equal(tu_run(cfg, NULL), 0);
        tern_audio_input *ai = NULL;
        TU_FAILS_WITH(tern_audio_input_load(dir, &ai), variant == 0 ? "missing: model.audio_tower.layers.1.self_attn.k_proj.linear.weight"
                                                                  : "mis-shaped: model.audio_tower.layers.1.self_attn.k_proj.linear.weight");
        assert_null(ai);
    }
    tern_checkpoint_close(ck);
    /* A text-only model has no tower, and that is not an error. */
    tern_audio_input *ai = (tern_audio_input *)1;
    TU_OK(tern_audio_input_load(tu_testdata("oracle/tiny-v4096-f32"), &ai));
    assert_null(ai);
}

/* Clips too short for one frame are refused; the soft-token count is the front end's, and longer input is cut at
 * 30 s with the count capped at 750. */
static void test_lengths(void **state) {
    tern_audio_input *ai = NULL;
    TU_OK(tern_audio_input_load(tu_testdata("audio/audio-tiny"), &ai));
    float *x = calloc(TERN_AUDIO_MAX_SAMPLES + 16000, sizeof *x);
    for (size_t i = 0; i < TERN_AUDIO_MAX_SAMPLES + 16000; i++)
        x[i] = 0.3f * sinf((float)i * 0.05f);
    tern_audio_embeds e = {0};
    TU_FAILS_WITH(tern_audio_input_embed_pcm(ai, x, 160, NULL, &e), "too short");
    static const size_t lens[] = {161, 641, 16000, 48000 + 7};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        TU_OK(tern_audio_input_embed_pcm(ai, x, lens[i], NULL, &e));
        assert_int_equal(e.n, tern_audio_soft_tokens(tern_logmel_valid_frames(lens[i])));
        assert_int_equal(e.n, tern_audio_input_tokens(ai, lens[i]));
        for (size_t k = 0; k < e.n * (size_t)e.dim; k++)
            assert_true(isfinite(e.rows[k]));
        tern_audio_embeds_free(&e);
    }
    TU_OK(tern_audio_input_embed_pcm(ai, x, TERN_AUDIO_MAX_SAMPLES + 16000, NULL, &e));
    assert_int_equal(e.n, TERN_AUDIO_MAX_SOFT_TOKENS);
    assert_int_equal(e.samples, TERN_AUDIO_MAX_SAMPLES);
    assert_int_equal(e.total_samples, TERN_AUDIO_MAX_SAMPLES + 16000);
    tern_audio_embeds_free(&e);
    free(x);
    tern_audio_input_free(ai);
}

/* A 65 s clip (FLAC at 44.1 kHz: the container and resampling paths): truncated at 30 s by default, in three 30 s
 * windows (750 + 750 + the last 5 s) on request, each window encoded on its own. */
static void test_windows(void **state) {
    const int rate = 44100;
    const size_t frames = (size_t)rate * 65;
    float *x = malloc(frames * sizeof *x);
    for (size_t i = 0; i < frames; i++)
        x[i] = 0.3f * sinf((float)i * 0.03f) * (i / rate % 2 ? 1.0f : 0.2f);
    size_t len;
    uint8_t *flac = atu_libav_encode("flac", "flac", rate, 1, x, frames, 0, &len);
    free(x);
    tern_audio_input *ai = NULL;
    TU_OK(tern_audio_input_load(tu_testdata("audio/audio-tiny"), &ai));
    tern_audio_embeds *w = NULL;
    int n = 0;
    TU_OK(tern_audio_input_embed_windows(ai, flac, len, 0, 1, NULL, &w, &n));
    assert_int_equal(n, 1);
    assert_int_equal(w[0].n, TERN_AUDIO_MAX_SOFT_TOKENS);
    tern_audio_embeds first = w[0];
    free(w);
    TU_OK(tern_audio_input_embed_windows(ai, flac, len, 0, 8, NULL, &w, &n));
    assert_int_equal(n, 3);
    assert_int_equal(w[0].n, TERN_AUDIO_MAX_SOFT_TOKENS);
    assert_int_equal(w[1].n, TERN_AUDIO_MAX_SOFT_TOKENS);
    assert_int_equal(w[2].n, tern_audio_input_tokens(ai, 5 * TERN_AUDIO_RATE));
    assert_int_equal(w[2].total_samples, 65 * TERN_AUDIO_RATE);
    /* The first window is the truncated clip; the windows differ from each other. */
    assert_memory_equal(w[0].rows, first.rows, first.n * (size_t)first.dim * sizeof(float));
    assert_int_equal(w[0].hash, first.hash);
    assert_true(w[0].hash != w[1].hash && w[1].hash != w[2].hash);
    for (int i = 0; i < n; i++)
        tern_audio_embeds_free(&w[i]);
    free(w);
    tern_audio_embeds_free(&first);
    free(flac);
    tern_audio_input_free(ai);
}

/* Splicing: each marker becomes its items' runs (start, one placeholder per soft token, end), spans point at the
 * placeholders in prompt order across kinds; each kind's marker count must match. */
static void test_splice(void **state) {
    enum { M = 9, S = 7, E = 8, IM = 19, IS = 17, IE = 18 };
    float rows[6] = {0};
    const tern_prompt_embeds clips[3] = {{.rows = rows, .n = 2, .key = 11}, {.rows = rows, .n = 1, .key = 12},
                                         {.rows = rows, .n = 3, .key = 13}};
    const tern_prompt_embeds images[2] = {{.rows = rows, .n = 1, .key = 21}, {.rows = rows, .n = 2, .key = 22}};
    const int32_t ids[] = {1, M, IM, 2, M, 3, IM};
    const int groups[] = {1, 2};
    tern_splice_kind kinds[2] = {
        {.marker = M, .start = S, .end = E, .items = clips, .n_items = 3, .groups = groups, .n_groups = 2,
         .what = "audio"},
        {.marker = IM, .start = IS, .end = IE, .items = images, .n_items = 2, .what = "image"}};
    int32_t *out;
    size_t n;
    tern_prompt_embeds spans[5];
    TU_OK(tern_media_splice(ids, 7, kinds, 2, &out, &n, spans));
    const int32_t want[] = {1, S, M, M, E, IS, IM, IE, 2, S, M, E, S, M, M, M, E, 3, IS, IM, IM, IE};
    assert_int_equal(n, sizeof want / sizeof *want);
    assert_memory_equal(out, want, sizeof want);
    const int64_t pos[] = {2, 6, 10, 13, 19}, len[] = {2, 1, 1, 3, 2};
    const uint64_t key[] = {11, 21, 12, 13, 22};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(spans[i].pos, pos[i]);
        assert_int_equal(spans[i].n, len[i]);
        assert_int_equal(spans[i].key, key[i]);
    }
    free(out);
    kinds[0].groups = NULL;
    TU_FAILS_WITH(tern_media_splice(ids, 7, kinds, 2, &out, &n, spans), "2 audio markers for 3");
    kinds[0].groups = groups;
    kinds[1].n_items = 1;
    TU_FAILS_WITH(tern_media_splice(ids, 7, kinds, 2, &out, &n, spans), "2 image markers for 1");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_ISA_TESTS(test_cli_matches_golden),
        TU_ISA_TESTS(test_mlx_layouts),
        cmocka_unit_test(test_gguf_mmproj),
        cmocka_unit_test(test_bad_checkpoints),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_splice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
