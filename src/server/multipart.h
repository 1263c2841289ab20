/* multipart.h — multipart/form-data request bodies (RFC 7578 on RFC 2046), as the OpenAI clients send uploads to
 * POST /v1/audio/transcriptions: a binary `file` part (with filename and Content-Type) beside text fields such as
 * `model`, `language` and `response_format`. The parser works in place on the whole body the HTTP layer has
 * already read: the parts point into it and nothing is allocated, so the body must outlive them. */
#ifndef TERN_SERVER_MULTIPART_H
#define TERN_SERVER_MULTIPART_H

#include <stddef.h>

#include "core/status.h"

/* RFC 2046 caps a boundary at 70 characters; a buffer of this many bytes holds any boundary and its NUL. */
#define SRV_MULTIPART_BOUNDARY_CAP 71
/* Longest header line of a part (without its line ending) the parser accepts. */
#define SRV_MULTIPART_MAX_HEADER_LINE 8192

/* One part of a form. Strings are not NUL-terminated: use the lengths. */
typedef struct srv_part {
    const char *name; /* the Content-Disposition name parameter (always present) */
    size_t name_len;
    const char *filename; /* the filename parameter as sent (escapes not undone); NULL if none */
    size_t filename_len;
    const char *content_type; /* the whole Content-Type value, parameters included; NULL if none */
    size_t content_type_len;
    const unsigned char *data; /* the part's bytes, binary-safe */
    size_t len;
} srv_part;

/* Copies the boundary parameter of a `multipart/form-data; boundary=...` Content-Type value into boundary[cap]
 * (NUL-terminated; cap >= SRV_MULTIPART_BOUNDARY_CAP always suffices); TERN_EINVAL if the type is another one or
 * the boundary is missing or malformed. */
TERN_MUST_CHECK tern_err *srv_multipart_boundary(const char *content_type, char *boundary, size_t cap);
/* Splits body[0, len) on `boundary` (without its leading "--") into at most max_parts parts, in body order (a body
 * holding only the closing delimiter has none); TERN_EINVAL naming what is wrong for any malformed body or too many
 * parts (*n_parts is then 0). */
TERN_MUST_CHECK tern_err *srv_multipart_parse(const void *body, size_t len, const char *boundary, srv_part *parts, size_t max_parts,
                              size_t *n_parts);
/* The first of parts[0, n) whose name is exactly `name`, or NULL. */
const srv_part *srv_multipart_find(const srv_part *parts, size_t n, const char *name);

#endif
