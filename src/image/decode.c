/* decode.c — one image to RGB through libavcodec's own decoders, as Pillow would hand it to a Hugging Face image
 * processor (see image.h).
 *
 * No demuxer: the format is sniffed from the header (header.c) and the whole file goes to that codec as one packet,
 * so nothing can reference another file or stream. The size is checked before decoding and again by libavcodec
 * (max_pixels), so a bomb is refused before its pixels are allocated. The common 8-bit layouts are converted here
 * byte for byte (gray, palette, RGB/BGR with or without alpha, and the high byte of 16-bit PNG samples, which is
 * what Pillow keeps); JPEG's and WebP's YUV as libjpeg and libwebp convert it (yuv.c); anything else through
 * libswscale. Alpha is dropped, keeping the colour stored under it: transformers' load_image and convert_to_rgb are
 * Pillow's convert("RGB"), which does exactly that (no compositing on a background). */
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "core/av_log.h"
#include "image/image.h"
#include "image/yuv.h"

void tern_image_free(tern_image *im) {
    if (!im)
        return;
    free(im->rgb);
    memset(im, 0, sizeof *im);
}

static TERN_MUST_CHECK tern_err *check_size(tern_image_format f, int w, int h) {
    if (w > TERN_IMAGE_MAX_SIDE || h > TERN_IMAGE_MAX_SIDE || (uint64_t)w * (uint64_t)h > TERN_IMAGE_MAX_PIXELS)
        return tern_errf(TERN_EINVAL, "the %s is %d x %d pixels; at most %d pixels a side and %u megapixels are "
                         "decoded", tern_image_format_name(f), w, h, TERN_IMAGE_MAX_SIDE, TERN_IMAGE_MAX_PIXELS >> 20);
    return NULL;
}

