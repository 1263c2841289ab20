/* tok_cache.c — a large vocabulary's tables (texts, attributes, index, merges) kept between starts.
 *
 * Building them is most of a large tokenizer's load (262,144 texts hashed, half a million merges each looked up
 * three times: ~0.3 s of cache misses) and they depend on nothing but what the file stores. So the tables as built
 * are written to the cache folder (core/cache_dir.h) under a hash of that (a tokenizer.json's whole text; a GGUF
 * vocabulary's tokens, token types and merges), and a later load of the same reads them back. The file carries the text's hash again, the tables' sizes and a checksum of their
 * bytes: a short, foreign, stale or corrupt file is passed over (and written anew), never trusted. Writers write a
 * temporary file and rename it, so two loads at once never see a partial file.
 *
 * Layout: the header, then pool[pool_len], text_off[n_vocab], text_len[n_vocab], attr[n_vocab], hash[hash_cap],
 * merges[merges_cap], in this machine's byte order. Read back, the tables are checked whole (texts inside the
 * pool, ids inside the vocabulary, room left in the hash tables), so even a file made to fool the checksum cannot
 * make a lookup read out of bounds or loop. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cache_dir.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "tokenizer/tok_internal.h"

#define TOK_CACHE_VERSION 1

typedef struct header {
    char magic[8]; /* "TERNTOKT" */
    uint32_t version, header_bytes;
    uint64_t key, checksum;
    uint64_t n_vocab, pool_len, hash_cap, merges_cap, n_merges;
} header;

typedef struct part {
    void *p;
    size_t bytes;
} part;

static void parts_of(const tern_tokenizer *t, part out[6]) {
    const size_t v = (size_t)t->n_vocab;
    out[0] = (part){t->pool, t->pool_len};
    out[1] = (part){t->text_off, v * sizeof *t->text_off};
    out[2] = (part){t->text_len, v * sizeof *t->text_len};
    out[3] = (part){t->attr, v * sizeof *t->attr};
    out[4] = (part){t->hash, t->hash_cap * sizeof *t->hash};
    out[5] = (part){t->merges, t->merges_cap * sizeof *t->merges};
}

static uint64_t checksum_of(const part parts[6], uint64_t key) {
    uint64_t h = key;
    for (int i = 0; i < 6; i++)
        h = tern_hash64(parts[i].p, parts[i].bytes, h);
    return h;
}

char *tok_cache_path(const char *text, size_t len, uint64_t *key) {
    *key = tern_hash64(text, len, 0x746f6b656e697a65ull);
    return tok_cache_path_for(key);
}

char *tok_cache_path_for(uint64_t *key) {
    *key ^= TOK_CACHE_VERSION;
    char *dir = tern_cache_dir();
    if (!dir)
        return NULL;
    char name[64];
    snprintf(name, sizeof name, "tokenizer-%016llx.tables", (unsigned long long)*key);
    char *path = tern_path_join(dir, name);
    free(dir);
    return path;
}

static int read_full(int fd, void *p, size_t n) {
    for (uint8_t *b = p; n;) {
        const ssize_t r = read(fd, b, n);
        if (r <= 0)
            return 0;
        b += r;
        n -= (size_t)r;
    }
    return 1;
}

/* Every text inside the pool, every index slot and merge naming a token that exists: a file with a right
 * checksum but wrong tables (made on purpose) is refused like a corrupt one, not trusted. */
static int tables_sound(const tern_tokenizer *t) {
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((uint64_t)t->text_off[i] + t->text_len[i] > t->pool_len)
            return 0;
    size_t empty = 0; /* a lookup probes until an empty slot */
    for (size_t i = 0; i < t->hash_cap; i++) {
        empty += !t->hash[i];
        if (t->hash[i] && (uint32_t)t->hash[i] > (uint32_t)t->n_vocab)
            return 0;
    }
    if (!empty)
        return 0;
    size_t used = 0;
    for (size_t i = 0; i < t->merges_cap; i++) {
        const merge_entry *m = &t->merges[i];
        if (m->key == UINT64_MAX)
            continue;
        used++;
        if ((m->key >> 32) >= (uint64_t)t->n_vocab || (uint32_t)m->key >= (uint32_t)t->n_vocab || m->result < 0 ||
            m->result >= t->n_vocab || m->rank < 0)
            return 0;
    }
    return used == t->n_merges;
}

