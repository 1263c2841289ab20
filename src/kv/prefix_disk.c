/* prefix_disk.c — the prefix cache's disk tier (see prefix_disk.h). */
#include "kv/prefix_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/log.h"

#define MAGIC "TERNKVB"
#define VERSION 1u
#define N_BUCKETS 4096
#define QUEUE_MAX_BYTES ((uint64_t)256 << 20)

typedef struct file_head {
    char magic[8];
    uint32_t version, len;
    uint64_t key, parent, chain, block, data_bytes, checksum;
} file_head;

typedef struct dentry {
    uint64_t parent, chain, bytes, stamp;
    int64_t len;
    int32_t *ids;
    struct dentry *by_chain, *by_parent; /* next in each bucket */
    struct dentry *prev, *next;          /* every entry */
} dentry;

typedef struct job {
    struct job *next;
    uint64_t parent, chain;
    int64_t len;
    int32_t *ids;
    unsigned char *data;
} job;

struct tern_pc_disk {
    char *dir;
    uint64_t key, block_bytes, cap;
    int64_t block;
    pthread_mutex_t mu;
    pthread_cond_t cv, idle;
    dentry *chain_b[N_BUCKETS], *parent_b[N_BUCKETS];
    dentry *all;
    uint64_t *resident;     /* open-addressing set of the chains the memory tier holds (0 = empty slot) */
    size_t n_resident, cap_resident;
    job *q_head, *q_tail;
    uint64_t queued_bytes;
    int writing, stopping;
    pthread_t thread;
    tern_pc_disk_stats st;
};

/* 0 when all n bytes were read (writing: written). */
static int io_all(int fd, void *buf, size_t n, int writing) {
    for (unsigned char *p = buf; n;) {
        ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n) { return io_all(fd, buf, n, 0); }
static int write_all(int fd, const void *buf, size_t n) { return io_all(fd, (void *)buf, n, 1); }

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t tern_pc_disk_chain(uint64_t parent, const int32_t *ids, int64_t len) {
    return tern_mix64(tern_hash64(ids, (size_t)len * sizeof *ids, parent ^ 0x6b76626c6f636b00ull) ^ (uint64_t)len);
}

static uint64_t checksum(const int32_t *ids, int64_t len, const void *data, uint64_t bytes) {
    return tern_hash64(ids, (size_t)len * sizeof *ids, 11) ^ tern_mix64(tern_hash64(data, (size_t)bytes, 13));
}

static void file_name(const tern_pc_disk *d, uint64_t chain, char *out, size_t cap) {
    snprintf(out, cap, "%s/%016llx.kvb", d->dir, (unsigned long long)chain);
}

/* ---- the index (under mu) ------------------------------------------------------------------------------ */

static dentry *find(tern_pc_disk *d, uint64_t chain) {
    for (dentry *e = d->chain_b[chain % N_BUCKETS]; e; e = e->by_chain)
        if (e->chain == chain)
            return e;
    return NULL;
}

static void add_entry(tern_pc_disk *d, dentry *e) {
    e->by_chain = d->chain_b[e->chain % N_BUCKETS];
    d->chain_b[e->chain % N_BUCKETS] = e;
    e->by_parent = d->parent_b[e->parent % N_BUCKETS];
    d->parent_b[e->parent % N_BUCKETS] = e;
    e->next = d->all;
    if (d->all)
        d->all->prev = e;
    d->all = e;
    d->st.bytes += e->bytes;
    d->st.files++;
}

/* Unlinks e from the index and frees it (the file is the caller's business). */
static void drop_entry(tern_pc_disk *d, dentry *e) {
    dentry **pp = &d->chain_b[e->chain % N_BUCKETS];
    while (*pp != e)
        pp = &(*pp)->by_chain;
    *pp = e->by_chain;
    pp = &d->parent_b[e->parent % N_BUCKETS];
    while (*pp != e)
        pp = &(*pp)->by_parent;
    *pp = e->by_parent;
    if (e->prev)
        e->prev->next = e->next;
    else
        d->all = e->next;
    if (e->next)
        e->next->prev = e->prev;
    d->st.bytes -= e->bytes;
    d->st.files--;
    free(e->ids);
    free(e);
}

static void remove_file(tern_pc_disk *d, uint64_t chain) {
    char path[4200];
    file_name(d, chain, path, sizeof path);
    unlink(path);
}

/* Least recently used files go until `extra` more bytes fit. */
static void evict_for(tern_pc_disk *d, uint64_t extra) {
    while (d->all && d->st.bytes + extra > d->cap) {
        dentry *lru = d->all;
        for (dentry *e = d->all; e; e = e->next)
            if (e->stamp < lru->stamp)
                lru = e;
        remove_file(d, lru->chain);
        drop_entry(d, lru);
    }
}

/* ---- files --------------------------------------------------------------------------------------------- */

/* Reads and checks a file's header and ids (and, with data, its bytes and checksum). 0 when sound. */
static int read_file(const tern_pc_disk *d, const char *path, file_head *h, int32_t **ids, void *data) {
    *ids = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int bad = fstat(fd, &st) || read_all(fd, h, sizeof *h) || memcmp(h->magic, MAGIC, 8) ||
              h->version != VERSION || h->key != d->key || h->block != (uint64_t)d->block ||
              h->data_bytes != d->block_bytes || h->len < 1 || h->len > (uint64_t)d->block ||
              (uint64_t)st.st_size != sizeof *h + h->len * sizeof(int32_t) + h->data_bytes;
    if (!bad) {
        *ids = malloc(h->len * sizeof **ids);
        bad = !*ids || read_all(fd, *ids, h->len * sizeof **ids) ||
              tern_pc_disk_chain(h->parent, *ids, h->len) != h->chain;
    }
    if (!bad && data)
        bad = read_all(fd, data, h->data_bytes) || checksum(*ids, h->len, data, h->data_bytes) != h->checksum;
    close(fd);
    if (bad) {
        free(*ids);
        *ids = NULL;
    }
    return bad ? -1 : 0;
}

/* Scans the folder: sound files join the index (most recently used by modification time); what is not sound,
 * and temporaries whose writer is gone, are removed. */
static void scan(tern_pc_disk *d) {
    DIR *dir = opendir(d->dir);
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        const char *name = de->d_name;
        size_t n = strlen(name);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", d->dir, name);
        if (n > 4 && !strcmp(name + n - 4, ".tmp")) {
            const char *dot = strchr(name, '.');
            long pid = dot ? strtol(dot + 1, NULL, 10) : 0;
            if (pid <= 0 || (kill((pid_t)pid, 0) && errno == ESRCH))
                unlink(path);
            continue;
        }
        if (n <= 4 || strcmp(name + n - 4, ".kvb"))
            continue;
        file_head h;
        int32_t *ids;
        char want[64];
        int bad = read_file(d, path, &h, &ids, NULL) != 0;
        snprintf(want, sizeof want, "%016llx.kvb", bad ? 0ull : (unsigned long long)h.chain);
        if (!bad && (strcmp(name, want) || find(d, h.chain)))
            bad = 1;
        dentry *e = bad ? NULL : calloc(1, sizeof *e);
        if (!e) {
            free(ids);
            unlink(path);
            d->st.removed_bad += bad;
            continue;
        }
        struct stat st;
        stat(path, &st);
        e->parent = h.parent;
        e->chain = h.chain;
        e->len = (int64_t)h.len;
        e->ids = ids;
        e->bytes = (uint64_t)st.st_size;
        e->stamp = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
        add_entry(d, e);
    }
    closedir(dir);
    evict_for(d, 0);
}

