/* vocab.c — the token table: texts in one pool, a text -> id hash, the merge table keyed by id pairs, the
 * added-token matcher, the byte tables (<0xXX> and GPT-2 byte stand-ins) and end-of-generation marks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "tokenizer/tok_internal.h"

/* A fast 64-bit hash over short byte strings (8 bytes per step, multiply-xorshift mixing). */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h;
}

tern_err *tok_vocab_alloc(tern_tokenizer *t, int32_t n, int with_scores) {
    if (n <= 0)
        return tern_errf(TERN_EFORMAT, "vocabulary is empty");
    t->n_vocab = n;
    t->text_off = calloc((size_t)n, sizeof *t->text_off);
    t->text_len = calloc((size_t)n, sizeof *t->text_len);
    t->attr = calloc((size_t)n, sizeof *t->attr);
    if (with_scores)
        t->score = calloc((size_t)n, sizeof *t->score);
    t->pool_cap = 4096; /* never NULL, so pool + offset is always a valid pointer even for empty texts */
    t->pool = malloc(t->pool_cap);
    if (!t->text_off || !t->text_len || !t->attr || (with_scores && !t->score) || !t->pool)
        return tern_errf(TERN_ENOMEM, "out of memory for %d tokens", (int)n);
    for (int32_t i = 0; i < n; i++)
        t->attr[i] = TA_NORMAL;
    return NULL;
}

tern_err *tok_vocab_set(tern_tokenizer *t, int32_t id, const char *text, size_t len) {
    if (id < 0 || id >= t->n_vocab)
        return tern_errf(TERN_EFORMAT, "token id %d out of range [0, %d)", (int)id, (int)t->n_vocab);
    if (len > UINT32_MAX - t->pool_len)
        return tern_errf(TERN_EFORMAT, "token texts exceed 4 GiB");
    if (len == 0) { /* an empty text is never looked up: no pool space needed */
        t->text_off[id] = (uint32_t)t->pool_len;
        t->text_len[id] = 0;
        return NULL;
    }
    size_t need = t->pool_len + len;
    if (need > t->pool_cap) {
        size_t ncap = t->pool_cap ? t->pool_cap : 4096;
        while (ncap < need)
            ncap *= 2;
        char *np = realloc(t->pool, ncap);
        if (!np)
            return tern_errf(TERN_ENOMEM, "out of memory for token texts");
        t->pool = np;
        t->pool_cap = ncap;
    }
    memcpy(t->pool + t->pool_len, text, len);
    t->text_off[id] = (uint32_t)t->pool_len;
    t->text_len[id] = (uint32_t)len;
    t->pool_len += len;
    return NULL;
}

static const char *text_of(const tern_tokenizer *t, int32_t id, size_t *len) {
    *len = t->text_len[id];
    return t->pool + t->text_off[id];
}

/* A slot holds the id and the hash's top 32 bits, so a probe touches the token text only when the tags agree. */
static uint64_t slot_of(uint64_t h, int32_t id) { return (h & 0xffffffff00000000ull) | ((uint64_t)id + 1); }

tern_err *tok_vocab_index(tern_tokenizer *t, int dup_error) {
    size_t cap = 16;
    while (cap < (size_t)t->n_vocab * 2)
        cap *= 2;
    free(t->hash);
    t->hash = calloc(cap, sizeof *t->hash);
    if (!t->hash)
        return tern_errf(TERN_ENOMEM, "out of memory for the token index");
    t->hash_cap = cap;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t len;
        const char *s = text_of(t, id, &len);
        if (len == 0)
            continue;
        uint64_t h = hash_bytes(s, len);
        size_t at = (size_t)h & (cap - 1);
        for (;;) {
            uint64_t slot = t->hash[at];
            if (!slot) {
                t->hash[at] = slot_of(h, id);
                break;
            }
            int32_t other = (int32_t)(uint32_t)slot - 1;
            size_t olen;
            const char *os = text_of(t, other, &olen);
            if ((slot >> 32) == (h >> 32) && olen == len && !memcmp(os, s, len)) {
                if (dup_error)
                    return tern_errf(TERN_EFORMAT, "duplicate token text '%.*s' (ids %d and %d)", (int)(len > 64 ? 64 : len),
                                     s, (int)other, (int)id);
                /* An added token owns its text: matching an added token must give the added id. */
                if ((t->attr[id] & TA_ADDED) && !(t->attr[other] & TA_ADDED))
                    t->hash[at] = slot_of(h, id);
                break;
            }
            at = (at + 1) & (cap - 1);
        }
    }
    return NULL;
}

