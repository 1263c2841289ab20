/* token_dfa.c — the grammar's states interned into a lazily built DFA, and token masks by one pass over the sorted
 * vocabulary (see token_dfa.h). */
#include "grammar/token_dfa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

#define MAX_BYTES ((size_t)512 << 20) /* states' stack sets and transition tables, per DFA */
#define MAX_MASKS 512 /* masks kept per DFA (32 KiB each for a 262,144-token vocabulary); past it they are dropped */

struct tern_gvocab {
    size_t n;
    uint8_t *arena;
    size_t *off;
    uint32_t *len;
    uint8_t *eog;
    int32_t *order;  /* the tokens with bytes, sorted by them */
    uint32_t *lcp;   /* lcp[k]: common prefix of order[k - 1] and order[k] */
    size_t n_order;
    uint32_t max_len;
};

static TERN_MUST_CHECK tern_err *oom(void) { return tern_errf(TERN_ENOMEM, "out of memory"); }

static const tern_gvocab *sort_vocab; /* qsort has no context argument: the vocabulary being sorted */

static int cmp_tok(const void *a, const void *b) {
    const tern_gvocab *v = sort_vocab;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->len[x], ly = v->len[y], m = lx < ly ? lx : ly;
    int c = memcmp(v->arena + v->off[x], v->arena + v->off[y], m);
    return c ? c : (lx > ly) - (lx < ly);
}

tern_err *tern_gvocab_new(size_t n, const uint8_t *const *bytes, const uint32_t *lens, const uint8_t *eog,
                          tern_gvocab **out) {
    static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;
    *out = NULL;
    tern_gvocab *v = calloc(1, sizeof *v);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i];
    if (v) {
        v->n = n;
        v->arena = malloc(total ? total : 1);
        v->off = malloc((n ? n : 1) * sizeof *v->off);
        v->len = malloc((n ? n : 1) * sizeof *v->len);
        v->eog = malloc(n ? n : 1);
        v->order = malloc((n ? n : 1) * sizeof *v->order);
        v->lcp = malloc((n ? n : 1) * sizeof *v->lcp);
    }
    if (!v || !v->arena || !v->off || !v->len || !v->eog || !v->order || !v->lcp) {
        tern_gvocab_free(v);
        return oom();
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        v->off[i] = at;
        v->len[i] = lens[i];
        v->eog[i] = eog ? eog[i] : 0;
        if (lens[i])
            memcpy(v->arena + at, bytes[i], lens[i]);
        at += lens[i];
        if (lens[i] && !v->eog[i])
            v->order[v->n_order++] = (int32_t)i;
        if (lens[i] > v->max_len)
            v->max_len = lens[i];
    }
    pthread_mutex_lock(&sort_mu);
    sort_vocab = v;
    qsort(v->order, v->n_order, sizeof *v->order, cmp_tok);
    pthread_mutex_unlock(&sort_mu);
    for (size_t k = 0; k < v->n_order; k++) {
        uint32_t l = 0;
        if (k) {
            int32_t a = v->order[k - 1], b = v->order[k];
            uint32_t m = v->len[a] < v->len[b] ? v->len[a] : v->len[b];
            while (l < m && v->arena[v->off[a] + l] == v->arena[v->off[b] + l])
                l++;
        }
        v->lcp[k] = l;
    }
    *out = v;
    return NULL;
}

void tern_gvocab_free(tern_gvocab *v) {
    if (!v)
        return;
    free(v->arena), free(v->off), free(v->len), free(v->eog), free(v->order), free(v->lcp);
    free(v);
}

size_t tern_gvocab_size(const tern_gvocab *v) { return v->n; }

uint32_t tern_gvocab_max_len(const tern_gvocab *v) { return v->max_len; }

/* ---- the DFA --------------------------------------------------------------------------------------------------- */

typedef struct dstate {
    int32_t *set;    /* the canonical stack set (tern_gstate layout), set_len values */
    size_t set_len;
    int n_stacks;
    uint64_t hash;
    int32_t *trans;  /* [256]: -1 not computed yet, -2 the byte is not allowed, else the next state */
    uint64_t *mask;
    uint8_t complete;
} dstate;

struct tern_gdfa {
    pthread_mutex_t mu;
    const tern_grammar *g;
    const tern_gvocab *v;
    dstate *st;
    size_t n, cap;
    int32_t *table;  /* open addressing: state ids by hash, -1 empty */
    size_t table_cap;
    size_t n_masks;
    size_t bytes;    /* held by the states (sets and transition tables): bounded by MAX_BYTES */
    int32_t start;
    tern_gstate tmp, canon;
    int32_t *path;   /* [max_len + 1] states along the current token */
};

