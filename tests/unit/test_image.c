/* test_image.c — the image front end against Pillow (tests/data/image, made by scripts/vision/image-goldens.py):
 * every format and pixel layout decodes to the bytes Pillow hands a Hugging Face processor (lossy formats within a
 * few levels: another decoder), JPEG EXIF orientation, alpha dropped as Pillow's convert("RGB") drops it, the bicubic resize byte for byte in every
 * direction; and the refusals: unknown bytes, cut and corrupt files, animations, a decompression bomb. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/fileio.h"
#include "image/image.h"
#include "testutil.h"

static unsigned char *slurp(const char *rel, size_t *len) {
    unsigned char *d = NULL;
    TU_OK(tern_read_file(tu_testdata(rel), 64u << 20, (char **)&d, len));
    return d;
}

static void decode_file(const char *name, tern_image *im) {
    char rel[256];
    snprintf(rel, sizeof rel, "image/%s", name);
    size_t len;
    unsigned char *d = slurp(rel, &len);
    TU_OK(tern_image_decode(d, len, im));
    free(d);
}

static void test_decode_matches_pillow(void **state) {
    json_error_t je;
    json_t *idx = json_load_file(tu_testdata("image/index.json"), 0, &je);
    assert_non_null(idx);
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(json_object_get(idx, "images"), i, e) {
        const char *name = json_string_value(json_object_get(e, "file"));
        tern_image im;
        decode_file(name, &im);
        char rel[256];
        snprintf(rel, sizeof rel, "image/%s.rgb", name);
        size_t len;
        unsigned char *want = slurp(rel, &len);
        if (im.w != json_integer_value(json_object_get(e, "width")) ||
            im.h != json_integer_value(json_object_get(e, "height")))
            fail_msg("%s: %d x %d, Pillow %lld x %lld", name, im.w, im.h,
                     (long long)json_integer_value(json_object_get(e, "width")),
                     (long long)json_integer_value(json_object_get(e, "height")));
        assert_int_equal(len, (size_t)im.w * im.h * 3);
        int worst = 0;
        double sum = 0;
        for (size_t k = 0; k < len; k++) {
            int d = abs((int)im.rgb[k] - (int)want[k]);
            worst = d > worst ? d : worst;
            sum += d;
        }
        print_message("%-22s %3d x %-3d max |diff| %3d, mean %.3f\n", name, im.w, im.h, worst, sum / (double)len);
        if (json_is_true(json_object_get(e, "lossy"))) {
            if (sum / (double)len > 0.25 || worst > 8)
                fail_msg("%s: a lossy decode should differ from Pillow's (another IDCT) by a level or two, rarely", name);
        } else if (worst) {
            fail_msg("%s: differs from Pillow's pixels", name);
        }
        free(want);
        tern_image_free(&im);
        n++;
    }
    assert_true(n >= 11);
    json_decref(idx);
}

static void test_resize_matches_pillow(void **state) {
    tern_image src;
    decode_file("photo.png", &src);
    static const int sizes[][2] = {{32, 48}, {150, 20}, {67, 90}, {7, 5}, {134, 45}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        tern_image out;
        TU_OK(tern_image_resize_bicubic(&src, w, h, &out));
        char rel[64];
        snprintf(rel, sizeof rel, "image/resize-%dx%d.rgb", w, h);
        size_t len;
        unsigned char *want = slurp(rel, &len);
        assert_int_equal(len, (size_t)w * h * 3);
        size_t bad = 0;
        for (size_t k = 0; k < len; k++)
            bad += out.rgb[k] != want[k];
        if (bad)
            fail_msg("resize to %d x %d: %zu of %zu bytes differ from Pillow's", w, h, bad, len);
        free(want);
        tern_image_free(&out);
    }
    tern_image same;
    TU_OK(tern_image_resize_bicubic(&src, src.w, src.h, &same));
    assert_memory_equal(same.rgb, src.rgb, (size_t)src.w * src.h * 3);
    tern_image_free(&same);
    TU_FAILS_WITH(tern_image_resize_bicubic(&src, 0, 5, &same), "cannot resize");
    tern_image_free(&src);
}

static void test_exif_orientation(void **state) {
    tern_image plain, rot;
    decode_file("photo.jpg", &plain);
    decode_file("rotated.jpg", &rot);
    /* Orientation 6: displayed turned 90 degrees clockwise, so the stored 67 x 45 shows as 45 x 67. */
    assert_int_equal(rot.w, plain.h);
    assert_int_equal(rot.h, plain.w);
    /* Output (x, y) is stored pixel (y, h - 1 - x): the same JPEG bytes, so the same decoded values. */
    for (int y = 0; y < rot.h; y++)
        for (int x = 0; x < rot.w; x++)
            assert_memory_equal(rot.rgb + ((size_t)y * rot.w + x) * 3,
                                plain.rgb + ((size_t)(plain.h - 1 - x) * plain.w + y) * 3, 3);
    tern_image_free(&plain);
    tern_image_free(&rot);
}