static int write_file(tern_pc_disk *d, const job *j, uint64_t *bytes) {
    char path[4200], tmp[4300];
    file_name(d, j->chain, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/%016llx.%ld.tmp", d->dir, (unsigned long long)j->chain, (long)getpid());
    file_head h = {.version = VERSION,
                   .len = (uint32_t)j->len,
                   .key = d->key,
                   .parent = j->parent,
                   .chain = j->chain,
                   .block = (uint64_t)d->block,
                   .data_bytes = d->block_bytes,
                   .checksum = checksum(j->ids, j->len, j->data, d->block_bytes)};
    memcpy(h.magic, MAGIC, 8);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int bad = write_all(fd, &h, sizeof h) || write_all(fd, j->ids, (size_t)j->len * sizeof *j->ids) ||
              write_all(fd, j->data, d->block_bytes) || fdatasync(fd);
    bad |= close(fd) != 0;
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return -1;
    }
    *bytes = sizeof h + (uint64_t)j->len * sizeof *j->ids + d->block_bytes;
    return 0;
}

static void job_free(job *j) {
    if (!j)
        return;
    free(j->ids);
    free(j->data);
    free(j);
}

static void *writer_main(void *arg) {
    tern_pc_disk *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->q_head && !d->stopping)
            pthread_cond_wait(&d->cv, &d->mu);
        job *j = d->q_head;
        if (!j)
            break; /* stopping, and nothing left to write */
        d->q_head = j->next;
        if (!d->q_head)
            d->q_tail = NULL;
        d->writing = 1;
        const uint64_t size = sizeof(file_head) + (uint64_t)j->len * sizeof(int32_t) + d->block_bytes;
        int skip = find(d, j->chain) != NULL || size > d->cap;
        if (!skip)
            evict_for(d, size);
        pthread_mutex_unlock(&d->mu);
        uint64_t bytes = 0;
        int bad = skip ? 0 : write_file(d, j, &bytes);
        pthread_mutex_lock(&d->mu);
        d->queued_bytes -= d->block_bytes;
        dentry *e = skip || bad ? NULL : calloc(1, sizeof *e);
        if (e && !find(d, j->chain)) {
            e->parent = j->parent;
            e->chain = j->chain;
            e->len = j->len;
            e->ids = j->ids;
            j->ids = NULL;
            e->bytes = bytes;
            e->stamp = now_ns();
            add_entry(d, e);
            d->st.writes++;
        } else {
            free(e);
            d->st.dropped += !skip;
        }
        d->writing = 0;
        pthread_cond_broadcast(&d->idle);
        job_free(j);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- the interface ---------------------------------------------------------------------------------------- */

