/* fuzz_multipart.c — fuzz target for the multipart/form-data parser. The input reads like the request it models:
 * its first line is the Content-Type value, whose boundary (a fixed one if that line does not parse) splits the rest,
 * the body. Any bytes must parse or fail cleanly with TERN_EINVAL (no crash, no out-of-bounds read, no leak); a
 * successful parse must return parts that lie inside the body, in order and without overlap, which find locates by
 * name, and capping the part count must refuse exactly the bodies that have more. The body is copied to a buffer of
 * its exact size so that a read one byte past it is caught by AddressSanitizer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/multipart.h"

#define MAX_PARTS 16
#define FIXED_BOUNDARY "----formdata-undici-0123456789"

static int inside(const void *p, size_t n, const uint8_t *body, size_t len) {
    uintptr_t q = (uintptr_t)p, b = (uintptr_t)body;
    return q >= b && n <= len && q - b <= len - n;
}

static unsigned touch(const void *p, size_t n) {
    const uint8_t *b = p;
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        sum = sum * 31u + b[i];
    return sum;
}

static void check_parts(const srv_part *parts, size_t n, const uint8_t *body, size_t len) {
    volatile unsigned sink = 0;
    uintptr_t prev_end = (uintptr_t)body;
    for (size_t i = 0; i < n; i++) {
        const srv_part *p = &parts[i];
        if (!p->name || !inside(p->name, p->name_len, body, len) || !p->data || !inside(p->data, p->len, body, len))
            abort();
        if ((p->filename && !inside(p->filename, p->filename_len, body, len)) ||
            (p->content_type && !inside(p->content_type, p->content_type_len, body, len)))
            abort();
        if ((uintptr_t)p->name < prev_end || (uintptr_t)p->data < (uintptr_t)p->name + p->name_len)
            abort(); /* each part's headers come after the previous part's data, its data after its headers */
        prev_end = (uintptr_t)p->data + p->len;
        sink += touch(p->name, p->name_len) + touch(p->data, p->len);
        if (p->filename)
            sink += touch(p->filename, p->filename_len);
        if (p->content_type)
            sink += touch(p->content_type, p->content_type_len);

        char name[64];
        if (p->name_len < sizeof name && !memchr(p->name, '\0', p->name_len)) {
            memcpy(name, p->name, p->name_len);
            name[p->name_len] = '\0';
            const srv_part *f = srv_multipart_find(parts, n, name);
            if (!f || f > p || f->name_len != p->name_len || memcmp(f->name, p->name, p->name_len) != 0)
                abort();
        }
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char boundary[SRV_MULTIPART_BOUNDARY_CAP] = FIXED_BOUNDARY;
    size_t skip = 0;
    const uint8_t *nl = size ? memchr(data, '\n', size < 512 ? size : 512) : NULL;
    if (nl) {
        char ct[512];
        size_t n = (size_t)(nl - data);
        memcpy(ct, data, n);
        ct[n] = '\0';
        skip = n + 1;
        tern_err *err = srv_multipart_boundary(ct, boundary, sizeof boundary);
        if (err) {
            if (err->code != TERN_EINVAL || boundary[0])
                abort(); /* a refused Content-Type leaves no boundary behind */
            tern_err_free(err);
            strcpy(boundary, FIXED_BOUNDARY);
        } else if (strlen(boundary) < 1 || strlen(boundary) > 70) {
            abort();
        }
    }

    size_t len = size - skip;
    uint8_t *body = malloc(len ? len : 1);
    if (!body)
        return 0;
    if (len)
        memcpy(body, data + skip, len);
    srv_part parts[MAX_PARTS];
    size_t n = 12345;
    tern_err *err = srv_multipart_parse(body, len, boundary, parts, MAX_PARTS, &n);
    if (err) {
        if (n != 0 || err->code != TERN_EINVAL || !err->msg[0])
            abort();
        tern_err_free(err);
    } else {
        if (n > MAX_PARTS)
            abort();
        check_parts(parts, n, body, len);
        /* With room for one part only, a body of more must be refused and one of at most one parsed the same. */
        srv_part one;
        size_t m = 12345;
        err = srv_multipart_parse(body, len, boundary, &one, 1, &m);
        if (n > 1) {
            if (!err || m != 0)
                abort();
            tern_err_free(err);
        } else if (err || m != n || (n == 1 && (one.data != parts[0].data || one.len != parts[0].len))) {
            abort();
        }
    }
    free(body);
    return 0;
}