static TERN_MUST_CHECK tern_err *av_fail(int rc, tern_image_format f) {
    char msg[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(rc, msg, sizeof msg);
    return rc == AVERROR(ENOMEM) ? tern_errf(TERN_ENOMEM, "out of memory")
                                 : tern_errf(TERN_EFORMAT, "the %s could not be decoded: %s", tern_image_format_name(f),
                                             msg);
}

/* Layouts converted here: byte offsets of r, g, b within a pixel of `step` bytes (16-bit samples are big-endian:
 * the offset of their high byte); gray when g < 0. Alpha is dropped, as Pillow's convert("RGB") drops it. */
typedef struct layout {
    enum AVPixelFormat fmt;
    int step, r, g, b;
} layout;

static const layout layouts[] = {
    {AV_PIX_FMT_RGB24, 3, 0, 1, 2},   {AV_PIX_FMT_BGR24, 3, 2, 1, 0},
    {AV_PIX_FMT_RGBA, 4, 0, 1, 2},     {AV_PIX_FMT_BGRA, 4, 2, 1, 0},
    {AV_PIX_FMT_ARGB, 4, 1, 2, 3},     {AV_PIX_FMT_ABGR, 4, 3, 2, 1},
    {AV_PIX_FMT_RGB0, 4, 0, 1, 2},    {AV_PIX_FMT_BGR0, 4, 2, 1, 0},
    {AV_PIX_FMT_0RGB, 4, 1, 2, 3},    {AV_PIX_FMT_0BGR, 4, 3, 2, 1},
    {AV_PIX_FMT_GRAY8, 1, 0, -1, 0},  {AV_PIX_FMT_YA8, 2, 0, -1, 0},
    {AV_PIX_FMT_RGB48BE, 6, 0, 2, 4}, {AV_PIX_FMT_RGBA64BE, 8, 0, 2, 4},
    {AV_PIX_FMT_GRAY16BE, 2, 0, -1, 0}, {AV_PIX_FMT_YA16BE, 4, 0, -1, 0},
};

static void convert_direct(const AVFrame *fr, const layout *L, uint8_t *rgb) {
    for (int y = 0; y < fr->height; y++) {
        const uint8_t *s = fr->data[0] + (ptrdiff_t)y * fr->linesize[0];
        uint8_t *o = rgb + (size_t)y * (size_t)fr->width * 3;
        for (int x = 0; x < fr->width; x++, s += L->step, o += 3) {
            o[0] = s[L->r];
            o[1] = L->g < 0 ? s[L->r] : s[L->g];
            o[2] = L->g < 0 ? s[L->r] : s[L->b];
        }
    }
}

/* PAL8: data[1] holds 256 native-endian 0xAARRGGBB entries. */
static void convert_palette(const AVFrame *fr, uint8_t *rgb) {
    const uint32_t *pal = (const uint32_t *)fr->data[1];
    for (int y = 0; y < fr->height; y++) {
        const uint8_t *s = fr->data[0] + (ptrdiff_t)y * fr->linesize[0];
        uint8_t *o = rgb + (size_t)y * (size_t)fr->width * 3;
        for (int x = 0; x < fr->width; x++, o += 3) {
            uint32_t c = pal[s[x]];
            o[0] = (uint8_t)(c >> 16), o[1] = (uint8_t)(c >> 8), o[2] = (uint8_t)c;
        }
    }
}

static TERN_MUST_CHECK tern_err *convert_scaled(const AVFrame *fr, uint8_t *rgb) {
    const int w = fr->width, h = fr->height;
    uint8_t *rgba = malloc((size_t)w * (size_t)h * 4);
    int done = rgba ? tern_yuv_to_rgba(fr, rgba) : -1;
    struct SwsContext *sws = done ? NULL : sws_getContext(w, h, fr->format, w, h, AV_PIX_FMT_RGBA,
                                                          SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL,
                                                          NULL, NULL);
    tern_err *err = NULL;
    if (done < 0)
        err = tern_errf(TERN_ENOMEM, "out of memory");
    else if (!done && !sws)
        err = tern_errf(TERN_EUNSUPPORTED, "the image's pixel format %s cannot be converted to RGB",
                        av_get_pix_fmt_name(fr->format));
    if (!err) {
        uint8_t *dst[4] = {rgba};
        int stride[4] = {w * 4};
        if (!done)
            sws_scale(sws, (const uint8_t *const *)fr->data, fr->linesize, 0, h, dst, stride);
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
            memcpy(rgb + 3 * i, rgba + 4 * i, 3);
    }
    sws_freeContext(sws);
    free(rgba);
    return err;
}

/* EXIF orientation (2..8) applied as Pillow's ImageOps.exif_transpose does: flips, rotations, (trans)positions. */
static TERN_MUST_CHECK tern_err *orient(tern_image *im, int o) {
    if (o < 2 || o > 8)
        return NULL;
    const int w = im->w, h = im->h, swap = o >= 5;
    const int ow = swap ? h : w, oh = swap ? w : h;
    uint8_t *out = malloc((size_t)w * (size_t)h * 3);
    if (!out)
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - ox, sy = oy; break;
            case 3: sx = w - 1 - ox, sy = h - 1 - oy; break;
            case 4: sx = ox, sy = h - 1 - oy; break;
            case 5: sx = oy, sy = ox; break;
            case 6: sx = oy, sy = h - 1 - ox; break;
            case 7: sx = w - 1 - oy, sy = h - 1 - ox; break;
            default: sx = w - 1 - oy, sy = ox; break;
            }
            memcpy(out + ((size_t)oy * ow + ox) * 3, im->rgb + ((size_t)sy * w + sx) * 3, 3);
        }
    free(im->rgb);
    im->rgb = out;
    im->w = ow;
    im->h = oh;
    return NULL;
}

static int exif_orientation(const AVFrame *fr) {
    const AVDictionaryEntry *e = av_dict_get(fr->metadata, "Orientation", NULL, 0);
    if (!e)
        return 1;
    char *end;
    long v = strtol(e->value, &end, 10);
    return end != e->value && v >= 1 && v <= 8 ? (int)v : 1;
}