int32_t tok_vocab_find(const tern_tokenizer *t, const char *text, size_t len) {
    if (!t->hash || len == 0)
        return -1;
    uint64_t h = hash_bytes(text, len);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t at = (size_t)h & (t->hash_cap - 1);
    for (;;) {
        uint64_t slot = t->hash[at];
        if (!slot)
            return -1;
        if ((uint32_t)(slot >> 32) == tag) {
            int32_t id = (int32_t)(uint32_t)slot - 1;
            if (t->text_len[id] == len && !memcmp(t->pool + t->text_off[id], text, len))
                return id;
        }
        at = (at + 1) & (t->hash_cap - 1);
    }
}

static size_t merge_slot(uint64_t key, size_t cap) {
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 31)) & (cap - 1);
}

tern_err *tok_merges_reserve(tern_tokenizer *t, size_t n) {
    size_t cap = 16;
    while (cap < n * 2 + 2)
        cap *= 2;
    free(t->merges);
    t->merges = malloc(cap * sizeof *t->merges);
    if (!t->merges)
        return tern_errf(TERN_ENOMEM, "out of memory for %zu merges", n);
    for (size_t i = 0; i < cap; i++)
        t->merges[i].key = UINT64_MAX;
    t->merges_cap = cap;
    t->n_merges = 0;
    return NULL;
}

tern_err *tok_merges_add(tern_tokenizer *t, int32_t left, int32_t right, int32_t result, int32_t rank) {
    if (!t->merges || (t->n_merges + 1) * 2 > t->merges_cap) {
        /* Grow: rehash into a table twice the size. */
        merge_entry *old = t->merges;
        size_t old_cap = t->merges_cap;
        size_t n = t->n_merges;
        t->merges = NULL;
        TERN_TRY(tok_merges_reserve(t, (n + 1) * 2));
        for (size_t i = 0; old && i < old_cap; i++)
            if (old[i].key != UINT64_MAX) {
                size_t at = merge_slot(old[i].key, t->merges_cap);
                while (t->merges[at].key != UINT64_MAX)
                    at = (at + 1) & (t->merges_cap - 1);
                t->merges[at] = old[i];
            }
        t->n_merges = n;
        free(old);
    }
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t at = merge_slot(key, t->merges_cap);
    while (t->merges[at].key != UINT64_MAX) {
        if (t->merges[at].key == key)
            return NULL; /* first (lowest-rank) occurrence wins */
        at = (at + 1) & (t->merges_cap - 1);
    }
    t->merges[at].key = key;
    t->merges[at].rank = rank;
    t->merges[at].result = result;
    t->n_merges++;
    return NULL;
}

int32_t tok_merges_find(const tern_tokenizer *t, int32_t left, int32_t right, int32_t *result) {
    if (!t->merges || left < 0 || right < 0)
        return -1;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t at = merge_slot(key, t->merges_cap);
    for (;;) {
        const merge_entry *e = &t->merges[at];
        if (e->key == UINT64_MAX)
            return -1;
        if (e->key == key) {
            *result = e->result;
            return e->rank;
        }
        at = (at + 1) & (t->merges_cap - 1);
    }
}

static int cmp_desc_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

tern_err *tok_added_index(tern_tokenizer *t) {
    free(t->added_lens);
    t->added_lens = NULL;
    t->n_added_lens = 0;
    memset(t->added_first, 0, sizeof t->added_first);
    size_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if ((t->attr[id] & TA_ADDED) && t->text_len[id] > 0)
            n++;
    if (!n)
        return NULL;
    uint32_t *lens = malloc(n * sizeof *lens);
    if (!lens)
        return tern_errf(TERN_ENOMEM, "out of memory");
    n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if ((t->attr[id] & TA_ADDED) && t->text_len[id] > 0) {
            lens[n++] = t->text_len[id];
            t->added_first[(unsigned char)t->pool[t->text_off[id]]] = 1;
        }
    qsort(lens, n, sizeof *lens, cmp_desc_u32);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || lens[k - 1] != lens[i])
            lens[k++] = lens[i];
    t->added_lens = lens;
    t->n_added_lens = k;
    return NULL;
}