tern_err *tern_pc_disk_open(const char *dir, uint64_t key, int64_t block, uint64_t block_bytes, uint64_t cap_bytes,
                            tern_pc_disk **out) {
    *out = NULL;
    tern_pc_disk *d = calloc(1, sizeof *d);
    if (!d)
        return tern_errf(TERN_ENOMEM, "out of memory");
    char sub[32];
    snprintf(sub, sizeof sub, "%016llx", (unsigned long long)key);
    d->dir = tern_path_join(dir, sub);
    d->key = key;
    d->block = block;
    d->block_bytes = block_bytes;
    d->cap = d->st.cap = cap_bytes;
    tern_err *err = d->dir ? tern_mkdir_p(d->dir) : tern_errf(TERN_ENOMEM, "out of memory");
    if (!err && access(d->dir, W_OK))
        err = tern_errf(TERN_EIO, "the prompt cache folder %s is not writable: %s", d->dir, strerror(errno));
    if (err) {
        free(d->dir);
        free(d);
        return tern_err_wrap(err, "--cache-disk %s", dir);
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    pthread_cond_init(&d->idle, NULL);
    scan(d);
    if (pthread_create(&d->thread, NULL, writer_main, d)) {
        tern_pc_disk_close(d);
        return tern_errf(TERN_ENOMEM, "cannot start the prompt cache's writer thread");
    }
    TLOG_INFO("prompt cache on disk: %s, %llu blocks (%.1f MiB of %.1f MiB)", d->dir, (unsigned long long)d->st.files,
              (double)d->st.bytes / 1048576.0, (double)cap_bytes / 1048576.0);
    *out = d;
    return NULL;
}

void tern_pc_disk_close(tern_pc_disk *d) {
    if (!d)
        return;
    if (d->thread) {
        pthread_mutex_lock(&d->mu);
        d->stopping = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    while (d->all)
        drop_entry(d, d->all);
    for (job *j = d->q_head, *next; j; j = next) {
        next = j->next;
        job_free(j);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->idle);
    free(d->resident);
    free(d->dir);
    free(d);
}

void tern_pc_disk_put(tern_pc_disk *d, uint64_t parent, uint64_t chain, const int32_t *ids, int64_t len,
                      const void *data) {
    pthread_mutex_lock(&d->mu);
    int have = find(d, chain) != NULL, full = d->queued_bytes + d->block_bytes > QUEUE_MAX_BYTES;
    if (!have && !full)
        d->queued_bytes += d->block_bytes;
    d->st.dropped += !have && full;
    pthread_mutex_unlock(&d->mu);
    if (have || full)
        return;
    job *j = calloc(1, sizeof *j);
    if (j) {
        j->ids = malloc((size_t)len * sizeof *ids);
        j->data = malloc(d->block_bytes);
    }
    if (j && j->ids && j->data) { /* copied before taking the lock: the writer and prefetches never wait on it */
        memcpy(j->ids, ids, (size_t)len * sizeof *ids);
        memcpy(j->data, data, d->block_bytes);
    }
    pthread_mutex_lock(&d->mu);
    if (!j || !j->ids || !j->data) {
        d->queued_bytes -= d->block_bytes;
        d->st.dropped++;
        pthread_mutex_unlock(&d->mu);
        job_free(j);
        return;
    }
    j->parent = parent;
    j->chain = chain;
    j->len = len;
    if (d->q_tail)
        d->q_tail->next = j;
    else
        d->q_head = j;
    d->q_tail = j;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* Reads entry `chain` (its ids already known to match) into data; a file that is not sound is removed. */
static int load(tern_pc_disk *d, uint64_t chain, void *data) {
    char path[4200];
    file_name(d, chain, path, sizeof path);
    file_head h;
    int32_t *ids;
    int bad = read_file(d, path, &h, &ids, data) != 0 || h.chain != chain;
    free(ids);
    pthread_mutex_lock(&d->mu);
    dentry *e = find(d, chain);
    if (bad) {
        if (e)
            drop_entry(d, e);
        unlink(path);
        d->st.removed_bad++;
    } else {
        d->st.reads++;
        if (e)
            e->stamp = now_ns();
    }
    pthread_mutex_unlock(&d->mu);
    if (!bad)
        utimensat(AT_FDCWD, path, NULL, 0); /* used now: a restart keeps the order */
    return bad ? 0 : 1;
}

int tern_pc_disk_get_block(tern_pc_disk *d, uint64_t parent, const int32_t *ids, void *data) {
    const uint64_t chain = tern_pc_disk_chain(parent, ids, d->block);
    pthread_mutex_lock(&d->mu);
    dentry *e = find(d, chain);
    int ok = e && e->parent == parent && e->len == d->block && !memcmp(e->ids, ids, (size_t)d->block * sizeof *ids);
    pthread_mutex_unlock(&d->mu);
    return ok ? load(d, chain, data) : 0;
}

int64_t tern_pc_disk_get_best(tern_pc_disk *d, uint64_t parent, const int32_t *ids, int64_t n, int32_t *out_ids,
                              int64_t *len, void *data) {
    uint64_t chain = 0;
    int64_t best = 0;
    pthread_mutex_lock(&d->mu);
    for (dentry *e = d->parent_b[parent % N_BUCKETS]; e; e = e->by_parent) {
        if (e->parent != parent)
            continue;
        int64_t k = 0, m = e->len < n ? e->len : n;
        while (k < m && e->ids[k] == ids[k])
            k++;
        if (k > best) {
            best = k;
            chain = e->chain;
            *len = e->len;
            memcpy(out_ids, e->ids, (size_t)e->len * sizeof *out_ids);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return best && load(d, chain, data) ? best : 0;
}

/* ---- the memory tier's blocks (a set of chain hashes; 0 stands for 1, as 0 marks an empty slot) ----------- */

static size_t slot_of(const uint64_t *t, size_t cap, uint64_t c) {
    size_t i = (size_t)tern_mix64(c) & (cap - 1);
    while (t[i] && t[i] != c)
        i = (i + 1) & (cap - 1);
    return i;
}

static void set_grow(tern_pc_disk *d) {
    size_t cap = d->cap_resident ? 2 * d->cap_resident : 1024;
    uint64_t *t = calloc(cap, sizeof *t);
    if (!t)
        return;
    for (size_t i = 0; i < d->cap_resident; i++)
        if (d->resident[i])
            t[slot_of(t, cap, d->resident[i])] = d->resident[i];
    free(d->resident);
    d->resident = t;
    d->cap_resident = cap;
}

void tern_pc_disk_resident(tern_pc_disk *d, uint64_t chain, int on) {
    const uint64_t c = chain ? chain : 1;
    pthread_mutex_lock(&d->mu);
    if (on) {
        if (2 * (d->n_resident + 1) > d->cap_resident)
            set_grow(d);
        if (d->cap_resident) {
            size_t i = slot_of(d->resident, d->cap_resident, c);
            d->n_resident += !d->resident[i];
            d->resident[i] = c;
        }
    } else if (d->cap_resident) {
        size_t i = slot_of(d->resident, d->cap_resident, c);
        if (d->resident[i]) { /* remove, then put back the run after it (linear probing) */
            d->resident[i] = 0;
            d->n_resident--;
            for (size_t j = (i + 1) & (d->cap_resident - 1); d->resident[j]; j = (j + 1) & (d->cap_resident - 1)) {
                uint64_t v = d->resident[j];
                d->resident[j] = 0;
                d->resident[slot_of(d->resident, d->cap_resident, v)] = v;
            }
        }
    }
    pthread_mutex_unlock(&d->mu);
}

int tern_pc_disk_is_resident(tern_pc_disk *d, uint64_t chain) {
    const uint64_t c = chain ? chain : 1;
    pthread_mutex_lock(&d->mu);
    int on = d->cap_resident && d->resident[slot_of(d->resident, d->cap_resident, c)] == c;
    pthread_mutex_unlock(&d->mu);
    return on;
}

void tern_pc_disk_flush(tern_pc_disk *d) {
    pthread_mutex_lock(&d->mu);
    while (d->q_head || d->writing)
        pthread_cond_wait(&d->idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

void tern_pc_disk_stats_get(tern_pc_disk *d, tern_pc_disk_stats *out) {
    pthread_mutex_lock(&d->mu);
    *out = d->st;
    pthread_mutex_unlock(&d->mu);
}