static enum AVCodecID codec_of(tern_image_format f) {
    switch (f) {
    case TERN_IMG_PNG: return AV_CODEC_ID_PNG;
    case TERN_IMG_JPEG: return AV_CODEC_ID_MJPEG;
    case TERN_IMG_WEBP: return AV_CODEC_ID_WEBP;
    case TERN_IMG_GIF: return AV_CODEC_ID_GIF;
    case TERN_IMG_BMP: return AV_CODEC_ID_BMP;
    default: return AV_CODEC_ID_NONE;
    }
}

/* The first frame the codec makes of the whole file as one packet. */
static TERN_MUST_CHECK tern_err *decode_frame(const void *data, size_t len, tern_image_format f, AVFrame *fr) {
    const AVCodec *codec = avcodec_find_decoder(codec_of(f));
    if (!codec)
        return tern_errf(TERN_EUNSUPPORTED, "this build's libavcodec has no %s decoder", tern_image_format_name(f));
    if (len > INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE)
        return tern_errf(TERN_EINVAL, "the image file is too large");
    AVCodecContext *dec = avcodec_alloc_context3(codec);
    AVPacket *pkt = av_packet_alloc();
    tern_err *err = NULL;
    int rc = 0;
    if (!dec || !pkt || av_new_packet(pkt, (int)len) < 0) {
        err = tern_errf(TERN_ENOMEM, "out of memory");
        goto done;
    }
    memcpy(pkt->data, data, len);
    dec->max_pixels = TERN_IMAGE_MAX_PIXELS;
    dec->thread_count = 1;
    dec->idct_algo = FF_IDCT_INT; /* the IJG integer IDCT: the one libjpeg (Pillow's decoder) runs */
    if ((rc = avcodec_open2(dec, codec, NULL)) < 0 || (rc = avcodec_send_packet(dec, pkt)) < 0) {
        err = av_fail(rc, f);
        goto done;
    }
    rc = avcodec_receive_frame(dec, fr);
    if (rc == AVERROR(EAGAIN)) { /* a decoder that holds the frame until it is told the stream ended */
        avcodec_send_packet(dec, NULL);
        rc = avcodec_receive_frame(dec, fr);
    }
    if (rc < 0)
        err = rc == AVERROR_EOF ? tern_errf(TERN_EFORMAT, "the %s holds no image", tern_image_format_name(f))
                                : av_fail(rc, f);
done:
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    return err;
}

tern_err *tern_image_decode(const void *data, size_t len, tern_image *out) {
    memset(out, 0, sizeof *out);
    tern_image_header hd;
    TERN_TRY(tern_image_read_header(data, len, &hd));
    TERN_TRY(check_size(hd.format, hd.w, hd.h));
    if (hd.animated)
        return tern_errf(TERN_EINVAL, "the %s is animated; send a single frame (PNG, JPEG or a still WebP)",
                         tern_image_format_name(hd.format));
    tern_av_log_route();
    AVFrame *fr = av_frame_alloc();
    if (!fr)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *err = decode_frame(data, len, hd.format, fr);
    if (!err)
        err = check_size(hd.format, fr->width, fr->height);
    if (!err && (fr->width <= 0 || fr->height <= 0))
        err = tern_errf(TERN_EFORMAT, "the %s decoded to no pixels", tern_image_format_name(hd.format));
    if (!err && !(out->rgb = malloc((size_t)fr->width * (size_t)fr->height * 3)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err) {
        out->w = fr->width;
        out->h = fr->height;
        const layout *L = NULL;
        for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
            if (layouts[i].fmt == fr->format)
                L = &layouts[i];
        if (L)
            convert_direct(fr, L, out->rgb);
        else if (fr->format == AV_PIX_FMT_PAL8)
            convert_palette(fr, out->rgb);
        else
            err = convert_scaled(fr, out->rgb);
    }
    if (!err && hd.format == TERN_IMG_JPEG)
        err = orient(out, exif_orientation(fr));
    av_frame_free(&fr);
    if (err)
        tern_image_free(out);
    return err;
}
