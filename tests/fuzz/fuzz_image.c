/* fuzz_image.c — fuzz target for the image front end: any bytes must decode or fail cleanly (no crash, no
 * out-of-bounds read, no leak, nothing left behind on failure), a decoded image must hold its invariants (the size
 * the header promised, within the limits, EXIF turns only swapping the sides), and what decodes then goes through
 * the bicubic resize. */
#include <stdint.h>
#include <stdlib.h>

#include "image/image.h"

/* A header may claim tens of megapixels from a kilobyte: decoding that takes the uninstrumented codec a second and
 * reaches no code a small image does not, so such inputs are checked up to the header only (the limits themselves
 * are tested in test_image). */
#define FUZZ_MAX_PIXELS (1u << 20)
/* The resize's work grows with the source's pixels while what it does differently depends only on the sides and
 * their ratios, which images of 64K pixels reach too; resizing the larger ones took two fifths of the run. */
#define FUZZ_MAX_RESIZE_PIXELS (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_image_header h;
    tern_err *herr = tern_image_read_header(data, size, &h);
    if (!herr && (h.w < 0 || h.h < 0))
        abort();
    if (!herr && (uint64_t)h.w * (uint64_t)h.h > FUZZ_MAX_PIXELS)
        return 0;
    tern_image im;
    tern_err *err = tern_image_decode(data, size, &im);
    if (err) {
        if (im.rgb || im.w || im.h)
            abort();
        tern_err_free(err);
        tern_err_free(herr);
        return 0;
    }
    if (herr || !im.rgb || im.w < 1 || im.h < 1 || im.w > TERN_IMAGE_MAX_SIDE || im.h > TERN_IMAGE_MAX_SIDE ||
        (uint64_t)im.w * (uint64_t)im.h > TERN_IMAGE_MAX_PIXELS || h.animated)
        abort();
    if ((uint64_t)im.w * (uint64_t)im.h > FUZZ_MAX_RESIZE_PIXELS) {
        tern_image_free(&im);
        return 0;
    }
    tern_image small;
    int w = im.w > 64 ? 64 : im.w, hh = im.h > 3 ? im.h / 3 : 1; /* one shrinking and one growing side, kept cheap */
    err = tern_image_resize_bicubic(&im, w + 1, hh, &small);
    if (err || small.w != w + 1 || small.h != hh)
        abort();
    tern_image_free(&small);
    tern_image_free(&im);
    return 0;
}
