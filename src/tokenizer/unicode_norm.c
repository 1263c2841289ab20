/* unicode_norm.c — the normalizers that need Unicode data (NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip),
 * from ICU as Debian ships it, so the tables stay those of a maintained library.
 *
 * Hugging Face's normalizers work on Rust strings, always valid UTF-8; text reaching tern may not be. Each maximal
 * run of valid UTF-8 is transformed on its own and invalid bytes are kept as they are, so nothing the user sent is
 * replaced or lost here (the model's byte fallback sees it later). Lowercase maps each character on its own by
 * ICU's full, locale-independent mapping (root locale), as Hugging Face maps each char with Rust's
 * char::to_lowercase (so a final capital sigma becomes σ, not ς); StripAccents drops nonspacing marks (Mn), as
 * Hugging Face does; Strip trims White_Space characters. */
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

#include "core/sbuf.h"
#include "tokenizer/tok_internal.h"

/* UTF-16 scratch reused across the runs of one call. */
typedef struct u16buf {
    UChar *p;
    int32_t cap;
} u16buf;

static int u16_reserve(u16buf *b, int64_t n) {
    if (n > INT32_MAX / 2)
        return -1;
    if (n <= b->cap)
        return 0;
    UChar *np = realloc(b->p, (size_t)n * sizeof *np);
    if (!np)
        return -1;
    b->p = np;
    b->cap = (int32_t)n;
    return 0;
}

/* Transforms one valid UTF-8 run, appending the result to out. */
static TERN_MUST_CHECK tern_err *transform_run(norm_kind kind, const char *s, size_t n, u16buf *a, u16buf *b, sbuf *out) {
    UErrorCode st = U_ZERO_ERROR;
    int32_t len = 0;
    if (n > INT32_MAX / 4 || u16_reserve(a, (int64_t)n + 1))
        return tern_errf(TERN_ENOMEM, "out of memory normalizing text");
    u_strFromUTF8(a->p, a->cap, &len, s, (int32_t)n, &st);
    if (U_FAILURE(st))
        return tern_errf(TERN_EINTERNAL, "normalizing text: %s", u_errorName(st));
    const UChar *res = a->p;
    int32_t rlen = len;
    if (kind == NORM_LOWERCASE) {
        if (u16_reserve(b, (int64_t)len * 3 + 16))
            return tern_errf(TERN_ENOMEM, "out of memory normalizing text");
        int32_t o = 0;
        for (int32_t i = 0; i < len && U_SUCCESS(st);) {
            const int32_t at = i;
            UChar32 c;
            U16_NEXT(a->p, i, len, c);
            (void)c;
            o += u_strToLower(b->p + o, b->cap - o, a->p + at, i - at, "", &st); /* at most 3 units a character */
        }
        if (U_FAILURE(st))
            return tern_errf(TERN_EINTERNAL, "normalizing text: %s", u_errorName(st));
        res = b->p;
        rlen = o;
    } else if (kind == NORM_STRIP_ACCENTS) {
        int32_t o = 0;
        for (int32_t i = 0; i < len;) {
            const int32_t at = i;
            UChar32 c;
            U16_NEXT(a->p, i, len, c);
            if (u_charType(c) != U_NON_SPACING_MARK)
                for (int32_t k = at; k < i; k++)
                    a->p[o++] = a->p[k];
        }
        rlen = o;
    } else {
        /* The result can grow (NFKD of U+FDFA is 18 code units): ask again with the size the first call reports. */
        for (int pass = 0; pass < 2; pass++) {
            if (u16_reserve(b, pass ? (int64_t)rlen + 1 : (int64_t)len * 3 + 16))
                return tern_errf(TERN_ENOMEM, "out of memory normalizing text");
            st = U_ZERO_ERROR;
            const UNormalizer2 *n2 = kind == NORM_NFC    ? unorm2_getNFCInstance(&st)
                                     : kind == NORM_NFD  ? unorm2_getNFDInstance(&st)
                                     : kind == NORM_NFKC ? unorm2_getNFKCInstance(&st)
                                                         : unorm2_getNFKDInstance(&st);
            if (U_SUCCESS(st))
                rlen = unorm2_normalize(n2, a->p, len, b->p, b->cap, &st);
            if (st != U_BUFFER_OVERFLOW_ERROR)
                break;
        }
        if (U_FAILURE(st))
            return tern_errf(TERN_EINTERNAL, "normalizing text: %s", u_errorName(st));
        res = b->p;
    }
    /* Back to UTF-8: at most 3 bytes per UTF-16 unit. */
    const size_t cap = (size_t)rlen * 3 + 1;
    char *u8 = cap < INT32_MAX ? malloc(cap) : NULL;
    if (!u8)
        return tern_errf(TERN_ENOMEM, "out of memory normalizing text");
    int32_t wrote = 0;
    st = U_ZERO_ERROR;
    u_strToUTF8(u8, (int32_t)cap, &wrote, res, rlen, &st);
    tern_err *e = U_FAILURE(st)               ? tern_errf(TERN_EINTERNAL, "normalizing text: %s", u_errorName(st))
                  : sbuf_add(out, u8, (size_t)wrote) ? tern_errf(TERN_ENOMEM, "out of memory normalizing text")
                                              : NULL;
    free(u8);
    return e;
}

tern_err *tok_unicode_transform(norm_kind kind, const char *s, size_t n, sbuf *out) {
    u16buf a = {0}, b = {0};
    tern_err *e = NULL;
    for (size_t i = 0; i < n && !e;) {
        size_t j = i;
        int k;
        while (j < n && (k = tern_utf8_check((const unsigned char *)s + j, n - j)) > 0)
            j += (size_t)k;
        if (j > i)
            e = transform_run(kind, s + i, j - i, &a, &b, out);
        if (!e && j < n) { /* invalid (or cut) bytes: kept as they are */
            const int bad = tern_utf8_check((const unsigned char *)s + j, n - j);
            const size_t skip = bad < 0 ? (size_t)-bad : n - j;
            if (sbuf_add(out, s + j, skip))
                e = tern_errf(TERN_ENOMEM, "out of memory normalizing text");
            j += skip;
        }
        i = j;
    }
    free(a.p);
    free(b.p);
    return e;
}

void tok_unicode_strip(const char *s, size_t n, int left, int right, size_t *b, size_t *e) {
    size_t lo = 0, hi = n;
    while (left && lo < hi) {
        int32_t i = 0;
        UChar32 c;
        const int k = tern_utf8_check((const unsigned char *)s + lo, hi - lo);
        if (k <= 0)
            break;
        U8_NEXT((const uint8_t *)s + lo, i, k, c);
        if (c < 0 || !u_isUWhiteSpace(c))
            break;
        lo += (size_t)k;
    }
    while (right && hi > lo) {
        size_t start = hi - 1; /* back to the lead byte of the last character */
        while (start > lo && ((unsigned char)s[start] & 0xc0) == 0x80 && hi - start < 4)
            start--;
        const int k = tern_utf8_check((const unsigned char *)s + start, hi - start);
        if (k <= 0 || start + (size_t)k != hi)
            break;
        int32_t i = 0;
        UChar32 c;
        U8_NEXT((const uint8_t *)s + start, i, k, c);
        if (c < 0 || !u_isUWhiteSpace(c))
            break;
        hi = start;
    }
    *b = lo;
    *e = hi;
}
