/* prefix_cache.c — the block tree of cached K/V (see prefix_cache.h for the design). */
#include "kv/prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "kv/prefix_disk.h"

struct tern_pc_node {
    tern_pc_node *parent;      /* NULL for a first block; always a whole block */
    tern_pc_node *hnext;       /* next in the hash bucket */
    tern_pc_node *prev, *next; /* list of all nodes (eviction scan) */
    tern_pc_node *child, *sibling; /* the blocks that follow this one (whole and partial), and the next of those */
    uint64_t hash;
    uint64_t chain;            /* names the whole prefix up to this block's end (the disk tier's key for it) */
    int64_t depth;             /* blocks from the root: this block covers [(depth-1)*block, (depth-1)*block + len) */
    int64_t len;               /* tokens held: the block size, or fewer for a partial block (always a leaf) */
    int n_children, pins;
    uint64_t stamp;            /* last use (a lookup through it, or its commit) */
    int32_t *ids;              /* [block], the first len meaningful */
    unsigned char *data;       /* per layer [len] positions of K then V bytes (a whole block: block_bytes) */
    uint64_t bytes;            /* of data: len positions of every layer */
};

struct tern_prefix_cache {
    int64_t block;
    uint64_t cap, block_bytes;
    int n_layers;
    tern_kv_type k_type, v_type;
    size_t *row; /* [n_layers] bytes of K and V per position */
    size_t *off; /* [n_layers] offset of the layer's K in a block's data */
    size_t *pos_off; /* [n_layers] the same for a block of one position (a block of len: len x this) */
    uint64_t pos_bytes; /* one position of every layer */
    tern_pc_node **buckets;
    size_t n_buckets;
    tern_pc_node *all;
    tern_pc_node *roots; /* first blocks (the root's children) */
    tern_pc_disk *disk;  /* the disk tier, or NULL */
    tern_pc_cursor *cursors; /* every cursor: a running sequence's unfinished block is matched too */
    uint64_t clock;
    tern_prefix_cache_stats st;
};

struct tern_pc_cursor {
    tern_prefix_cache *pc;
    tern_pc_node *parent;   /* last committed block of the captured sequence (pinned), NULL at the root */
    int active;
    int64_t pos;            /* next position to capture */
    unsigned char *pending; /* block_bytes, the block being filled */
    int32_t *pending_ids;   /* [block] its tokens */
    tern_pc_cursor *next;   /* the cache's cursors */
};

