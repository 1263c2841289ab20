/* stop_text.c — stop-string matching with hold-back (see stop_text.h). */
#include "engine/stop_text.h"

#include <stdlib.h>
#include <string.h>

void tern_stop_text_init(tern_stop_text *st, const char *const *stops, const size_t *lens, int n) {
    st->stops = stops;
    st->lens = lens;
    st->n = n;
    st->n_held = 0;
}

void tern_stop_text_reset(tern_stop_text *st) { st->n_held = 0; }

void tern_stop_text_free(tern_stop_text *st) {
    free(st->held);
    free(st->out);
    st->held = st->out = NULL;
    st->n_held = st->cap_held = st->cap_out = 0;
}

static int reserve(char **buf, size_t *cap, size_t need) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *nb = realloc(*buf, c);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

static const char *find(const char *hay, size_t n, const char *needle, size_t m) {
    if (m > n)
        return NULL;
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, m))
            return hay + i;
    return NULL;
}

/* Length of the longest tail of s[0, n) that is a proper prefix of some stop string. */
static size_t holdable_tail(const tern_stop_text *st, const char *s, size_t n) {
    size_t best = 0;
    for (int k = 0; k < st->n; k++) {
        size_t m = st->lens[k] - 1; /* proper prefix */
        if (m > n)
            m = n;
        for (size_t t = m; t > best; t--)
            if (!memcmp(s + n - t, st->stops[k], t)) {
                best = t;
                break;
            }
    }
    return best;
}

tern_err *tern_stop_text_push(tern_stop_text *st, const char *piece, size_t len, const char **out, size_t *out_len,
                              int *stop_index) {
    *stop_index = -1;
    *out = "";
    *out_len = 0;
    if (st->n == 0) { /* nothing to match: pass through */
        *out = piece;
        *out_len = len;
        return NULL;
    }
    if (reserve(&st->held, &st->cap_held, st->n_held + len + 1))
        return tern_errf(TERN_ENOMEM, "out of memory matching stop strings");
    memcpy(st->held + st->n_held, piece, len);
    st->n_held += len;
    const char *first = NULL;
    for (int k = 0; k < st->n; k++) {
        const char *at = find(st->held, st->n_held, st->stops[k], st->lens[k]);
        if (at && (!first || at < first)) {
            first = at;
            *stop_index = k;
        }
    }
    size_t release = first ? (size_t)(first - st->held) : st->n_held - holdable_tail(st, st->held, st->n_held);
    if (reserve(&st->out, &st->cap_out, release + 1))
        return tern_errf(TERN_ENOMEM, "out of memory matching stop strings");
    memcpy(st->out, st->held, release);
    st->out[release] = 0;
    if (first) {
        st->n_held = 0;
    } else {
        memmove(st->held, st->held + release, st->n_held - release);
        st->n_held -= release;
    }
    *out = st->out;
    *out_len = release;
    return NULL;
}

tern_err *tern_stop_text_flush(tern_stop_text *st, const char **out, size_t *out_len) {
    if (reserve(&st->out, &st->cap_out, st->n_held + 1))
        return tern_errf(TERN_ENOMEM, "out of memory matching stop strings");
    if (st->n_held)
        memcpy(st->out, st->held, st->n_held);
    st->out[st->n_held] = 0;
    *out = st->out;
    *out_len = st->n_held;
    st->n_held = 0;
    return NULL;
}
