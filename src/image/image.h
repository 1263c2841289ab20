/* image.h — the image front end: bytes of a PNG, JPEG, WebP, GIF or BMP → 8-bit RGB pixels as the Hugging Face
 * image processors see them (Pillow's conversions), and Pillow's bicubic resize (GEMMA4.md §7).
 *
 * One job per file:
 *   header.c  the format and pixel size from the first bytes, before anything is decoded (bombs are refused here)
 *   decode.c  libavcodec's image decoders, in memory; EXIF orientation; alpha dropped as Pillow's convert("RGB")
 *   yuv.c     JPEG's and WebP's YUV to RGB as libjpeg and libwebp convert it
 *   resize.c  Pillow's separable bicubic resample, to the byte
 *
 * Input bytes are untrusted: every reader bound-checks, returns an error with the reason, never crashes, and no
 * allocation larger than the checked pixel size is made. */
#ifndef TERN_IMAGE_IMAGE_H
#define TERN_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define TERN_IMAGE_MAX_SIDE 16384            /* pixels, either side */
#define TERN_IMAGE_MAX_PIXELS (50u << 20)    /* width x height: larger is refused as a decompression bomb */

typedef enum tern_image_format {
    TERN_IMG_UNKNOWN = 0,
    TERN_IMG_PNG,
    TERN_IMG_JPEG,
    TERN_IMG_WEBP,
    TERN_IMG_GIF,
    TERN_IMG_BMP,
} tern_image_format;

/* 8-bit RGB pixels, rows top to bottom, [h][w][3]. */
typedef struct tern_image {
    uint8_t *rgb; /* malloc'd */
    int w, h;
} tern_image;

/* What the first bytes say: the format, the stored size, whether it moves. */
typedef struct tern_image_header {
    tern_image_format format;
    int w, h;     /* as stored, before EXIF orientation */
    int animated; /* an animated PNG or WebP (a GIF's first frame is its image) */
} tern_image_header;

/* Frees the pixels and zeroes; a zeroed struct is fine. */
void tern_image_free(tern_image *im);

/* The format's name ("PNG", …) and the list of supported formats, for messages. */
const char *tern_image_format_name(tern_image_format f);
const char *tern_image_supported_formats(void);

/* ---- header.c ----------------------------------------------------------------------------------------- */

/* Reads the format and size from the bytes' own headers (never from a declared type). TERN_EUNSUPPORTED naming the
 * supported formats when the bytes are none of them; TERN_EFORMAT when the header is cut short or inconsistent. */
TERN_MUST_CHECK tern_err *tern_image_read_header(const void *data, size_t len, tern_image_header *out);

/* ---- decode.c ----------------------------------------------------------------------------------------- */

/* Decodes one image (a GIF's first frame) to RGB: a size beyond TERN_IMAGE_MAX_SIDE / TERN_IMAGE_MAX_PIXELS and an
 * animated PNG or WebP are refused (TERN_EINVAL, with the numbers) before any pixel is decoded; a JPEG's EXIF
 * orientation is applied; an alpha channel is dropped (Pillow's convert("RGB"), what transformers does). Corrupt or
 * cut bytes: TERN_EFORMAT with libav's reason. */
TERN_MUST_CHECK tern_err *tern_image_decode(const void *data, size_t len, tern_image *out);

/* ---- resize.c ----------------------------------------------------------------------------------------- */

/* Resizes src to w x h (both >= 1) as Pillow's Image.resize(…, BICUBIC) does for RGB: separable, horizontal pass
 * first, filter support widened by the scale when shrinking, 22-bit fixed-point taps, each pass rounded and clamped
 * to 8 bits. out->rgb is malloc'd. */
TERN_MUST_CHECK tern_err *tern_image_resize_bicubic(const tern_image *src, int w, int h, tern_image *out);

#endif