static void test_header_sizes(void **state) {
    static const struct {
        const char *file;
        tern_image_format f;
        int w, h;
    } cases[] = {{"photo.png", TERN_IMG_PNG, 67, 45},   {"photo.jpg", TERN_IMG_JPEG, 67, 45},
                 {"photo.webp", TERN_IMG_WEBP, 67, 45}, {"photo-lossless.webp", TERN_IMG_WEBP, 67, 45},
                 {"photo.gif", TERN_IMG_GIF, 67, 45},   {"photo.bmp", TERN_IMG_BMP, 67, 45},
                 {"rotated.jpg", TERN_IMG_JPEG, 67, 45}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "image/%s", cases[i].file);
        size_t len;
        unsigned char *d = slurp(rel, &len);
        tern_image_header h;
        TU_OK(tern_image_read_header(d, len, &h));
        assert_int_equal(h.format, cases[i].f);
        assert_int_equal(h.w, cases[i].w);
        assert_int_equal(h.h, cases[i].h);
        assert_false(h.animated);
        free(d);
    }
}

static void expect_refused(const char *file, const char *needle) {
    char rel[128];
    snprintf(rel, sizeof rel, "image/%s", file);
    size_t len;
    unsigned char *d = slurp(rel, &len);
    tern_image im;
    TU_FAILS_WITH(tern_image_decode(d, len, &im), needle);
    assert_null(im.rgb);
    free(d);
}

static void test_refusals(void **state) {
    expect_refused("animated.png", "PNG is animated");
    expect_refused("animated.webp", "WebP is animated");
    expect_refused("bomb.png", "30000 x 30000 pixels");
    tern_image im;
    TU_FAILS_WITH(tern_image_decode("hello, world", 12, &im), "not an image format");
    TU_FAILS_WITH(tern_image_decode("", 0, &im), "not an image format");
    TU_FAILS_WITH(tern_image_decode("GIF89a\x01", 7, &im), "cut short");
    /* Every prefix of every format is refused with a message or decodes; none crashes (ASan watches). */
    static const char *files[] = {"photo.png", "photo.jpg", "photo.webp", "photo-lossless.webp", "photo.gif",
                                  "photo.bmp", "palette.png"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "image/%s", files[f]);
        size_t len;
        unsigned char *d = slurp(rel, &len);
        for (size_t cut = 0; cut < len; cut += cut < 64 ? 1 : 97) {
            unsigned char *c = malloc(cut ? cut : 1);
            memcpy(c, d, cut);
            tern_err *err = tern_image_decode(c, cut, &im);
            if (err) {
                assert_true(strlen(tern_err_msg(err)) > 10);
                tern_err_free(err);
            } else {
                tern_image_free(&im);
            }
            free(c);
        }
        /* Corrupted image data: bytes flipped past the header. */
        for (size_t k = len / 3; k < len; k += 11)
            d[k] ^= 0x5a;
        tern_err *err = tern_image_decode(d, len, &im);
        if (err)
            tern_err_free(err);
        else
            tern_image_free(&im);
        free(d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_matches_pillow), cmocka_unit_test(test_resize_matches_pillow),
        cmocka_unit_test(test_exif_orientation),      cmocka_unit_test(test_header_sizes),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
