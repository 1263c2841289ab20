/* resize.c — Pillow's bicubic resample (Resample.c in Pillow 9/10), reproduced to the byte because the Hugging Face
 * image processor that defines Gemma 4's pixels resizes with it.
 *
 * Each output pixel is a weighted sum of the input pixels within the filter's support around its centre; when
 * shrinking, the support widens by the scale so every input pixel contributes (antialiasing). Taps are computed in
 * double, normalised to sum 1, then rounded to 22-bit fixed point; each pass sums in integers from a half-unit
 * bias and clamps to 0..255, horizontal first into an 8-bit image of the rows the vertical pass reads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"

#define PRECISION_BITS (32 - 8 - 2)

/* Keys' cubic convolution with a = -0.5, support 2. */
static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* Taps of out_size outputs over in_size inputs: for output i, first input bounds[2i] and count bounds[2i+1], taps
 * kk[i * ksize ...] in fixed point. Returns ksize, or 0 when out of memory. */
static int taps(int in_size, int out_size, int **bounds_out, int32_t **kk_out) {
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 2.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = malloc((size_t)out_size * 2 * sizeof *bounds);
    int32_t *kk = malloc((size_t)out_size * (size_t)ksize * sizeof *kk);
    double *k = malloc((size_t)ksize * sizeof *k);
    if (!bounds || !kk || !k) {
        free(bounds);
        free(kk);
        free(k);
        return 0;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0)
            xmin = 0;
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) {
            k[x] = bicubic((x + xmin - center + 0.5) * ss);
            ww += k[x];
        }
        for (int x = 0; x < ksize; x++) {
            double v = x < xmax ? (ww != 0.0 ? k[x] / ww : k[x]) : 0.0;
            kk[(size_t)xx * ksize + x] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS))
                                               : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        bounds[2 * xx] = xmin;
        bounds[2 * xx + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *kk_out = kk;
    return ksize;
}

static uint8_t clip8(int32_t v) {
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

tern_err *tern_image_resize_bicubic(const tern_image *src, int w, int h, tern_image *out) {
    memset(out, 0, sizeof *out);
    if (w < 1 || h < 1 || src->w < 1 || src->h < 1)
        return tern_errf(TERN_EINVAL, "cannot resize a %d x %d image to %d x %d", src->w, src->h, w, h);
    int *bx = NULL, *by = NULL;
    int32_t *kx = NULL, *ky = NULL;
    int ksx = taps(src->w, w, &bx, &kx), ksy = ksx ? taps(src->h, h, &by, &ky) : 0;
    const int first = ksy ? by[0] : 0, last = ksy ? by[2 * h - 2] + by[2 * h - 1] : 0;
    /* The horizontal pass covers only the rows the vertical pass reads. */
    const int need_h = w != src->w, need_v = h != src->h, rows = need_h ? last - first : src->h;
    uint8_t *tmp = need_h ? malloc((size_t)w * (size_t)rows * 3) : NULL;
    out->rgb = malloc((size_t)w * (size_t)h * 3);
    tern_err *err = NULL;
    if (!ksy || (need_h && !tmp) || !out->rgb) {
        err = tern_errf(TERN_ENOMEM, "out of memory");
        goto done;
    }
    out->w = w;
    out->h = h;
    const uint8_t *mid = src->rgb; /* [rows][w][3] after the horizontal pass */
    int offset = 0;              /* the first source row `mid` holds */
    if (need_h) {
        for (int y = 0; y < rows; y++) {
            const uint8_t *in = src->rgb + (size_t)(y + first) * src->w * 3;
            uint8_t *o = tmp + (size_t)y * w * 3;
            for (int xx = 0; xx < w; xx++) {
                const int32_t *k = kx + (size_t)xx * ksx;
                for (int c = 0; c < 3; c++) {
                    int32_t ss = 1 << (PRECISION_BITS - 1);
                    for (int x = 0; x < bx[2 * xx + 1]; x++)
                        ss += in[(x + bx[2 * xx]) * 3 + c] * k[x];
                    o[xx * 3 + c] = clip8(ss);
                }
            }
        }
        mid = tmp;
        offset = first;
    }
    if (!need_v) {
        memcpy(out->rgb, mid, (size_t)w * h * 3); /* same height: the taps are the identity */
        goto done;
    }
    for (int yy = 0; yy < h; yy++) {
        const int32_t *k = ky + (size_t)yy * ksy;
        const int ymin = by[2 * yy] - offset, ymax = by[2 * yy + 1];
        uint8_t *o = out->rgb + (size_t)yy * w * 3;
        for (int i = 0; i < w * 3; i++) {
            int32_t ss = 1 << (PRECISION_BITS - 1);
            for (int y = 0; y < ymax; y++)
                ss += mid[(size_t)(y + ymin) * w * 3 + i] * k[y];
            o[i] = clip8(ss);
        }
    }
done:
    free(bx);
    free(by);
    free(kx);
    free(ky);
    free(tmp);
    if (err)
        tern_image_free(out);
    return err;
}