/* GPT-2's reversible byte -> printable code point map: printable Latin-1 bytes stand for themselves, the
 * other 68 bytes (0x00-0x20, 0x7f-0xa0, 0xad) take code points 256.. in byte order. */
uint32_t tok_bytelevel_cp(unsigned char b) {
    if (b <= 0x20)
        return 256u + b;
    if (b >= 0x7f && b <= 0xa0)
        return 256u + 33 + (b - 0x7fu);
    if (b == 0xad)
        return 256u + 67;
    return b;
}

int tok_bytelevel_byte(uint32_t cp) {
    if (cp < 256)
        return (cp <= 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) ? -1 : (int)cp;
    cp -= 256;
    if (cp < 33)
        return (int)cp;
    if (cp < 67)
        return (int)(0x7f + cp - 33);
    return cp == 67 ? 0xad : -1;
}

void tok_byte_tables(tern_tokenizer *t) {
    static const char hex[] = "0123456789ABCDEF";
    for (unsigned b = 0; b < 256; b++) {
        char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        t->byte_id[b] = tok_vocab_find(t, buf, 6);
        char u[4];
        size_t n = tern_utf8_put(tok_bytelevel_cp((unsigned char)b), u);
        t->bytelevel_id[b] = tok_vocab_find(t, u, n);
    }
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

tern_err *tok_space_split_index(tern_tokenizer *t) {
    free(t->no_split_after);
    t->no_split_after = NULL;
    t->n_no_split_after = 0;
    t->space_split = 0;
    if (t->byte_level)
        return NULL; /* byte-level symbols are bytes, and the regex has split the text already */
    size_t cap = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const unsigned char *s = (const unsigned char *)t->pool + t->text_off[id];
        size_t n = t->text_len[id];
        uint32_t prev = 0x2581;
        for (size_t i = 0; i < n;) {
            int k = tern_utf8_check(s + i, n - i);
            if (k <= 0) {
                prev = 0xfffd; /* stray byte: treat like any non-▁ character, but it cannot be looked up */
                i++;
                continue;
            }
            uint32_t cp = tern_utf8_cp(s + i, k);
            if (cp == 0x2581 && prev != 0x2581) {
                if (prev == 0xfffd) /* a token with invalid UTF-8 before ▁: do not cut at all */
                    return NULL;
                if (t->n_no_split_after == cap) {
                    cap = cap ? cap * 2 : 16;
                    uint32_t *nv = realloc(t->no_split_after, cap * sizeof *nv);
                    if (!nv)
                        return tern_errf(TERN_ENOMEM, "out of memory");
                    t->no_split_after = nv;
                }
                t->no_split_after[t->n_no_split_after++] = prev;
            }
            prev = cp;
            i += (size_t)k;
        }
    }
    if (t->n_no_split_after) {
        qsort(t->no_split_after, t->n_no_split_after, sizeof(uint32_t), cmp_u32);
        size_t k = 0;
        for (size_t i = 0; i < t->n_no_split_after; i++)
            if (k == 0 || t->no_split_after[k - 1] != t->no_split_after[i])
                t->no_split_after[k++] = t->no_split_after[i];
        t->n_no_split_after = k;
    }
    t->space_split = 1;
    return NULL;
}

void tok_find_eog(tern_tokenizer *t) {
    static const char *const names[] = {"<turn|>",      "<end_of_turn>", "<|eot_id|>",   "<|im_end|>",  "<|end|>",
                                        "<|endoftext|>", "<|eom_id|>",   "<|end_of_text|>", "<EOT>"};
    if (t->eos >= 0 && t->eos < t->n_vocab)
        t->attr[t->eos] |= TA_EOG;
    if (t->eot >= 0 && t->eot < t->n_vocab)
        t->attr[t->eot] |= TA_EOG;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int32_t id = tok_vocab_find(t, names[i], strlen(names[i]));
        if (id >= 0 && (t->attr[id] & (TA_CONTROL | TA_USER))) {
            t->attr[id] |= TA_EOG;
            if (t->eot < 0 && i < 4)
                t->eot = id;
        }
    }
}

void tok_set_describe(tern_tokenizer *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(t->describe);
    t->describe = strdup(buf);
}
