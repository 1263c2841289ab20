/* topk.c — bucketed ranking and small top-n (see topk.h).
 *
 * tern_rank_top: pass 1 finds the largest and smallest finite keys; pass 2 maps every key to one of
 * NB buckets spanning [max - range, max] (range capped, so a long tail of hopeless candidates shares
 * the last bucket) and counts them, keeping each key's bucket in idx; the smallest run of top buckets
 * holding k candidates is then compacted in place (idx[g++] = i never overtakes the read position)
 * and sorted. Equal keys always land in the same bucket, so the gathered set is exactly a prefix of
 * the total order. Large gathered sets (a flat distribution at a high temperature) are sorted by a
 * stable LSD radix sort on the keys' bits: the set is in index order already, so stability gives the
 * index tie-break for free, and 262,144 candidates sort in a few milliseconds instead of tens. */
#include "sample/topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NB 4096
#define MAX_RANGE 64.0f /* keys further than this below the best share the last bucket */

/* 1 if candidate a comes before candidate b: larger key first, lower index on ties; NaN last. */
static inline int before(const float *keys, int32_t a, int32_t b) {
    float x = keys[a], y = keys[b];
    if (x != x || y != y)
        return y != y && (x == x || a < b);
    return x > y || (x == y && a < b);
}

static int cmp_before(const void *pa, const void *pb, void *keys) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return a == b ? 0 : before(keys, a, b) ? -1 : 1;
}

/* A key's bits mapped so that unsigned ascending order is float descending order; NaN maps last. */
static inline uint32_t desc_bits(float f) {
    if (f != f)
        return UINT32_MAX;
    if (f == 0.0f)
        f = 0.0f; /* -0 ranks with +0 */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : u ^ 0x80000000u; /* ascending float order */
    return ~u;
}

/* Stable sort of idx[0, g) (given in index order) by desc_bits; 0 on success, -1 without memory. */
static int radix_sort(const float *keys, int32_t *idx, int64_t g) {
    uint32_t *ka = malloc((size_t)g * sizeof *ka), *kb = malloc((size_t)g * sizeof *kb);
    int32_t *ib = malloc((size_t)g * sizeof *ib);
    if (!ka || !kb || !ib) {
        free(ka);
        free(kb);
        free(ib);
        return -1;
    }
    for (int64_t i = 0; i < g; i++)
        ka[i] = desc_bits(keys[idx[i]]);
    int32_t *ia = idx;
    for (int shift = 0; shift < 32; shift += 8) {
        int64_t count[256] = {0};
        for (int64_t i = 0; i < g; i++)
            count[(ka[i] >> shift) & 255]++;
        if (count[(ka[0] >> shift) & 255] == g)
            continue; /* every key has the same byte here */
        for (int64_t b = 0, sum = 0; b < 256; b++) {
            int64_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < g; i++) {
            int64_t at = count[(ka[i] >> shift) & 255]++;
            kb[at] = ka[i];
            ib[at] = ia[i];
        }
        uint32_t *tk = ka;
        ka = kb;
        kb = tk;
        int32_t *ti = ia;
        ia = ib;
        ib = ti;
    }
    if (ia != idx) { /* the sorted order ended in the scratch buffer */
        memcpy(idx, ia, (size_t)g * sizeof *idx);
        ib = ia;
    }
    free(ka);
    free(kb);
    free(ib);
    return 0;
}

int64_t tern_rank_top(const float *keys, int64_t n, int64_t k, int32_t *idx) {
    if (k > n)
        k = n;
    if (k <= 0)
        return 0;
    float mx = -INFINITY, mn = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        float v = keys[i];
        if (v > mx)
            mx = v;
        if (v < mn && v > -INFINITY)
            mn = v;
    }
    float range = mx > -INFINITY && mn < INFINITY ? mx - mn : 0.0f;
    if (!(range <= MAX_RANGE)) /* also catches inf - inf */
        range = MAX_RANGE;
    float scale = range > 0 ? (float)(NB - 1) / range : 0.0f;
    int32_t count[NB] = {0};
    for (int64_t i = 0; i < n; i++) {
        float d = keys[i] == mx ? 0.0f : (mx - keys[i]) * scale; /* >= 0; NaN or +inf when hopeless */
        int32_t b = d < (float)(NB - 1) ? (int32_t)d : NB - 1;
        idx[i] = b;
        count[b]++;
    }
    int32_t last = 0;
    int64_t have = count[0];
    while (have < k && last < NB - 1)
        have += count[++last];
    int64_t g = 0;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] <= last)
            idx[g++] = (int32_t)i;
    if (g < 512 || radix_sort(keys, idx, g))
        qsort_r(idx, (size_t)g, sizeof *idx, cmp_before, (void *)keys);
    return g;
}

int tern_top_few(const float *x, int64_t n, int k, int32_t *ids) {
    int have = 0;
    if (k <= 0)
        return 0;
    for (int64_t i = 0; i < n; i++) {
        if (have == k && !before(x, (int32_t)i, ids[k - 1]))
            continue;
        int j = have < k ? have++ : k - 1;
        for (; j > 0 && before(x, (int32_t)i, ids[j - 1]); j--)
            ids[j] = ids[j - 1];
        ids[j] = (int32_t)i;
    }
    return have;
}
