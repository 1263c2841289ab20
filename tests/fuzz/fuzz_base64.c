/* fuzz_base64.c — fuzz target for the base64 decoder that reads audio uploads: any text decodes or fails cleanly
 * (no crash, no out-of-bounds access, no leak), and what decodes re-encodes to the same digits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"

static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *out;
    size_t n;
    tern_err *err = tern_base64_decode((const char *)data, size, &out, &n);
    if (err) {
        if (out || n)
            abort();
        tern_err_free(err);
        return 0;
    }
    if (n > size || (n && !out))
        abort();
    /* Re-encode and compare with the input's digits (whitespace and padding dropped, URL-safe mapped). */
    char *clean = malloc(size + 1), *enc = malloc(n / 3 * 4 + 8);
    size_t c = 0, e = 0;
    for (size_t i = 0; i < size; i++) {
        char ch = (char)data[i];
        if (ch == '-')
            ch = '+';
        if (ch == '_')
            ch = '/';
        if (strchr(digits, ch) && ch)
            clean[c++] = ch;
    }
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)out[i] << 16 | (i + 1 < n ? (uint32_t)out[i + 1] << 8 : 0) | (i + 2 < n ? out[i + 2] : 0);
        size_t k = n - i >= 3 ? 4 : n - i + 1;
        for (size_t j = 0; j < k; j++)
            enc[e++] = digits[(v >> (18 - 6 * j)) & 63];
    }
    /* Trailing bits the decoder dropped may differ in the last digit; everything before must match. */
    if (e != c || (e > 1 && memcmp(enc, clean, e - 1)))
        abort();
    free(clean);
    free(enc);
    free(out);
    return 0;
}
