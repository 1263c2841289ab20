/* yuv.h — planar YUV frames to RGBA as libjpeg (full range) and libwebp (limited range) convert them (yuv.c). */
#ifndef TERN_IMAGE_YUV_H
#define TERN_IMAGE_YUV_H

#include <stdint.h>

#include <libavutil/frame.h>

/* Converts an 8-bit planar YUV frame (4:2:0, 4:2:2, 4:4:0 or 4:4:4; an alpha plane is ignored) into rgba
 * [height][width][4]. Returns 1 when done, 0 when the frame is another layout (the caller converts it otherwise),
 * -1 when out of memory. */
int tern_yuv_to_rgba(const AVFrame *fr, uint8_t *rgba);

#endif
