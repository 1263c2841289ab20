/* yuv.c — planar YUV to RGB the way the libraries behind Pillow do it, so a JPEG or lossy WebP decoded by libavcodec
 * gives the pixels Pillow would (see image.h).
 *
 * Subsampled chroma is brought to full size with libjpeg's "fancy" triangle upsampling (each output sample 3/4 of
 * the nearer input and 1/4 of the next, in both directions, edges replicated, libjpeg's rounding), then converted:
 * full-range (JPEG) with libjpeg's 16-bit fixed-point tables, limited-range (WebP's VP8) with libwebp's 14-bit
 * formulas. JPEG matches libjpeg-turbo exactly when the IDCT agrees; WebP to a level or two (libwebp's own
 * upsampler rounds its diagonals differently). */
#include <stdlib.h>
#include <string.h>

#include <libavutil/pixdesc.h>

#include "image/yuv.h"

/* One chroma plane [ch][cw] → [h][w] by libjpeg's h2v2 / h2v1 / h1v2 fancy upsampling (sx, sy: 0 or 1). */
static void upsample(const uint8_t *in, ptrdiff_t stride, int cw, int ch, int sx, int sy, int w, int h, uint8_t *out) {
    for (int y = 0; y < h; y++) {
        int r0 = y >> sy, r1 = r0;
        if (sy) /* the next nearest row: above for even rows, below for odd; replicated at the edges */
            r1 = y & 1 ? (r0 + 1 < ch ? r0 + 1 : r0) : (r0 > 0 ? r0 - 1 : 0);
        const uint8_t *a = in + r0 * stride, *b = in + r1 * stride;
        uint8_t *o = out + (size_t)y * w;
        for (int x = 0; x < w; x++) {
            int c = x >> sx;
            int col = sy ? a[c] * 3 + b[c] : a[c]; /* this column's vertical sum (x4 when sy) */
            if (!sx) {
                o[x] = (uint8_t)(sy ? (col + (y & 1 ? 2 : 1)) >> 2 : col);
                continue;
            }
            int n = x & 1 ? (c + 1 < cw ? c + 1 : c) : (c > 0 ? c - 1 : 0);
            int other = sy ? a[n] * 3 + b[n] : a[n];
            if (sy) /* h2v2: sums are x4, so >> 4 */
                o[x] = (uint8_t)((col * 3 + other + (x & 1 ? 7 : 8)) >> 4);
            else    /* h2v1 */
                o[x] = (uint8_t)((col * 3 + other + (x & 1 ? 2 : 1)) >> 2);
        }
    }
}

static uint8_t clamp8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

#define SCALEBITS 16
#define FIX(x) ((int32_t)((x) * (1L << SCALEBITS) + 0.5))
#define ONE_HALF ((int32_t)1 << (SCALEBITS - 1))

/* libjpeg's ycc_rgb_convert (jdcolor.c): JFIF full-range BT.601. */
static void jpeg_rgb(int y, int cb, int cr, uint8_t *o) {
    cb -= 128, cr -= 128;
    o[0] = clamp8(y + ((FIX(1.40200) * cr + ONE_HALF) >> SCALEBITS));
    o[1] = clamp8(y + ((-FIX(0.34414) * cb + ONE_HALF - FIX(0.71414) * cr) >> SCALEBITS));
    o[2] = clamp8(y + ((FIX(1.77200) * cb + ONE_HALF) >> SCALEBITS));
}

/* libwebp's VP8YUVToR/G/B (yuv.h): studio-range BT.601 in 14-bit fixed point. */
static int hi(int v, int coeff) { return (v * coeff) >> 8; }
static uint8_t webp_clip(int v) { return (uint8_t)((v & ~16383) == 0 ? v >> 6 : v < 0 ? 0 : 255); }
static void webp_rgb(int y, int u, int v, uint8_t *o) {
    o[0] = webp_clip(hi(y, 19077) + hi(v, 26149) - 14234);
    o[1] = webp_clip(hi(y, 19077) - hi(u, 6419) - hi(v, 13320) + 8708);
    o[2] = webp_clip(hi(y, 19077) + hi(u, 33050) - 17685);
}

int tern_yuv_to_rgba(const AVFrame *fr, uint8_t *rgba) {
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(fr->format);
    if (!d || !(d->flags & AV_PIX_FMT_FLAG_PLANAR) || (d->flags & AV_PIX_FMT_FLAG_RGB) || d->nb_components < 3 ||
        d->comp[0].depth != 8 || d->log2_chroma_w > 1 || d->log2_chroma_h > 1)
        return 0;
    const int w = fr->width, h = fr->height, sx = d->log2_chroma_w, sy = d->log2_chroma_h;
    const int cw = (w + sx) >> sx, ch = (h + sy) >> sy;
    const int full = fr->color_range == AVCOL_RANGE_JPEG || fr->format == AV_PIX_FMT_YUVJ420P ||
                     fr->format == AV_PIX_FMT_YUVJ422P || fr->format == AV_PIX_FMT_YUVJ444P ||
                     fr->format == AV_PIX_FMT_YUVJ440P;
    uint8_t *u = malloc((size_t)w * h), *v = malloc((size_t)w * h);
    if (!u || !v) {
        free(u);
        free(v);
        return -1;
    }
    upsample(fr->data[1], fr->linesize[1], cw, ch, sx, sy, w, h, u);
    upsample(fr->data[2], fr->linesize[2], cw, ch, sx, sy, w, h, v);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            int Y = fr->data[0][(ptrdiff_t)y * fr->linesize[0] + x];
            uint8_t *o = rgba + 4 * i;
            if (full)
                jpeg_rgb(Y, u[i], v[i], o);
            else
                webp_rgb(Y, u[i], v[i], o);
            o[3] = 255; /* alpha is dropped (decode.c) */
        }
    free(u);
    free(v);
    return 1;
}
