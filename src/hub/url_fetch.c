/* url_fetch.c — bounded http(s) GET into memory (see url_fetch.h). */
#include "hub/url_fetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

typedef struct body {
    unsigned char *p;
    size_t n, cap;
    uint64_t max;
    int too_big;
} body;

static size_t on_data(char *p, size_t size, size_t nmemb, void *ctx) {
    body *b = ctx;
    const size_t n = size * nmemb;
    if (b->n + n > b->max) {
        b->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            return 0;
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return n;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready;
static void init(void) { ready = curl_global_init(CURL_GLOBAL_DEFAULT) == 0; }

tern_err *hub_url_fetch(void *ctx, const char *url, void **bytes, size_t *len) {
    const hub_url_limits *lim = ctx;
    *bytes = NULL;
    *len = 0;
    pthread_once(&once, init);
    CURL *c = ready ? curl_easy_init() : NULL;
    if (!c)
        return tern_errf(TERN_EINTERNAL, "libcurl could not start");
    body b = {.max = lim->max_bytes};
    char why[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tern/image");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, lim->timeout_s);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)lim->max_bytes);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, why);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    tern_err *err = NULL;
    if (b.too_big || rc == CURLE_FILESIZE_EXCEEDED)
        err = tern_errf(TERN_EINVAL, "the image at %s is larger than %llu bytes", url,
                        (unsigned long long)lim->max_bytes);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        err = tern_errf(TERN_EINVAL, "fetching %s took longer than %ld s", url, lim->timeout_s);
    else if (rc != CURLE_OK)
        err = tern_errf(TERN_EINVAL, "fetching %s failed: %s", url, why[0] ? why : curl_easy_strerror(rc));
    else if (status >= 400)
        err = tern_errf(TERN_EINVAL, "fetching %s failed: HTTP %ld", url, status);
    else if (b.n == 0)
        err = tern_errf(TERN_EINVAL, "%s returned no data", url);
    if (err) {
        free(b.p);
        return err;
    }
    *bytes = b.p;
    *len = b.n;
    return NULL;
}