int tok_cache_read(tern_tokenizer *t, const char *path, uint64_t key) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    header h;
    struct stat st;
    int ok = read_full(fd, &h, sizeof h) && !memcmp(h.magic, "TERNTOKT", 8) && h.version == TOK_CACHE_VERSION &&
             h.header_bytes == sizeof h && h.key == key && h.n_vocab > 0 && h.n_vocab < INT32_MAX &&
             h.pool_len < ((uint64_t)1 << 32) && h.hash_cap >= h.n_vocab && h.hash_cap < ((uint64_t)1 << 32) &&
             !(h.hash_cap & (h.hash_cap - 1)) && h.merges_cap < ((uint64_t)1 << 32) &&
             !(h.merges_cap & (h.merges_cap - 1)) && h.n_merges <= h.merges_cap / 2 && !fstat(fd, &st);
    if (ok) {
        t->n_vocab = (int32_t)h.n_vocab;
        t->pool_len = h.pool_len;
        t->hash_cap = h.hash_cap;
        t->merges_cap = h.merges_cap;
        t->n_merges = h.n_merges;
        t->pool_cap = h.pool_len ? h.pool_len : 1;
        t->pool = malloc(t->pool_cap);
        t->text_off = malloc(h.n_vocab * sizeof *t->text_off);
        t->text_len = malloc(h.n_vocab * sizeof *t->text_len);
        t->attr = malloc(h.n_vocab * sizeof *t->attr);
        t->hash = malloc(h.hash_cap * sizeof *t->hash);
        t->merges = h.merges_cap ? malloc(h.merges_cap * sizeof *t->merges) : NULL;
        part parts[6];
        parts_of(t, parts);
        uint64_t bytes = sizeof h;
        for (int i = 0; i < 6; i++) {
            ok = ok && (parts[i].p || !parts[i].bytes);
            bytes += parts[i].bytes;
        }
        ok = ok && (uint64_t)st.st_size == bytes;
        for (int i = 0; i < 6 && ok; i++)
            ok = read_full(fd, parts[i].p, parts[i].bytes);
        ok = ok && checksum_of(parts, key) == h.checksum && tables_sound(t);
    }
    close(fd);
    if (ok)
        tern_cache_used(path);
    if (!ok) { /* back to the state before: the tables are built from the text */
        free(t->pool), free(t->text_off), free(t->text_len), free(t->attr), free(t->hash), free(t->merges);
        t->pool = NULL, t->text_off = t->text_len = NULL, t->attr = NULL, t->hash = NULL, t->merges = NULL;
        t->n_vocab = 0, t->pool_len = t->pool_cap = t->hash_cap = t->merges_cap = t->n_merges = 0;
    }
    return ok;
}

tern_err *tok_cache_write(const tern_tokenizer *t, const char *path, uint64_t key) {
    char *tmp;
    TERN_TRY(tern_cache_begin_write(path, &tmp));
    part parts[6];
    parts_of(t, parts);
    header h = {.magic = "TERNTOKT", .version = TOK_CACHE_VERSION, .header_bytes = sizeof h, .key = key,
                .checksum = checksum_of(parts, key), .n_vocab = (uint64_t)t->n_vocab, .pool_len = t->pool_len,
                .hash_cap = t->hash_cap, .merges_cap = t->merges_cap, .n_merges = t->n_merges};
    FILE *f = fopen(tmp, "wb");
    tern_err *e = f ? NULL : tern_errf(TERN_EIO, "%s: cannot create the tokenizer's table cache", tmp);
    if (f) {
        int ok = fwrite(&h, sizeof h, 1, f) == 1;
        for (int i = 0; i < 6 && ok; i++)
            ok = !parts[i].bytes || fwrite(parts[i].p, parts[i].bytes, 1, f) == 1;
        ok = fclose(f) == 0 && ok;
        if (!ok || rename(tmp, path)) {
            unlink(tmp);
            e = tern_errf(TERN_EIO, "%s: cannot write the tokenizer's table cache", path);
        }
    }
    free(tmp);
    if (!e)
        tern_cache_prune(path, TERN_CACHE_MAX_AGE_DAYS);
    return e;
}
