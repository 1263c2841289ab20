/* header.c — an image's format and size from its first bytes (see image.h). The size decides whether the image
 * is decoded at all, so it is read from the format's own header here, before libav allocates anything. */
#include <string.h>

#include "image/image.h"

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static unsigned le16(const uint8_t *p) { return p[0] | (unsigned)p[1] << 8; }
static uint32_t le24(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16; }
static uint32_t le32(const uint8_t *p) { return le24(p) | (uint32_t)p[3] << 24; }

const char *tern_image_format_name(tern_image_format f) {
    switch (f) {
    case TERN_IMG_PNG: return "PNG";
    case TERN_IMG_JPEG: return "JPEG";
    case TERN_IMG_WEBP: return "WebP";
    case TERN_IMG_GIF: return "GIF";
    case TERN_IMG_BMP: return "BMP";
    default: return "unknown";
    }
}

const char *tern_image_supported_formats(void) { return "PNG, JPEG, WebP, GIF (first frame), BMP"; }

static TERN_MUST_CHECK tern_err *cut(const char *fmt) { return tern_errf(TERN_EFORMAT, "the %s header is cut short", fmt); }

/* Chunks up to the first IDAT: IHDR first, and an acTL before the image data marks an animated PNG. */
static TERN_MUST_CHECK tern_err *png(const uint8_t *d, size_t len, tern_image_header *h) {
    if (len < 24)
        return cut("PNG");
    if (be32(d + 8) != 13 || memcmp(d + 12, "IHDR", 4))
        return tern_errf(TERN_EFORMAT, "the PNG does not start with its IHDR chunk");
    h->w = (int)(be32(d + 16) > 0x7fffffff ? 0x7fffffff : be32(d + 16));
    h->h = (int)(be32(d + 20) > 0x7fffffff ? 0x7fffffff : be32(d + 20));
    for (size_t p = 8; p + 8 <= len;) {
        uint32_t n = be32(d + p);
        if (!memcmp(d + p + 4, "IDAT", 4))
            break;
        if (!memcmp(d + p + 4, "acTL", 4))
            h->animated = 1;
        if (n > len - p - 8 || len - p - 8 - n < 4)
            break; /* cut short: the decoder says what is wrong */
        p += 12 + (size_t)n;
    }
    return NULL;
}

/* Segments up to the first frame header (SOF0..SOF15 but DHT, JPG and DAC, which share the range). */
static TERN_MUST_CHECK tern_err *jpeg(const uint8_t *d, size_t len, tern_image_header *h) {
    size_t p = 2;
    for (;;) {
        while (p < len && d[p] != 0xFF)
            p++;
        while (p < len && d[p] == 0xFF)
            p++;
        if (p >= len)
            return cut("JPEG");
        uint8_t m = d[p++];
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8))
            continue; /* markers without a length */
        if (m == 0xD9 || m == 0xDA)
            return tern_errf(TERN_EFORMAT, "the JPEG has no frame header before its image data");
        if (p + 2 > len)
            return cut("JPEG");
        unsigned n = be16(d + p);
        if (n < 2)
            return tern_errf(TERN_EFORMAT, "the JPEG has a segment of length %u", n);
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (p + 7 > len)
                return cut("JPEG");
            h->h = (int)be16(d + p + 3);
            h->w = (int)be16(d + p + 5);
            if (h->h == 0)
                return tern_errf(TERN_EUNSUPPORTED, "the JPEG leaves its height to a later DNL marker, which is not "
                                                    "supported");
            return NULL;
        }
        p += n;
    }
}

static TERN_MUST_CHECK tern_err *webp(const uint8_t *d, size_t len, tern_image_header *h) {
    if (len < 30)
        return cut("WebP");
    if (!memcmp(d + 12, "VP8 ", 4)) {
        if (d[23] != 0x9d || d[24] != 0x01 || d[25] != 0x2a)
            return tern_errf(TERN_EFORMAT, "the WebP's VP8 frame has no start code");
        h->w = (int)(le16(d + 26) & 0x3fff);
        h->h = (int)(le16(d + 28) & 0x3fff);
    } else if (!memcmp(d + 12, "VP8L", 4)) {
        if (d[20] != 0x2f)
            return tern_errf(TERN_EFORMAT, "the WebP's lossless frame has no signature");
        uint32_t b = le32(d + 21);
        h->w = (int)(b & 0x3fff) + 1;
        h->h = (int)(b >> 14 & 0x3fff) + 1;
    } else if (!memcmp(d + 12, "VP8X", 4)) {
        h->animated = (d[20] & 0x02) != 0;
        h->w = (int)le24(d + 24) + 1;
        h->h = (int)le24(d + 27) + 1;
    } else {
        return tern_errf(TERN_EFORMAT, "the WebP's first chunk is '%.4s', not VP8, VP8L or VP8X", (const char *)d + 12);
    }
    return NULL;
}

static TERN_MUST_CHECK tern_err *bmp(const uint8_t *d, size_t len, tern_image_header *h) {
    if (len < 26)
        return cut("BMP");
    uint32_t dib = le32(d + 14);
    if (dib == 12) {
        h->w = (int)le16(d + 18);
        h->h = (int)le16(d + 20);
        return NULL;
    }
    int32_t w = (int32_t)le32(d + 18), hh = (int32_t)le32(d + 22);
    if (dib < 16 || w <= 0 || hh == INT32_MIN)
        return tern_errf(TERN_EFORMAT, "the BMP's header is not valid (header size %u, width %d)", (unsigned)dib, w);
    h->w = w;
    h->h = hh < 0 ? -hh : hh; /* negative: rows stored top-down */
    return NULL;
}

tern_err *tern_image_read_header(const void *data, size_t len, tern_image_header *out) {
    const uint8_t *d = data;
    memset(out, 0, sizeof *out);
    tern_err *err;
    if (len >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) {
        out->format = TERN_IMG_PNG;
        err = png(d, len, out);
    } else if (len >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
        out->format = TERN_IMG_JPEG;
        err = jpeg(d, len, out);
    } else if (len >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) {
        out->format = TERN_IMG_WEBP;
        err = webp(d, len, out);
    } else if (len >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6))) {
        out->format = TERN_IMG_GIF;
        err = len < 10 ? cut("GIF") : NULL;
        if (!err) {
            out->w = (int)le16(d + 6);
            out->h = (int)le16(d + 8);
        }
    } else if (len >= 2 && d[0] == 'B' && d[1] == 'M') {
        out->format = TERN_IMG_BMP;
        err = bmp(d, len, out);
    } else {
        return tern_errf(TERN_EUNSUPPORTED, "the bytes are not an image format this server reads (%s)",
                         tern_image_supported_formats());
    }
    if (!err && (out->w <= 0 || out->h <= 0))
        err = tern_errf(TERN_EFORMAT, "the %s says it is %d x %d pixels", tern_image_format_name(out->format), out->w,
                        out->h);
    return err;
}