/* Stacks of a set in a canonical order (sorted), so equal sets intern to one state. */
typedef struct sref {
    const int32_t *p;
    int32_t n;
} sref;

static int cmp_stack(const void *a, const void *b) {
    const sref *x = a, *y = b;
    int32_t m = x->n < y->n ? x->n : y->n;
    for (int32_t i = 0; i < m; i++)
        if (x->p[i] != y->p[i])
            return (x->p[i] > y->p[i]) - (x->p[i] < y->p[i]);
    return (x->n > y->n) - (x->n < y->n);
}

static int canonical(const tern_gstate *s, tern_gstate *out) {
    sref *r = malloc((size_t)(s->n ? s->n : 1) * sizeof *r);
    if (!r)
        return -1;
    int k = 0;
    for (size_t i = 0; i < s->len; i += (size_t)s->pos[i] + 1)
        r[k++] = (sref){s->pos + i + 1, s->pos[i]};
    qsort(r, (size_t)k, sizeof *r, cmp_stack);
    if (tern_gstate_copy(out, s)) {
        free(r);
        return -1;
    }
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        out->pos[at++] = r[i].n;
        memcpy(out->pos + at, r[i].p, (size_t)r[i].n * sizeof *out->pos);
        at += (size_t)r[i].n;
    }
    free(r);
    return 0;
}

static int grow_table(tern_gdfa *d) {
    size_t cap = d->table_cap ? 2 * d->table_cap : 1024;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < cap; i++)
        t[i] = -1;
    for (size_t i = 0; i < d->n; i++) {
        size_t h = (size_t)d->st[i].hash & (cap - 1);
        while (t[h] >= 0)
            h = (h + 1) & (cap - 1);
        t[h] = (int32_t)i;
    }
    free(d->table);
    d->table = t;
    d->table_cap = cap;
    return 0;
}

/* The id of state s (interned if new); -1 when out of memory or states. */
static int32_t intern(tern_gdfa *d, const tern_gstate *s) {
    if (canonical(s, &d->canon))
        return -1;
    const tern_gstate *c = &d->canon;
    uint64_t h = tern_hash64(c->pos, c->len * sizeof *c->pos, 0x6772616d6d617221ull);
    if (2 * (d->n + 1) > d->table_cap && grow_table(d))
        return -1;
    size_t i = (size_t)h & (d->table_cap - 1);
    for (; d->table[i] >= 0; i = (i + 1) & (d->table_cap - 1)) {
        const dstate *x = &d->st[d->table[i]];
        if (x->hash == h && x->set_len == c->len && !memcmp(x->set, c->pos, c->len * sizeof *c->pos))
            return d->table[i];
    }
    if (d->n >= TERN_GDFA_MAX_STATES || d->bytes + c->len * sizeof *c->pos + 256 * sizeof(int32_t) > MAX_BYTES)
        return -1;
    d->bytes += c->len * sizeof *c->pos + 256 * sizeof(int32_t);
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 256;
        dstate *v = realloc(d->st, cap * sizeof *v);
        if (!v)
            return -1;
        d->st = v, d->cap = cap;
    }
    dstate *x = &d->st[d->n];
    memset(x, 0, sizeof *x);
    x->set = malloc((c->len ? c->len : 1) * sizeof *x->set);
    if (!x->set)
        return -1;
    memcpy(x->set, c->pos, c->len * sizeof *x->set);
    x->set_len = c->len;
    x->n_stacks = c->n;
    x->hash = h;
    x->complete = (uint8_t)(tern_gstate_final(c) ? 2 : tern_gstate_complete(c));
    d->table[i] = (int32_t)d->n;
    return (int32_t)d->n++;
}

/* The state after byte b from state s: an id, -2 not allowed, -1 out of memory / states. */
static int32_t step(tern_gdfa *d, int32_t s, uint8_t b) {
    dstate *x = &d->st[s];
    if (!x->trans) {
        if (!(x->trans = malloc(256 * sizeof *x->trans)))
            return -1;
        for (int i = 0; i < 256; i++)
            x->trans[i] = -1;
    }
    if (x->trans[b] != -1)
        return x->trans[b];
    tern_gstate in = {.pos = x->set, .len = x->set_len, .cap = x->set_len, .n = x->n_stacks};
    if (tern_gstate_byte(d->g, &in, b, &d->tmp))
        return -1;
    int32_t next = d->tmp.n == 0 ? -2 : intern(d, &d->tmp);
    if (next == -1)
        return -1;
    d->st[s].trans[b] = next; /* d->st may have moved */
    return next;
}

