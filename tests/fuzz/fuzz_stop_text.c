/* fuzz_stop_text.c — fuzz target for stop strings matched on generated text (engine/stop_text.h): a request's stop
 * strings against whatever the model writes, in token-sized pieces. Input: a byte of settings (how many stop
 * strings, how the text is cut), the stop strings and the text, separated by 0x00 bytes; their malformed UTF-8 is
 * dropped, as text and stops are whole characters in the engine. Checked against a plain search of the text after
 * each piece: the stop is reported in the first piece after which the text holds one, at the earliest place (the
 * first listed on a tie), the text released is exactly the text before it (all of it, flushed, when none came), and
 * every release is whole characters. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "engine/stop_text.h"

#define MAX_STOPS 4

static void check(int ok) {
    if (!ok)
        __builtin_trap();
}

/* The well-formed characters of s[0, n) packed to the front; their count of bytes. */
static size_t keep_utf8(char *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        const int k = tern_utf8_check((const unsigned char *)s + i, n - i);
        if (k <= 0) {
            i += k < 0 ? (size_t)-k : 1;
            continue;
        }
        memmove(s + w, s + i, (size_t)k);
        w += (size_t)k;
        i += (size_t)k;
    }
    return w;
}

/* The earliest stop string in t[0, n) starting at `from` or later: its index (first listed on a tie) and start, or
 * -1. */
static int first_stop(const char *t, size_t from, size_t n, char *const *stops, const size_t *lens, int n_stops,
                      size_t *at) {
    for (size_t p = from; p < n; p++)
        for (int k = 0; k < n_stops; k++)
            if (lens[k] <= n - p && !memcmp(t + p, stops[k], lens[k])) {
                *at = p;
                return k;
            }
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const int want_stops = 1 + (data[0] & 3);
    const size_t cut = 1 + (data[0] >> 2 & 15); /* characters a piece */
    char *buf = malloc(size);
    check(buf != NULL);
    memcpy(buf, data + 1, size - 1);
    const size_t n_buf = size - 1;
    /* Fields: want_stops stop strings, then the text (the rest, 0x00 bytes and all). */
    char *stops[MAX_STOPS];
    size_t lens[MAX_STOPS];
    int n_stops = 0;
    size_t i = 0;
    while (n_stops < want_stops && i < n_buf) {
        char *end = memchr(buf + i, 0, n_buf - i);
        const size_t len = end ? (size_t)(end - (buf + i)) : n_buf - i;
        const size_t kept = keep_utf8(buf + i, len);
        if (kept) {
            stops[n_stops] = buf + i;
            lens[n_stops++] = kept;
        }
        i += len + 1;
    }
    size_t longest = 0;
    for (int k = 0; k < n_stops; k++)
        longest = lens[k] > longest ? lens[k] : longest;
    char *text = i < n_buf ? buf + i : buf + n_buf;
    const size_t n_text = i < n_buf ? keep_utf8(text, n_buf - i) : 0;

    tern_stop_text st = {0};
    tern_stop_text_init(&st, (const char *const *)stops, lens, n_stops);
    char *released = malloc(n_text + 1);
    check(released != NULL);
    size_t n_rel = 0, at = 0;
    int found = -1;
    while (at < n_text && found < 0) {
        size_t end = at; /* `cut` characters */
        for (size_t c = 0; c < cut && end < n_text; c++)
            end += (size_t)tern_utf8_check((const unsigned char *)text + end, n_text - end);
        const char *out;
        size_t len;
        tern_err *e = tern_stop_text_push(&st, text + at, end - at, &out, &len, &found);
        if (e) { /* out of memory: nothing to check */
            tern_err_free(e);
            goto done;
        }
        size_t bad;
        check(tern_utf8_valid(out, len, &bad));
        memcpy(released + n_rel, out, len);
        n_rel += len;
        /* text[0, at) held no stop (checked after the piece before), so one now ends past `at`: it starts no
         * earlier than the longest stop's length before it */
        size_t want_at = 0;
        const int want = first_stop(text, at >= longest ? at - longest + 1 : 0, end, stops, lens, n_stops, &want_at);
        check(found == want); /* a stop in the first piece that completes one, not later, not earlier */
        if (found >= 0)
            check(n_rel == want_at && !memcmp(released, text, n_rel));
        at = end;
    }
    if (found < 0) {
        const char *out;
        size_t len;
        tern_err *e = tern_stop_text_flush(&st, &out, &len);
        if (e) {
            tern_err_free(e);
            goto done;
        }
        memcpy(released + n_rel, out, len);
        n_rel += len;
        check(n_rel == n_text && !memcmp(released, text, n_text));
    }
done:
    tern_stop_text_free(&st);
    free(released);
    free(buf);
    return 0;
}
