/* lookup.c — finding the row's last tokens earlier in a token sequence (see tern_draft_lookup in draft.h). */
#include "draft/draft.h"

#include <stdlib.h>

static int matches(const int32_t *a, const int32_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

int tern_draft_lookup(const int32_t *hay, int64_t n_hay, const int32_t *key, int64_t n_key, int self, int min_n,
                      int max_n, int64_t from, int k, int32_t *out, int64_t *end) {
    if (min_n < 1)
        min_n = 1;
    /* An occurrence ending at e (exclusive) needs a token after it, and in key itself is not its own suffix:
     * e < limit. */
    const int64_t limit = self ? n_key : n_hay;
    for (int m = max_n < n_key ? max_n : (int)n_key; m >= min_n; m--) {
        const int32_t *pat = key + n_key - m;
        int64_t best = -1;
        for (int64_t e = m; e < limit; e++) {
            if (hay[e - 1] != pat[m - 1] || !matches(hay + e - m, pat, m))
                continue;
            best = e;
            if (from >= 0 && e >= from)
                break; /* the first at or after `from` */
        }
        if (best < 0)
            continue;
        int n = 0;
        const int64_t stop = self ? n_key : n_hay;
        while (n < k && best + n < stop)
            out[n] = hay[best + n], n++;
        if (end)
            *end = best;
        return n;
    }
    return 0;
}