tern_err *tern_gdfa_new(const tern_grammar *g, const tern_gvocab *v, tern_gdfa **out) {
    *out = NULL;
    tern_gdfa *d = calloc(1, sizeof *d);
    if (!d)
        return oom();
    pthread_mutex_init(&d->mu, NULL);
    d->g = g;
    d->v = v;
    d->path = malloc((v->max_len + 1) * sizeof *d->path);
    tern_gstate s0;
    tern_err *err = d->path ? tern_gstate_init(g, &s0) : oom();
    if (!err) {
        d->start = intern(d, &s0);
        tern_gstate_free(&s0);
        if (d->start < 0)
            err = oom();
    }
    if (err) {
        tern_gdfa_free(d);
        return err;
    }
    *out = d;
    return NULL;
}

void tern_gdfa_free(tern_gdfa *d) {
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->st[i].set), free(d->st[i].trans), free(d->st[i].mask);
    free(d->st);
    free(d->table);
    free(d->path);
    tern_gstate_free(&d->tmp);
    tern_gstate_free(&d->canon);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

int32_t tern_gdfa_start(tern_gdfa *d) { return d->start; }

int32_t tern_gdfa_token(tern_gdfa *d, int32_t s, int32_t tok) {
    const tern_gvocab *v = d->v;
    if (tok < 0 || (size_t)tok >= v->n)
        return -2;
    pthread_mutex_lock(&d->mu);
    int32_t r = s;
    if (v->eog[tok])
        r = d->st[s].complete ? s : -2;
    else if (!v->len[tok])
        r = -2;
    else
        for (uint32_t i = 0; i < v->len[tok] && r >= 0; i++)
            r = step(d, r, v->arena[v->off[tok] + i]);
    pthread_mutex_unlock(&d->mu);
    return r;
}

/* The mask of state s into m (zeroed words), by one pass over the sorted vocabulary. */
static int build_mask(tern_gdfa *d, int32_t s, uint64_t *m) {
    const tern_gvocab *v = d->v;
    int32_t *cur = d->path;
    cur[0] = s;
    int64_t dead = -1; /* the depth the previous token's path died at (its byte index), or -1 */
    for (size_t k = 0; k < v->n_order; k++) {
        const int32_t tok = v->order[k];
        const uint32_t l = v->lcp[k], len = v->len[tok];
        if (dead >= 0 && (int64_t)l > dead)
            continue; /* shares the bytes that already failed */
        dead = -1;
        const uint8_t *b = v->arena + v->off[tok];
        uint32_t i = l;
        for (; i < len; i++) {
            int32_t nx = step(d, cur[i], b[i]);
            if (nx == -1)
                return -1;
            if (nx == -2) {
                dead = i;
                break;
            }
            cur[i + 1] = nx;
        }
        if (i == len)
            m[tok >> 6] |= 1ull << (tok & 63);
    }
    if (d->st[s].complete)
        for (size_t t = 0; t < v->n; t++)
            if (v->eog[t])
                m[t >> 6] |= 1ull << (t & 63);
    return 0;
}

int tern_gdfa_mask(tern_gdfa *d, int32_t s, uint64_t *mask) {
    const size_t words = (d->v->n + 63) / 64;
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    if (d->st[s].mask) {
        memcpy(mask, d->st[s].mask, words * sizeof *mask);
    } else {
        memset(mask, 0, words * sizeof *mask);
        rc = build_mask(d, s, mask);
        if (!rc) {
            if (d->n_masks >= MAX_MASKS) { /* drop them all: the ones in use come back at their next step */
                for (size_t i = 0; i < d->n; i++) {
                    free(d->st[i].mask);
                    d->st[i].mask = NULL;
                }
                d->n_masks = 0;
            }
            if ((d->st[s].mask = malloc(words * sizeof *mask))) {
                memcpy(d->st[s].mask, mask, words * sizeof *mask);
                d->n_masks++;
            }
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int tern_gdfa_complete(tern_gdfa *d, int32_t s) {
    pthread_mutex_lock(&d->mu);
    int c = d->st[s].complete;
    pthread_mutex_unlock(&d->mu);
    return c;
}

void tern_gdfa_stats(tern_gdfa *d, size_t *states, size_t *masks) {
    pthread_mutex_lock(&d->mu);
    *states = d->n;
    *masks = d->n_masks;
    pthread_mutex_unlock(&d->mu);
}