static uint64_t hash_block(const tern_pc_node *parent, const int32_t *ids, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)(uintptr_t)parent;
    for (int64_t i = 0; i < n; i++) {
        h ^= (uint32_t)ids[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

tern_err *tern_prefix_cache_create(const tern_kv *kv, int64_t block, uint64_t cap_bytes, tern_prefix_cache **out) {
    *out = NULL;
    if (block <= 0 || block > (1 << 20))
        return tern_errf(TERN_EINVAL, "prefix cache: block of %lld tokens out of range [1, 1048576]", (long long)block);
    tern_prefix_cache *pc = calloc(1, sizeof *pc);
    int n = tern_kv_n_layers(kv);
    if (pc) {
        pc->row = calloc((size_t)(n ? n : 1), sizeof *pc->row);
        pc->off = calloc((size_t)(n ? n : 1), sizeof *pc->off);
        pc->pos_off = calloc((size_t)(n ? n : 1), sizeof *pc->pos_off);
        pc->n_buckets = 256;
        pc->buckets = calloc(pc->n_buckets, sizeof *pc->buckets);
    }
    if (!pc || !pc->row || !pc->off || !pc->pos_off || !pc->buckets) {
        tern_prefix_cache_free(pc);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    pc->block = block;
    pc->cap = cap_bytes;
    pc->n_layers = n;
    pc->k_type = tern_kv_k_type(kv);
    pc->v_type = tern_kv_v_type(kv);
    uint64_t bytes = 0;
    for (int l = 0; l < n; l++) {
        pc->row[l] = tern_kv_pos_bytes(kv, l);
        pc->off[l] = (size_t)bytes;
        pc->pos_off[l] = (size_t)pc->pos_bytes;
        bytes += (uint64_t)block * pc->row[l];
        pc->pos_bytes += pc->row[l];
    }
    pc->block_bytes = bytes ? bytes : 1;
    pc->st.cap = cap_bytes;
    pc->st.block_bytes = pc->block_bytes;
    *out = pc;
    return NULL;
}

static void node_free(tern_pc_node *n) {
    if (!n)
        return;
    free(n->ids);
    free(n->data);
    free(n);
}

void tern_prefix_cache_free(tern_prefix_cache *pc) {
    if (!pc)
        return;
    for (tern_pc_node *n = pc->all, *next; n; n = next) {
        next = n->next;
        node_free(n);
    }
    tern_pc_disk_close(pc->disk);
    free(pc->buckets);
    free(pc->row);
    free(pc->off);
    free(pc->pos_off);
    free(pc);
}

tern_err *tern_prefix_cache_open_disk(tern_prefix_cache *pc, const char *dir, uint64_t model_key, uint64_t cap_bytes) {
    /* what a block's bytes mean: the model, and the layout of its layers' K and V */
    uint64_t key = tern_mix64(model_key ^ 0x707265666978ull) ^ (uint64_t)pc->block * 0x9e3779b97f4a7c15ull;
    key = tern_mix64(key ^ ((uint64_t)pc->k_type << 8 | (uint64_t)pc->v_type) ^ (uint64_t)pc->n_layers << 16);
    for (int l = 0; l < pc->n_layers; l++)
        key = tern_mix64(key ^ (uint64_t)pc->row[l]);
    tern_pc_disk_close(pc->disk);
    pc->disk = NULL;
    return tern_pc_disk_open(dir, key, pc->block, pc->block_bytes, cap_bytes, &pc->disk);
}

void tern_prefix_cache_flush(tern_prefix_cache *pc) {
    if (pc->disk)
        tern_pc_disk_flush(pc->disk);
}

int64_t tern_prefix_cache_block(const tern_prefix_cache *pc) { return pc->block; }

void tern_prefix_cache_stats_get(const tern_prefix_cache *pc, tern_prefix_cache_stats *out) {
    *out = pc->st;
    if (pc->disk) {
        tern_pc_disk_stats d;
        tern_pc_disk_stats_get(pc->disk, &d);
        out->disk_bytes = d.bytes;
        out->disk_files = d.files;
        out->disk_cap = d.cap;
        out->disk_writes = d.writes;
        out->disk_dropped = d.dropped;
        out->disk_reads = d.reads;
        out->disk_removed_bad = d.removed_bad;
    }
}

/* The whole block after `parent` spelling ids[0, block), or NULL. */
static tern_pc_node *find_child(const tern_prefix_cache *pc, const tern_pc_node *parent, const int32_t *ids,
                                uint64_t h) {
    for (tern_pc_node *n = pc->buckets[h & (pc->n_buckets - 1)]; n; n = n->hnext)
        if (n->hash == h && n->parent == parent && n->len == pc->block &&
            !memcmp(n->ids, ids, (size_t)pc->block * sizeof *ids))
            return n;
    return NULL;
}

static tern_pc_node **children_of(tern_prefix_cache *pc, tern_pc_node *parent) {
    return parent ? &parent->child : &pc->roots;
}

/* Tokens a[0, n) and b[0, n) have in common from the start. */
static int64_t common_prefix(const int32_t *a, const int32_t *b, int64_t n) {
    int64_t k = 0;
    while (k < n && a[k] == b[k])
        k++;
    return k;
}

/* The block after `parent` sharing the longest start with ids[0, n) (n <= block), and how many tokens it shares. */
static tern_pc_node *best_child(tern_prefix_cache *pc, tern_pc_node *parent, const int32_t *ids, int64_t n,
                                int64_t *shared) {
    tern_pc_node *best = NULL;
    *shared = 0;
    for (tern_pc_node *c = *children_of(pc, parent); c; c = c->sibling) {
        int64_t k = common_prefix(c->ids, ids, c->len < n ? c->len : n);
        if (k > *shared) {
            *shared = k;
            best = c;
        }
    }
    return best;
}

tern_err *tern_prefix_cache_restore(const tern_prefix_cache *pc, const tern_pc_node *tail, int64_t n_tokens,
                                    tern_kv *kv, int seq) {
    if (!tail)
        return NULL;
    const int64_t start = (tail->depth - 1) * pc->block;
    if (n_tokens <= start || n_tokens > start + tail->len)
        return tern_errf(TERN_EINVAL, "prefix cache: %lld tokens do not end in the matched block [%lld, %lld]",
                         (long long)n_tokens, (long long)start + 1, (long long)(start + tail->len));
    if (tern_kv_n_layers(kv) != pc->n_layers || tern_kv_k_type(kv) != pc->k_type || tern_kv_v_type(kv) != pc->v_type)
        return tern_errf(TERN_EINVAL, "prefix cache: the KV cache has a different shape than the cached blocks");
    for (int l = 0; l < pc->n_layers; l++)
        if (tern_kv_pos_bytes(kv, l) != pc->row[l])
            return tern_errf(TERN_EINVAL, "prefix cache: layer %d rows differ from the cached blocks", l);
    if (seq < 0 || seq >= tern_kv_n_seq(kv) || tern_kv_len(kv, seq) != 0)
        return tern_errf(TERN_EINVAL, "prefix cache: sequence %d is not empty", seq);
    const int64_t B = n_tokens, blk = pc->block;
    if (B > tern_kv_ctx(kv))
        return tern_errf(TERN_EINVAL, "prefix cache: %lld cached tokens exceed the context of %lld", (long long)B,
                         (long long)tern_kv_ctx(kv));
    for (const tern_pc_node *n = tail; n; n = n->parent) {
        int64_t p0 = (n->depth - 1) * blk, end = p0 + blk < B ? blk : B - p0;
        for (int l = 0; l < pc->n_layers; l++) {
            int64_t slots = tern_kv_slots(kv, l), first = B > slots ? B - slots : 0; /* what a ring still holds */
            if (p0 + end <= first)
                continue;
            const unsigned char *rows = n->data + (size_t)n->len * pc->pos_off[l];
            for (int64_t i = first > p0 ? first - p0 : 0; i < end; i++)
                tern_kv_import_pos(kv, l, seq, p0 + i, rows + (size_t)i * pc->row[l]);
        }
    }
    return tern_kv_set_len(kv, seq, B);
}

/* ---- eviction and insertion ------------------------------------------------------------------ */

static void unlink_node(tern_prefix_cache *pc, tern_pc_node *n) {
    if (pc->disk)
        tern_pc_disk_resident(pc->disk, n->chain, 0);
    tern_pc_node **pp = &pc->buckets[n->hash & (pc->n_buckets - 1)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    if (n->prev)
        n->prev->next = n->next;
    else
        pc->all = n->next;
    if (n->next)
        n->next->prev = n->prev;
    tern_pc_node **cp = children_of(pc, n->parent);
    while (*cp != n)
        cp = &(*cp)->sibling;
    *cp = n->sibling;
    if (n->parent)
        n->parent->n_children--;
    pc->st.bytes -= n->bytes;
    pc->st.blocks--;
}

/* Evicts the least recently used leaf nobody is extending (deepest first on ties); 0 if there is none. */
static int evict_one(tern_prefix_cache *pc) {
    tern_pc_node *best = NULL;
    for (tern_pc_node *n = pc->all; n; n = n->next)
        if (!n->n_children && !n->pins &&
            (!best || n->stamp < best->stamp || (n->stamp == best->stamp && n->depth > best->depth)))
            best = n;
    if (!best)
        return 0;
    unlink_node(pc, best);
    node_free(best);
    pc->st.evicted++;
    return 1;
}

static void grow_buckets(tern_prefix_cache *pc) {
    size_t nb = pc->n_buckets * 2;
    tern_pc_node **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < pc->n_buckets; i++)
        for (tern_pc_node *n = pc->buckets[i], *next; n; n = next) {
            next = n->hnext;
            n->hnext = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
        }
    free(pc->buckets);
    pc->buckets = b;
    pc->n_buckets = nb;
}

static void pin(tern_pc_node *n) {
    if (n)
        n->pins++;
}

static void unpin(tern_pc_node *n) {
    if (n)
        n->pins--;
}

/* Partial blocks after `parent` whose tokens all begin ids[0, len) say nothing more than a block holding those: they
 * go (unless `keep` or pinned). */
static void drop_covered(tern_prefix_cache *pc, tern_pc_node *parent, const int32_t *ids, int64_t len,
                         const tern_pc_node *keep) {
    for (tern_pc_node *c = *children_of(pc, parent), *next; c; c = next) {
        next = c->sibling;
        if (c != keep && c->len < len && !c->pins && !c->n_children && common_prefix(c->ids, ids, c->len) == c->len) {
            unlink_node(pc, c);
            node_free(c);
        }
    }
}

static uint64_t node_hash(const tern_prefix_cache *pc, const tern_pc_node *parent, const int32_t *ids, int64_t len) {
    return len == pc->block ? hash_block(parent, ids, len) : hash_block(parent, ids, len) ^ (uint64_t)len;
}

/* Inserts a block of ids[0, len) with K/V bytes *data (taken: *data becomes NULL) after parent; NULL when there is
 * no room. A block that did not come from the disk tier is queued for it. */
static tern_pc_node *insert(tern_prefix_cache *pc, tern_pc_node *parent, const int32_t *ids, int64_t len,
                            unsigned char **data, int from_disk) {
    tern_pc_node *n = NULL;
    const uint64_t bytes = len == pc->block ? pc->block_bytes : (uint64_t)len * pc->pos_bytes;
    pin(parent); /* room is made by evicting leaves: not the one this block extends */
    while (pc->st.bytes + bytes > pc->cap)
        if (!evict_one(pc))
            break;
    unpin(parent);
    unsigned char *compact = NULL; /* a partial block keeps only its positions */
    if (pc->st.bytes + bytes > pc->cap || !(n = calloc(1, sizeof *n)) ||
        !(n->ids = malloc((size_t)pc->block * sizeof *n->ids)) ||
        (len < pc->block && !(compact = malloc((size_t)bytes)))) {
        if (n)
            free(n->ids);
        free(n);
        return NULL;
    }
    const uint64_t h = node_hash(pc, parent, ids, len);
    memcpy(n->ids, ids, (size_t)len * sizeof *n->ids);
    n->len = len;
    n->parent = parent;
    n->chain = tern_pc_disk_chain(parent ? parent->chain : 0, ids, len);
    if (pc->disk && !from_disk) /* the disk keeps every block in the whole-block layout */
        tern_pc_disk_put(pc->disk, parent ? parent->chain : 0, n->chain, ids, len, *data);
    if (compact) {
        for (int l = 0; l < pc->n_layers; l++)
            memcpy(compact + (size_t)len * pc->pos_off[l], *data + pc->off[l], (size_t)len * pc->row[l]);
        free(*data);
        n->data = compact;
    } else {
        n->data = *data;
    }
    *data = NULL;
    n->bytes = bytes;
    if (pc->disk)
        tern_pc_disk_resident(pc->disk, n->chain, 1);
    n->depth = parent ? parent->depth + 1 : 1;
    n->hash = h;
    n->hnext = pc->buckets[h & (pc->n_buckets - 1)];
    pc->buckets[h & (pc->n_buckets - 1)] = n;
    n->next = pc->all;
    if (pc->all)
        pc->all->prev = n;
    pc->all = n;
    tern_pc_node **kids = children_of(pc, n->parent);
    n->sibling = *kids;
    *kids = n;
    if (n->parent)
        n->parent->n_children++;
    pc->st.bytes += bytes;
    pc->st.blocks++;
    pc->st.inserted++;
    if (pc->st.blocks > 2 * pc->n_buckets)
        grow_buckets(pc);
    return n;
}

/* ---- prefetching from the disk tier ----------------------------------------------------------------------- */

typedef struct prefetched {
    uint64_t parent, chain;
    int64_t len, shared; /* its tokens; for the partial one, how many agree with the prompt */
    int32_t *ids;
    unsigned char *data; /* taken by a match that uses it */
} prefetched;

struct tern_pc_prefetch {
    prefetched *b;
    int n;
};

void tern_pc_prefetch_free(tern_pc_prefetch *p) {
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        free(p->b[i].ids);
        free(p->b[i].data);
    }
    free(p->b);
    free(p);
}

tern_pc_prefetch *tern_prefix_cache_prefetch(const tern_prefix_cache *pc, const int32_t *ids, int64_t n) {
    if (!pc->disk || n < 1)
        return NULL;
    const int64_t blk = pc->block;
    tern_pc_prefetch *p = calloc(1, sizeof *p);
    if (!p || !(p->b = calloc((size_t)(n / blk + 1), sizeof *p->b))) {
        free(p);
        return NULL;
    }
    uint64_t parent = 0;
    int64_t got = 0;
    for (; got + blk <= n; got += blk) { /* whole blocks: those memory holds are not read */
        uint64_t chain = tern_pc_disk_chain(parent, ids + got, blk);
        if (!tern_pc_disk_is_resident(pc->disk, chain)) {
            prefetched *e = &p->b[p->n];
            e->data = malloc((size_t)pc->block_bytes);
            e->ids = malloc((size_t)blk * sizeof *e->ids);
            if (!e->data || !e->ids || !tern_pc_disk_get_block(pc->disk, parent, ids + got, e->data))
                break;
            memcpy(e->ids, ids + got, (size_t)blk * sizeof *ids);
            e->parent = parent, e->chain = chain, e->len = e->shared = blk;
            p->n++;
        }
        parent = chain;
    }
    const int64_t rest = n - got < blk ? n - got : blk;
    prefetched *e = &p->b[p->n];
    if (rest > 0 && !e->data && !e->ids) {
        e->data = malloc((size_t)pc->block_bytes);
        e->ids = malloc((size_t)blk * sizeof *e->ids);
    }
    if (rest > 0 && e->data && e->ids &&
        (e->shared = tern_pc_disk_get_best(pc->disk, parent, ids + got, rest, e->ids, &e->len, e->data)) > 0) {
        e->parent = parent;
        e->chain = tern_pc_disk_chain(parent, e->ids, e->len);
        p->n++;
    }
    if (p->n < n / blk + 1) { /* an entry begun but not filled */
        free(p->b[p->n].ids);
        free(p->b[p->n].data);
        p->b[p->n].ids = NULL;
        p->b[p->n].data = NULL;
    }
    if (!p->n) {
        tern_pc_prefetch_free(p);
        return NULL;
    }
    return p;
}

/* The prefetched whole block with chain hash `chain`, still holding its data, or NULL. */
static prefetched *prefetched_block(tern_pc_prefetch *p, uint64_t chain, int64_t block) {
    for (int i = 0; p && i < p->n; i++)
        if (p->b[i].data && p->b[i].chain == chain && p->b[i].len == block)
            return &p->b[i];
    return NULL;
}

/* The whole block after `parent` spelling ids[0, block) from the disk tier (or what was prefetched of it), into
 * memory; NULL when it has none. */
static tern_pc_node *adopt_block(tern_prefix_cache *pc, tern_pc_node *parent, const int32_t *ids,
                                 tern_pc_prefetch *pf) {
    const uint64_t pchain = parent ? parent->chain : 0;
    prefetched *e = prefetched_block(pf, tern_pc_disk_chain(pchain, ids, pc->block), pc->block);
    if (e)
        return insert(pc, parent, ids, pc->block, &e->data, 1);
    unsigned char *data = malloc((size_t)pc->block_bytes);
    tern_pc_node *n = NULL;
    if (data && tern_pc_disk_get_block(pc->disk, pchain, ids, data))
        n = insert(pc, parent, ids, pc->block, &data, 1);
    free(data);
    return n;
}

/* The disk tier's block after `parent` agreeing with ids[0, n) for more than `beat` tokens (or what was prefetched
 * of it), into memory (how many in *shared); NULL when it has none. */
static tern_pc_node *adopt_best(tern_prefix_cache *pc, tern_pc_node *parent, const int32_t *ids, int64_t n,
                                int64_t beat, int64_t *shared, tern_pc_prefetch *pf) {
    unsigned char *data = NULL;
    int32_t *bids = malloc((size_t)pc->block * sizeof *bids);
    int64_t len = 0, k = 0;
    tern_pc_node *got = NULL;
    *shared = 0;
    const uint64_t pchain = parent ? parent->chain : 0;
    prefetched *e = NULL;
    for (int i = 0; pf && i < pf->n && !e; i++) /* the prefetched block after parent agreeing longest */
        if (pf->b[i].data && pf->b[i].parent == pchain) {
            int64_t m = pf->b[i].len < n ? pf->b[i].len : n, j = 0;
            while (j < m && pf->b[i].ids[j] == ids[j])
                j++;
            if (j > beat && j > k) {
                e = &pf->b[i];
                k = j;
            }
        }
    if (e && bids) {
        memcpy(bids, e->ids, (size_t)e->len * sizeof *bids);
        len = e->len;
        data = e->data;
        e->data = NULL;
    } else {
        k = 0;
        data = malloc((size_t)pc->block_bytes);
    }
    if (data && bids && beat < n) {
        if (!e)
            k = tern_pc_disk_get_best(pc->disk, pchain, ids, n, bids, &len, data);
        tern_pc_node *have = NULL;
        for (tern_pc_node *c = k > beat ? *children_of(pc, parent) : NULL; c && !have; c = c->sibling)
            if (c->len == len && !memcmp(c->ids, bids, (size_t)len * sizeof *bids))
                have = c;
        if (have) /* already in memory after all */
            got = have;
        else if (k > beat)
            got = insert(pc, parent, bids, len, &data, 1);
        if (got)
            *shared = k;
    }
    free(data);
    free(bids);
    return got;
}

/* A running sequence's unfinished block after `parent` agreeing with ids[0, n) for more than `beat` tokens: its
 * positions so far become a partial block (a copy; the sequence goes on filling its own), NULL when none does. */
static tern_pc_node *adopt_running(tern_prefix_cache *pc, tern_pc_node *parent, const int32_t *ids, int64_t n,
                                   int64_t beat, int64_t *shared) {
    tern_pc_cursor *best = NULL;
    int64_t k = beat;
    for (tern_pc_cursor *c = pc->cursors; c; c = c->next) {
        int64_t have = c->pos % pc->block;
        if (!c->active || c->parent != parent || !have || !c->pending)
            continue;
        int64_t j = common_prefix(c->pending_ids, ids, have < n ? have : n);
        if (j > k) {
            k = j;
            best = c;
        }
    }
    unsigned char *copy = best ? malloc((size_t)pc->block_bytes) : NULL;
    if (!copy)
        return NULL;
    const int64_t have = best->pos % pc->block;
    for (int l = 0; l < pc->n_layers; l++)
        memcpy(copy + pc->off[l], best->pending + pc->off[l], (size_t)have * pc->row[l]);
    tern_pc_node *node = insert(pc, parent, best->pending_ids, have, &copy, 0);
    free(copy);
    *shared = node ? k : 0;
    return node;
}

int64_t tern_prefix_cache_peek(const tern_prefix_cache *pc, const int32_t *ids, int64_t n) {
    const tern_pc_node *cur = NULL;
    int64_t got = 0, k = 0;
    while (got + pc->block <= n) {
        const tern_pc_node *c = find_child(pc, cur, ids + got, hash_block(cur, ids + got, pc->block));
        if (!c)
            break;
        cur = c;
        got += pc->block;
    }
    if (got < n)
        best_child((tern_prefix_cache *)pc, (tern_pc_node *)cur, ids + got, n - got < pc->block ? n - got : pc->block,
                   &k);
    return got + k;
}

int64_t tern_pc_prefetch_tokens(const tern_pc_prefetch *p) {
    int64_t t = 0;
    for (int i = 0; p && i < p->n; i++)
        t += p->b[i].shared;
    return t;
}

int64_t tern_prefix_cache_match(tern_prefix_cache *pc, const int32_t *ids, int64_t n, const tern_pc_node **tail) {
    return tern_prefix_cache_match_prefetched(pc, ids, n, NULL, tail);
}

int64_t tern_prefix_cache_match_prefetched(tern_prefix_cache *pc, const int32_t *ids, int64_t n, tern_pc_prefetch *pf,
                                           const tern_pc_node **tail) {
    *tail = NULL;
    pc->st.lookups++;
    if (!pc->all && !pc->disk)
        return 0;
    uint64_t stamp = ++pc->clock;
    tern_pc_node *cur = NULL;
    int64_t got = 0;
    while (got + pc->block <= n) {
        tern_pc_node *c = find_child(pc, cur, ids + got, hash_block(cur, ids + got, pc->block));
        if (!c)
            break;
        c->stamp = stamp;
        cur = c;
        got += pc->block;
    }
    int64_t from_disk = 0;
    while (pc->disk && got + pc->block <= n) { /* whole blocks the memory tier no longer (or never) held */
        tern_pc_node *c = adopt_block(pc, cur, ids + got, pf);
        if (!c)
            break;
        c->stamp = stamp;
        cur = c;
        got += pc->block;
        from_disk += pc->block;
    }
    /* then to the token: the start of whichever following block (whole or partial, in memory or on disk) agrees
     * longest */
    const int64_t rest = n - got < pc->block ? n - got : pc->block;
    int64_t k = 0, kd = 0;
    tern_pc_node *part = got < n ? best_child(pc, cur, ids + got, rest, &k) : NULL;
    tern_pc_node *live = got < n ? adopt_running(pc, cur, ids + got, rest, k, &kd) : NULL;
    if (live) {
        part = live;
        k = kd;
    }
    tern_pc_node *dpart = got < n && pc->disk ? adopt_best(pc, cur, ids + got, rest, k, &kd, pf) : NULL;
    if (dpart) {
        part = dpart;
        k = kd;
        from_disk += kd;
    }
    if (part) {
        part->stamp = stamp;
        cur = part;
        got += k;
    }
    if (got) {
        pc->st.hits++;
        pc->st.hit_tokens += (uint64_t)got;
        pc->st.disk_hit_tokens += (uint64_t)from_disk;
    }
    *tail = cur;
    return got;
}

static void stop(tern_pc_cursor *c, int keep_partial);

/* The cursor's pending block is complete: find or insert it, and move on. */
static void commit(tern_pc_cursor *c) {
    tern_prefix_cache *pc = c->pc;
    const int32_t *ids = c->pending_ids;
    uint64_t h = hash_block(c->parent, ids, pc->block);
    tern_pc_node *n = find_child(pc, c->parent, ids, h);
    if (!n && !(n = insert(pc, c->parent, ids, pc->block, &c->pending, 0))) {
        stop(c, 0); /* no room: this sequence stops adding blocks */
        return;
    }
    drop_covered(pc, c->parent, ids, pc->block, n);
    n->stamp = ++pc->clock;
    pin(n);
    unpin(c->parent);
    c->parent = n;
}

/* A capture ends inside a block: its first len tokens are kept as a partial block, unless a block after the same
 * parent already starts with them. */
static void commit_partial(tern_pc_cursor *c, int64_t len) {
    tern_prefix_cache *pc = c->pc;
    int64_t shared;
    tern_pc_node *have = best_child(pc, c->parent, c->pending_ids, len, &shared);
    if (have && shared == len) {
        have->stamp = ++pc->clock;
        return;
    }
    tern_pc_node *n = insert(pc, c->parent, c->pending_ids, len, &c->pending, 0);
    if (n) {
        n->stamp = ++pc->clock;
        drop_covered(pc, c->parent, n->ids, len, n);
    }
}

/* ---- cursors ---------------------------------------------------------------------------------- */

tern_err *tern_pc_cursor_new(tern_prefix_cache *pc, tern_pc_cursor **out) {
    *out = calloc(1, sizeof **out);
    if (!*out)
        return tern_errf(TERN_ENOMEM, "out of memory");
    (*out)->pc = pc;
    (*out)->next = pc->cursors;
    pc->cursors = *out;
    return NULL;
}

void tern_pc_cursor_free(tern_pc_cursor *c) {
    if (!c)
        return;
    tern_pc_cursor_end(c);
    for (tern_pc_cursor **pp = &c->pc->cursors; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    free(c->pending);
    free(c->pending_ids);
    free(c);
}

/* Room for the pending block; 0, or -1 when out of memory. */
static int reserve_pending(tern_pc_cursor *c) {
    if (!c->pending && !(c->pending = malloc((size_t)c->pc->block_bytes)))
        return -1;
    if (!c->pending_ids && !(c->pending_ids = malloc((size_t)c->pc->block * sizeof *c->pending_ids)))
        return -1;
    return 0;
}

void tern_pc_cursor_begin(tern_pc_cursor *c, const tern_pc_node *tail, int64_t pos) {
    tern_pc_cursor_end(c);
    tern_prefix_cache *pc = c->pc;
    const int64_t start = tail ? (tail->depth - 1) * pc->block : 0, k = pos - start;
    if (pc->cap < pc->block_bytes || (tail ? k < 1 || k > tail->len : pos != 0))
        return;
    /* the cache owns its nodes; cursors only pin the whole block they extend */
    tern_pc_node *parent = (tern_pc_node *)tail;
    if (tail && k < pc->block) { /* resumed inside a block: its first k positions are the pending block's */
        if (reserve_pending(c))
            return;
        for (int l = 0; l < pc->n_layers; l++)
            memcpy(c->pending + pc->off[l], tail->data + (size_t)tail->len * pc->pos_off[l], (size_t)k * pc->row[l]);
        memcpy(c->pending_ids, tail->ids, (size_t)k * sizeof *c->pending_ids);
        parent = tail->parent;
    }
    c->parent = parent;
    pin(c->parent);
    c->pos = pos;
    c->active = 1;
}

void tern_pc_cursor_capture(tern_pc_cursor *c, const tern_kv *kv, int seq, const int32_t *ids, int64_t len) {
    tern_prefix_cache *pc = c->pc;
    const int64_t blk = pc->block, kv_len = tern_kv_len(kv, seq);
    if (len > kv_len)
        len = kv_len;
    while (c->active && c->pos < len) {
        if (reserve_pending(c)) {
            stop(c, 0);
            return;
        }
        int64_t p = c->pos, i = p % blk;
        for (int l = 0; l < pc->n_layers; l++) {
            if (!tern_kv_holds(kv, l, seq, p)) { /* captured too late: the ring moved on */
                tern_pc_cursor_end(c);
                return;
            }
            tern_kv_export_pos(kv, l, seq, p, c->pending + pc->off[l] + (size_t)i * pc->row[l]);
        }
        c->pending_ids[i] = ids[p];
        c->pos++;
        if (c->pos % blk == 0)
            commit(c);
    }
}

static void stop(tern_pc_cursor *c, int keep_partial) {
    if (c->active && keep_partial && c->pos % c->pc->block && c->pending)
        commit_partial(c, c->pos % c->pc->block);
    unpin(c->parent);
    c->parent = NULL;
    c->active = 0;
    c->pos = 0;
}

void tern_pc_cursor_end(tern_pc_cursor *c) {
    if (c)
        stop(c, 1);
}
