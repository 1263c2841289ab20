/* base64.h — decoding base64 text (RFC 4648, standard or URL-safe alphabet), as API clients send file bytes. */
#ifndef TERN_CORE_BASE64_H
#define TERN_CORE_BASE64_H

#include <stddef.h>

#include "core/status.h"

/* Decodes text[0, len): the standard alphabet (+/) or the URL-safe one (-_), '=' padding optional but only at the
 * end, ASCII whitespace (line breaks of MIME-wrapped text) skipped. *out is malloc'd (NULL when *n is 0). Errors
 * name the offset of the first offending character. */
TERN_MUST_CHECK tern_err *tern_base64_decode(const char *text, size_t len, unsigned char **out, size_t *n);

/* Encodes n bytes as standard padded base64 into a malloc'd NUL-terminated string; NULL when out of memory. */
char *tern_base64_encode(const void *data, size_t n);

#endif
