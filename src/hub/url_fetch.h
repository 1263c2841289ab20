/* url_fetch.h — one file by http(s) URL into memory, bounded in size and time: what `tern serve
 * --allow-image-urls` hands the server for image_url parts that name a URL. The CLI's, as the hub client is: libtern
 * itself fetches nothing. */
#ifndef TERN_HUB_URL_FETCH_H
#define TERN_HUB_URL_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct hub_url_limits {
    uint64_t max_bytes; /* a larger body is refused (as soon as it is seen to be larger) */
    long timeout_s;     /* the whole transfer, connection included */
} hub_url_limits;

/* GETs url (http or https only, redirects followed within those, at most 5) into *bytes (malloc'd, *len of them);
 * ctx is a hub_url_limits. Errors say what went wrong (status, size, time, connection) as TERN_EINVAL: the client
 * named the URL. Matches tern_url_fetch_fn. */
TERN_MUST_CHECK tern_err *hub_url_fetch(void *ctx, const char *url, void **bytes, size_t *len);

#endif
