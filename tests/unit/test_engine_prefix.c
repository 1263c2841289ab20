/* test_engine_prefix.c — the KV memory pieces under the engine: copying, exporting and releasing
 * sequences; the prefix cache (a hit gives exactly the logits of a cold prefill, across sliding
 * layers whose window is far shorter than the reused prefix; LRU eviction of leaves under the byte
 * cap; pinned chains survive); and the KV cost arithmetic that admission relies on. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json_util.h"
#include "core/threadpool.h"
#include "engine/fit.h"
#include "engine/kv_budget.h"
#include "models/gemma4_weights.h"
#include "kv/prefix_cache.h"
#include "sample/sampler.h"
#include "models/gemma4.h"
#include "models/synth.h"
#include "models/model.h"
#include "testutil.h"

static tern_pool *pool;
static tern_gemma4 *model;
static char model_dir[4096];
static int64_t V;

/* A random tiny model: window 8, sliding + full + KV-shared layers, vocabulary 512. */
static int setup(void **state) {
    tern_err *e = tu_tiny_model("engine_prefix_model", TERN_SYNTH_F32, 5, NULL, model_dir);
    if (!e)
        e = tern_gemma4_load(model_dir, &model);
    if (!e)
        e = tern_pool_create(2, &pool);
    if (e) {
        print_error("%s\n", tern_err_msg(e));
        tern_err_free(e);
        return -1;
    }
    V = tern_gemma4_config_of(model)->vocab_size;
    return 0;
}

static int teardown(void **state) {
    tern_gemma4_free(model);
    tern_pool_destroy(pool);
    return 0;
}

static void fill_ids(int32_t *ids, int64_t n, uint32_t s) {
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = 2 + (int32_t)((s >> 8) % 500);
    }
}

/* Appends ids to `seq` in chunks of `chunk`; the logits of the last token go to `last` (may be NULL);
 * the cursor (may be NULL) captures after every forward, as the engine does. */
static void prefill(tern_kv *kv, int seq, const int32_t *ids, int64_t n, int64_t chunk, float *last,
                    tern_pc_cursor *cur, const int32_t *all_ids) {
    float *logits = malloc((size_t)V * sizeof *logits);
    for (int64_t t = 0; t < n; t += chunk) {
        int64_t cnt = n - t < chunk ? n - t : chunk;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + t, .out = TERN_OUT_LAST};
        TU_OK(tern_gemma4_forward(model, kv, pool, &b, logits, NULL));
        TU_OK(tern_batch_commit(kv, &b));
        if (cur)
            tern_pc_cursor_capture(cur, kv, seq, all_ids, tern_kv_len(kv, seq));
    }
    if (last)
        memcpy(last, logits, (size_t)V * sizeof *logits);
    free(logits);
}

static void test_kv_copy_export_release(void **state) {
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(model, 3, 64, 16, TERN_KV_F32, TERN_KV_F32, &kv));
    int32_t ids[41];
    fill_ids(ids, 41, 3);
    prefill(kv, 0, ids, 40, 16, NULL, NULL, NULL);
    TU_OK(tern_kv_copy_seq(kv, 1, 0, 40));
    assert_int_equal(tern_kv_len(kv, 1), 40);
    /* Both sequences continue identically. */
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    prefill(kv, 0, ids + 40, 1, 1, a, NULL, NULL);
    prefill(kv, 1, ids + 40, 1, 1, b, NULL, NULL);
    assert_memory_equal(a, b, (size_t)V * sizeof *a);
    /* Raw export/import round-trips one position's bytes. */
    size_t rb = tern_kv_pos_bytes(kv, 0) / 2;
    assert_int_equal(rb, 2 * 16 * 4); /* K (and V): 2 KV heads x 16 dims x f32 */
    unsigned char *kv_bytes = malloc(2 * rb);
    float *x = malloc(rb), *y = malloc(rb);
    tern_kv_export_pos(kv, 0, 0, 40, kv_bytes);
    tern_kv_import_pos(kv, 0, 2, 40, kv_bytes);
    TU_OK(tern_kv_set_len(kv, 2, 41));
    tern_kv_read(kv, 0, 0, 40, 1, x);
    tern_kv_read(kv, 0, 2, 40, 1, y);
    assert_memory_equal(x, y, rb);
    assert_true(tern_kv_is_ring(kv, 0));
    assert_false(tern_kv_is_ring(kv, 2));
    assert_int_equal(tern_kv_extra(kv), 16);
    /* Release resets the length; the sequence is reusable from scratch. */
    tern_kv_release(kv, 0);
    assert_int_equal(tern_kv_len(kv, 0), 0);
    prefill(kv, 0, ids, 41, 16, a, NULL, NULL);
    assert_memory_equal(a, b, (size_t)V * sizeof *a);
    TU_FAILS_WITH(tern_kv_copy_seq(kv, 1, 0, 42), "exceeds the 41 positions");
    TU_FAILS_WITH(tern_kv_copy_seq(kv, 5, 0, 1), "out of range");
    /* The forward passes' work area: aligned, kept while large enough, grown (whole, writable) on demand. */
    unsigned char *w = tern_kv_work(kv, 1000);
    assert_non_null(w);
    assert_int_equal((uintptr_t)w % TERN_ALIGN, 0);
    assert_ptr_equal(tern_kv_work(kv, 10), w);
    const size_t big = (size_t)48 << 20;
    w = tern_kv_work(kv, big);
    assert_non_null(w);
    assert_int_equal((uintptr_t)w % TERN_ALIGN, 0);
    memset(w, 1, big);
    prefill(kv, 0, ids + 40, 1, 1, NULL, NULL, NULL); /* still usable by a forward pass after growing */
    free(a);
    free(b);
    free(kv_bytes);
    free(x);
    free(y);
    tern_kv_free(kv);
}

static void test_prefix_hit_same_logits(void **state) {
    const int64_t blk = 16, chunk = 16;
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(model, 4, 160, chunk, TERN_KV_BF16, TERN_KV_BF16, &kv));
    tern_prefix_cache *pc;
    TU_OK(tern_prefix_cache_create(kv, blk, 64u << 20, &pc));
    tern_pc_cursor *cur;
    TU_OK(tern_pc_cursor_new(pc, &cur));
    int32_t A[100], B[103];
    fill_ids(A, 100, 11);
    memcpy(B, A, 83 * sizeof *B); /* B shares 83 tokens with A, then goes its own way */
    fill_ids(B + 83, 20, 12);
    float *a_last = malloc((size_t)V * sizeof(float)), *hot = malloc((size_t)V * sizeof(float)),
          *cold = malloc((size_t)V * sizeof(float)), *b_last = malloc((size_t)V * sizeof(float));

    /* Cold A through sequence 0, captured block by block. */
    tern_pc_cursor_begin(cur, NULL, 0);
    prefill(kv, 0, A, 100, chunk, a_last, cur, A);
    tern_pc_cursor_end(cur);
    tern_prefix_cache_stats st;
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.blocks, 7); /* 96 of 100 tokens in whole blocks, the last 4 in a partial one */
    assert_int_equal(st.block_bytes, 16 * tern_gemma4_kv_bytes_per_token(tern_gemma4_config_of(model), 2, 1));

    /* B reuses exactly the 83 tokens it shares (5 whole blocks and 3 of the next), far beyond the sliding window
     * of 8, and its capture goes on from inside that block. */
    const tern_pc_node *tail;
    assert_int_equal(tern_prefix_cache_match(pc, B, 102, &tail), 83);
    TU_OK(tern_prefix_cache_restore(pc, tail, 83, kv, 1));
    assert_int_equal(tern_kv_len(kv, 1), 83);
    tern_pc_cursor_begin(cur, tail, 83);
    prefill(kv, 1, B + 83, 20, chunk, hot, cur, B);
    tern_pc_cursor_end(cur);
    prefill(kv, 2, B, 103, chunk, cold, NULL, NULL);
    assert_memory_equal(hot, cold, (size_t)V * sizeof(float)); /* the same logits, bit for bit */
    memcpy(b_last, cold, (size_t)V * sizeof(float));
    /* ...and the two sequences keep agreeing while decoding. */
    for (int step = 0; step < 12; step++) {
        int32_t ta = tern_argmax(hot, V), tb = tern_argmax(cold, V);
        assert_int_equal(ta, tb);
        prefill(kv, 1, &ta, 1, 1, hot, NULL, NULL);
        prefill(kv, 2, &tb, 1, 1, cold, NULL, NULL);
        assert_memory_equal(hot, cold, (size_t)V * sizeof(float));
    }

    /* A again: 99 cached (the last 3 of them from its partial block), the last computed: the logits A had. */
    tern_kv_release(kv, 3);
    assert_int_equal(tern_prefix_cache_match(pc, A, 99, &tail), 99);
    TU_OK(tern_prefix_cache_restore(pc, tail, 99, kv, 3));
    prefill(kv, 3, A + 99, 1, chunk, hot, NULL, NULL);
    assert_memory_equal(hot, a_last, (size_t)V * sizeof(float));
    /* B's own blocks were captured from where its reuse began: all of B is found again (its last 7 tokens a partial
     * block of its own beside A's). */
    assert_int_equal(tern_prefix_cache_match(pc, B, 103, &tail), 103);
    /* A block after a mid-block resume holds what a cold capture would: B's blocks restored give B's logits. */
    tern_kv_release(kv, 3);
    assert_int_equal(tern_prefix_cache_match(pc, B, 102, &tail), 102);
    TU_OK(tern_prefix_cache_restore(pc, tail, 102, kv, 3));
    prefill(kv, 3, B + 102, 1, chunk, hot, NULL, NULL);
    assert_memory_equal(hot, b_last, (size_t)V * sizeof(float));
    /* Matching never exceeds what was asked for, and a miss is a miss. */
    assert_int_equal(tern_prefix_cache_match(pc, A, 31, &tail), 31);
    int32_t other[40];
    fill_ids(other, 40, 99);
    assert_int_equal(tern_prefix_cache_match(pc, other, 40, &tail), 0);
    assert_null(tail);
    int64_t got = tern_prefix_cache_match(pc, A, 40, &tail);
    TU_FAILS_WITH(tern_prefix_cache_restore(pc, tail, got, kv, 3), "not empty");
    tern_kv_release(kv, 3);
    TU_FAILS_WITH(tern_prefix_cache_restore(pc, tail, got + 20, kv, 3), "do not end in the matched block");
    tern_prefix_cache_stats_get(pc, &st);
    assert_true(st.hits >= 3);
    tern_pc_cursor_free(cur);
    tern_prefix_cache_free(pc);
    tern_kv_free(kv);
    free(a_last);
    free(b_last);
    free(hot);
    free(cold);
}

/* Writes n positions of recognisable values into `seq` of a model-free cache, capturing each one as it
 * is written (a ring of 8 slots would have forgotten the early ones by the end). */
static void write_positions(tern_kv *kv, int seq, int64_t n, float base, tern_pc_cursor *cur, const int32_t *ids) {
    float k[8], v[8];
    for (int64_t p = 0; p < n; p++) {
        for (int i = 0; i < 8; i++) {
            k[i] = base + (float)p;
            v[i] = -base - (float)p;
        }
        for (int l = 0; l < tern_kv_n_layers(kv); l++)
            tern_kv_write(kv, l, seq, p, k, v);
        TU_OK(tern_kv_set_len(kv, seq, p + 1));
        tern_pc_cursor_capture(cur, kv, seq, ids, p + 1);
    }
}

static void test_prefix_lru(void **state) {
    tern_kv_layer_desc d[2] = {{1, 8, 1}, {1, 8, 0}}; /* a ring and a full layer */
    tern_kv *kv;
    TU_OK(tern_kv_create(d, 2, 2, 64, 4, 4, TERN_KV_F32, TERN_KV_F32, &kv));
    const uint64_t block_bytes = 4 * 2 * 2 * 8 * 4; /* block 4 x 2 layers x K,V x 8 floats */
    tern_prefix_cache *pc;
    TU_OK(tern_prefix_cache_create(kv, 4, 4 * block_bytes, &pc)); /* room for 4 blocks */
    tern_pc_cursor *cur;
    TU_OK(tern_pc_cursor_new(pc, &cur));
    int32_t X[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Y[12] = {21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
    const tern_pc_node *tail;

    tern_pc_cursor_begin(cur, NULL, 0);
    write_positions(kv, 0, 12, 100, cur, X);
    tern_pc_cursor_end(cur);
    tern_kv_release(kv, 0);
    tern_pc_cursor_begin(cur, NULL, 0);
    write_positions(kv, 0, 12, 200, cur, Y); /* 6 blocks into room for 4: X's leaves go first */
    tern_prefix_cache_stats st;
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.blocks, 4);
    assert_int_equal(st.evicted, 2);
    assert_int_equal(st.bytes, 4 * block_bytes);
    assert_int_equal(tern_prefix_cache_match(pc, X, 12, &tail), 4);
    assert_int_equal(tern_prefix_cache_match(pc, Y, 12, &tail), 12);

    /* Restored values are the captured ones: full layer from position 0, ring only its last slots. */
    tern_kv_release(kv, 1);
    TU_OK(tern_prefix_cache_restore(pc, tail, 12, kv, 1));
    float out[8];
    tern_kv_read(kv, 1, 1, 0, 0, out);
    assert_float_equal(out[0], 200.0f, 0);
    tern_kv_read(kv, 0, 1, 11, 1, out);
    assert_float_equal(out[3], -211.0f, 0);
    assert_int_equal(tern_kv_slots(kv, 0), 8);

    /* The cursor still extends Y (its tail is pinned). A new chain Z needs room: X's remaining block is
     * the only evictable leaf, so Z gets one block and then stops adding. */
    int32_t Z[8] = {41, 42, 43, 44, 45, 46, 47, 48};
    tern_pc_cursor *cz;
    TU_OK(tern_pc_cursor_new(pc, &cz));
    tern_pc_cursor_begin(cz, NULL, 0);
    tern_kv_release(kv, 1);
    write_positions(kv, 1, 8, 300, cz, Z);
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.blocks, 4);
    assert_int_equal(tern_prefix_cache_match(pc, X, 12, &tail), 0);
    assert_int_equal(tern_prefix_cache_match(pc, Z, 8, &tail), 4);
    assert_int_equal(tern_prefix_cache_match(pc, Y, 12, &tail), 12);
    tern_pc_cursor_free(cz);
    tern_pc_cursor_free(cur);
    tern_prefix_cache_free(pc);

    /* A cap below one block: nothing is ever kept. */
    TU_OK(tern_prefix_cache_create(kv, 4, block_bytes - 1, &pc));
    TU_OK(tern_pc_cursor_new(pc, &cur));
    tern_pc_cursor_begin(cur, NULL, 0);
    tern_kv_release(kv, 1);
    write_positions(kv, 1, 8, 300, cur, Z);
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.blocks, 0);
    tern_pc_cursor_free(cur);
    tern_prefix_cache_free(pc);
    TU_FAILS_WITH(tern_prefix_cache_create(kv, 0, 1000, &pc), "block");
    tern_kv_free(kv);
}

/* A sequence still running is matched to the token too: its unfinished block's positions so far (copied; the
 * sequence goes on filling its own). */
static void test_prefix_running(void **state) {
    tern_kv_layer_desc d[2] = {{1, 8, 1}, {1, 8, 0}};
    tern_kv *kv;
    TU_OK(tern_kv_create(d, 2, 2, 64, 4, 4, TERN_KV_F32, TERN_KV_F32, &kv));
    tern_prefix_cache *pc;
    TU_OK(tern_prefix_cache_create(kv, 4, 1u << 20, &pc));
    tern_pc_cursor *cur;
    TU_OK(tern_pc_cursor_new(pc, &cur));
    int32_t X[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    tern_pc_cursor_begin(cur, NULL, 0);
    write_positions(kv, 0, 10, 100, cur, X); /* 2 whole blocks and 2 positions of the third, still running */
    const tern_pc_node *tail;
    assert_int_equal(tern_prefix_cache_match(pc, X, 12, &tail), 10);
    TU_OK(tern_prefix_cache_restore(pc, tail, 10, kv, 1));
    float out[8];
    tern_kv_read(kv, 1, 1, 9, 1, out);
    assert_float_equal(out[0], -109.0f, 0);
    /* the running sequence goes on: its block fills and replaces the copy */
    for (int64_t p = 10; p < 12; p++) {
        float k[8] = {100.0f + (float)p}, v[8] = {-100.0f - (float)p};
        for (int l = 0; l < 2; l++)
            tern_kv_write(kv, l, 0, p, k, v);
        TU_OK(tern_kv_set_len(kv, 0, p + 1));
        tern_pc_cursor_capture(cur, kv, 0, X, p + 1);
    }
    tern_prefix_cache_stats st;
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.blocks, 3);
    assert_int_equal(tern_prefix_cache_match(pc, X, 12, &tail), 12);
    tern_pc_cursor_free(cur);
    tern_prefix_cache_free(pc);
    tern_kv_free(kv);
}

/* ---- the disk tier ---------------------------------------------------------------------------------------- */

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void ts_sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

#include "kv/prefix_disk.h"

/* The files of the disk tier's one key folder under dir (paths into out, count returned). */
static int tier_files(const char *dir, char out[][4400], int max) {
    DIR *top = opendir(dir);
    assert_non_null(top);
    struct dirent *de;
    char sub[4200] = "";
    while ((de = readdir(top)))
        if (de->d_name[0] != '.')
            snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
    closedir(top);
    int n = 0;
    DIR *d = opendir(sub);
    if (!d)
        return 0;
    while ((de = readdir(d)) && n < max)
        if (de->d_name[0] != '.')
            snprintf(out[n++], 4400, "%s/%s", sub, de->d_name);
    closedir(d);
    return n;
}

/* A prompt's K/V survives the cache (a restart): a new cache over the same folder finds all of it, and the logits
 * after it are a cold prefill's, bit for bit; blocks the memory tier evicted come back from disk. */
static void test_prefix_disk_restart(void **state) {
    const int64_t blk = 16, chunk = 16;
    const char *dir = tu_tmpdir("prefix-disk");
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(model, 2, 160, chunk, TERN_KV_BF16, TERN_KV_BF16, &kv));
    tern_prefix_cache *pc;
    TU_OK(tern_prefix_cache_create(kv, blk, 64u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 42, 64u << 20));
    tern_pc_cursor *cur;
    TU_OK(tern_pc_cursor_new(pc, &cur));
    int32_t A[100];
    fill_ids(A, 100, 21);
    float *a_last = malloc((size_t)V * sizeof(float)), *hot = malloc((size_t)V * sizeof(float));
    tern_pc_cursor_begin(cur, NULL, 0);
    prefill(kv, 0, A, 100, chunk, a_last, cur, A);
    tern_pc_cursor_end(cur);
    tern_pc_cursor_free(cur);
    tern_prefix_cache_free(pc); /* writes what is queued */
    char files[16][4400];
    assert_int_equal(tier_files(dir, files, 16), 7); /* 6 whole blocks and the partial one */

    /* "restart": a new cache, nothing in memory; a lookup reads all 99 tokens back — read ahead by a prefetch (as a
     * submitting thread does), so the match itself reads nothing */
    TU_OK(tern_prefix_cache_create(kv, blk, 64u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 42, 64u << 20));
    const tern_pc_node *tail;
    tern_pc_prefetch *pf = tern_prefix_cache_prefetch(pc, A, 99);
    assert_non_null(pf);
    tern_prefix_cache_stats st;
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.disk_reads, 7);
    assert_int_equal(tern_prefix_cache_match_prefetched(pc, A, 99, pf, &tail), 99);
    tern_pc_prefetch_free(pf);
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.disk_reads, 7);
    assert_int_equal(st.disk_hit_tokens, 99);
    /* and a prefetch reads nothing the memory tier holds */
    assert_null(tern_prefix_cache_prefetch(pc, A, 96));
    assert_int_equal(st.disk_files, 7);
    TU_OK(tern_prefix_cache_restore(pc, tail, 99, kv, 1));
    prefill(kv, 1, A + 99, 1, chunk, hot, NULL, NULL);
    assert_memory_equal(hot, a_last, (size_t)V * sizeof(float));
    /* now in memory: the next lookup reads nothing from disk */
    assert_int_equal(tern_prefix_cache_match(pc, A, 99, &tail), 99);
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.disk_hit_tokens, 99);
    tern_prefix_cache_free(pc);
    /* another model (key) never sees these files */
    TU_OK(tern_prefix_cache_create(kv, blk, 64u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 43, 64u << 20));
    assert_int_equal(tern_prefix_cache_match(pc, A, 99, &tail), 0);
    tern_prefix_cache_free(pc);

    /* a memory tier of 3 blocks: B's prompt pushes A's out, and A's come back from disk */
    TU_OK(tern_prefix_cache_create(kv, blk, 3 * st.block_bytes, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 44, 64u << 20));
    TU_OK(tern_pc_cursor_new(pc, &cur));
    int32_t B[40];
    fill_ids(B, 40, 22);
    for (int k = 0; k < 2; k++) {
        tern_kv_release(kv, 1);
        tern_pc_cursor_begin(cur, NULL, 0);
        prefill(kv, 1, k ? B : A, 40, chunk, NULL, cur, k ? B : A);
        tern_pc_cursor_end(cur);
    }
    tern_pc_cursor_free(cur);
    tern_prefix_cache_flush(pc);
    tern_prefix_cache_stats_get(pc, &st);
    assert_true(st.evicted >= 3);
    assert_int_equal(st.disk_files, 6);
    assert_int_equal(tern_prefix_cache_match(pc, A, 40, &tail), 40);
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.disk_hit_tokens, 40);
    tern_prefix_cache_free(pc);
    tern_kv_free(kv);
    free(a_last);
    free(hot);
}

/* Every kind of unsound file is removed, never used: truncated, a flipped byte in the K/V, another key's header, a
 * name that does not match the content, garbage, a temporary left by a dead writer; the size cap holds. */
static void test_prefix_disk_corruption(void **state) {
    tern_kv_layer_desc d[2] = {{1, 8, 1}, {1, 8, 0}};
    tern_kv *kv;
    TU_OK(tern_kv_create(d, 2, 2, 64, 4, 4, TERN_KV_F32, TERN_KV_F32, &kv));
    const char *dir = tu_tmpdir("prefix-disk-bad");
    tern_prefix_cache *pc;
    TU_OK(tern_prefix_cache_create(kv, 4, 1u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 7, 1u << 20));
    tern_pc_cursor *cur;
    TU_OK(tern_pc_cursor_new(pc, &cur));
    int32_t X[24];
    for (int i = 0; i < 24; i++)
        X[i] = 100 + i;
    tern_pc_cursor_begin(cur, NULL, 0);
    write_positions(kv, 0, 24, 100, cur, X); /* 6 blocks */
    tern_pc_cursor_free(cur);
    tern_prefix_cache_free(pc);
    char f[16][4400];
    int n = tier_files(dir, f, 16);
    assert_int_equal(n, 6);
    /* find the files of blocks 2..6 by their ids (the header's token count, then the ids) */
    char *by_block[6] = {0};
    for (int i = 0; i < n; i++) {
        FILE *fp = fopen(f[i], "rb");
        unsigned char head[64];
        int32_t first;
        assert_int_equal(fread(head, 1, 64, fp), 64);
        assert_int_equal(fread(&first, 4, 1, fp), 1);
        fclose(fp);
        by_block[(first - 100) / 4] = f[i];
    }
    assert_int_equal(truncate(by_block[5], 100), 0); /* truncated */
    FILE *fp = fopen(by_block[4], "r+b");           /* a flipped byte in its K/V */
    fseek(fp, -3, SEEK_END);
    int c = fgetc(fp);
    fseek(fp, -3, SEEK_END);
    fputc(c ^ 0x40, fp);
    fclose(fp);
    fp = fopen(by_block[3], "r+b"); /* another key in its header */
    fseek(fp, 16, SEEK_SET);
    fputc(0x55, fp);
    fclose(fp);
    char moved[4500], garbage[4500], tmp[4500];
    snprintf(moved, sizeof moved, "%s", by_block[2]); /* a name that does not match its content */
    char *slash = strrchr(moved, '/');
    snprintf(slash + 1, 30, "0123456789abcdef.kvb");
    assert_int_equal(rename(by_block[2], moved), 0);
    snprintf(garbage, sizeof garbage, "%.*s/fedcba9876543210.kvb", (int)(slash - moved), moved);
    fp = fopen(garbage, "wb");
    fputs("not a block", fp);
    fclose(fp);
    snprintf(tmp, sizeof tmp, "%.*s/0000000000000001.999999999.tmp", (int)(slash - moved), moved);
    fp = fopen(tmp, "wb");
    fputs("half", fp);
    fclose(fp);

    TU_OK(tern_prefix_cache_create(kv, 4, 1u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 7, 1u << 20));
    tern_prefix_cache_stats st;
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.disk_removed_bad, 4); /* truncated, foreign key, wrong name, garbage: seen at the scan */
    assert_int_equal(st.disk_files, 3);       /* blocks 1, 2 and the flipped 5 (its checksum is read with it) */
    const tern_pc_node *tail;
    assert_int_equal(tern_prefix_cache_match(pc, X, 24, &tail), 8); /* blocks 1 and 2; block 3's name was wrong */
    assert_int_equal(tern_prefix_cache_match(pc, X, 24, &tail), 8);
    tern_kv_release(kv, 1);
    TU_OK(tern_prefix_cache_restore(pc, tail, 8, kv, 1));
    float out[8];
    tern_kv_read(kv, 1, 1, 7, 0, out);
    assert_float_equal(out[0], 107.0f, 0);
    tern_prefix_cache_free(pc);
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(tier_files(dir, f, 16), 3);

    /* the flipped byte is caught when the block is read: blocks 3, 4 and 6 written again, 5 left as it was */
    tern_kv_release(kv, 0);
    TU_OK(tern_prefix_cache_create(kv, 4, 1u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 7, 1u << 20));
    TU_OK(tern_pc_cursor_new(pc, &cur));
    tern_pc_cursor_begin(cur, NULL, 0);
    write_positions(kv, 0, 24, 100, cur, X);
    tern_pc_cursor_free(cur);
    tern_prefix_cache_free(pc);
    assert_int_equal(tier_files(dir, f, 16), 6);
    TU_OK(tern_prefix_cache_create(kv, 4, 1u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 7, 1u << 20));
    assert_int_equal(tern_prefix_cache_match(pc, X, 24, &tail), 16);
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.disk_removed_bad, 1);
    tern_prefix_cache_free(pc);
    n = tier_files(dir, f, 16);
    assert_int_equal(n, 5);

    /* the size cap: room for 3 files keeps the 3 most recent */
    struct stat sb;
    assert_int_equal(stat(f[0], &sb), 0);
    TU_OK(tern_prefix_cache_create(kv, 4, 1u << 20, &pc));
    TU_OK(tern_prefix_cache_open_disk(pc, dir, 7, 3 * (uint64_t)sb.st_size + 10));
    tern_prefix_cache_stats_get(pc, &st);
    assert_int_equal(st.disk_files, 3);
    assert_true(st.disk_bytes <= st.disk_cap);
    tern_prefix_cache_free(pc);
    assert_int_equal(tier_files(dir, f, 16), 3);
    tern_kv_free(kv);
}

/* A writer killed at any moment (kill -9 while it writes block after block) leaves only whole files: the next open
 * finds nothing unsound, and the temporaries of the dead writer are gone. */
static void test_prefix_disk_killed_writer(void **state) {
    const char *dir = tu_tmpdir("prefix-disk-kill");
    for (int round = 0; round < 3; round++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            tern_kv_layer_desc d[2] = {{1, 64, 1}, {1, 64, 0}};
            tern_kv *kv;
            tern_prefix_cache *pc;
            tern_pc_cursor *cur;
            if (tern_kv_create(d, 2, 1, 4096, 4, 4, TERN_KV_F32, TERN_KV_F32, &kv) ||
                tern_prefix_cache_create(kv, 4, 1u << 30, &pc) || tern_prefix_cache_open_disk(pc, dir, 9, 1u << 30) ||
                tern_pc_cursor_new(pc, &cur))
                _exit(3);
            int32_t ids[4096];
            for (int s = 0;; s++) { /* until killed */
                for (int i = 0; i < 4096; i++)
                    ids[i] = 7 + (i * 31 + s * 17) % 1000;
                tern_kv_release(kv, 0);
                tern_pc_cursor_begin(cur, NULL, 0);
                for (int64_t p = 0; p < 4096; p++) {
                    float k[64] = {(float)p}, v[64] = {(float)-p};
                    for (int l = 0; l < 2; l++)
                        tern_kv_write(kv, l, 0, p, k, v);
                    if (tern_kv_set_len(kv, 0, p + 1))
                        _exit(4);
                    tern_pc_cursor_capture(cur, kv, 0, ids, p + 1);
                }
                tern_pc_cursor_end(cur);
            }
        }
        ts_sleep_ms(150 + 100 * round);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        assert_true(WIFSIGNALED(status));
        tern_kv_layer_desc d[2] = {{1, 64, 1}, {1, 64, 0}};
        tern_kv *kv;
        TU_OK(tern_kv_create(d, 2, 1, 4096, 4, 4, TERN_KV_F32, TERN_KV_F32, &kv));
        tern_prefix_cache *pc;
        TU_OK(tern_prefix_cache_create(kv, 4, 1u << 30, &pc));
        TU_OK(tern_prefix_cache_open_disk(pc, dir, 9, 1u << 30));
        tern_prefix_cache_stats st;
        tern_prefix_cache_stats_get(pc, &st);
        assert_int_equal(st.disk_removed_bad, 0);
        assert_true(st.disk_files > 0);
        tern_prefix_cache_free(pc);
        tern_kv_free(kv);
        char (*files)[4400] = malloc(4096 * sizeof *files);
        int n = tier_files(dir, files, 4096);
        for (int i = 0; i < n; i++)
            assert_null(strstr(files[i], ".tmp"));
        free(files);
    }
}

static void test_kv_cost(void **state) {
    tern_kv_cost c = {.full_per_pos = 100, .ring_per_pos = 10, .ring_slots = 50};
    assert_int_equal(tern_kv_cost_bytes(&c, 0), 0);
    assert_int_equal(tern_kv_cost_bytes(&c, 20), 20 * 110);
    assert_int_equal(tern_kv_cost_bytes(&c, 1000), 1000 * 100 + 50 * 10); /* rings saturate */
    assert_int_equal(tern_kv_cost_max_positions(&c, 20 * 110, 1 << 20), 20);
    assert_int_equal(tern_kv_cost_max_positions(&c, 20 * 110 + 109, 1 << 20), 20);
    assert_int_equal(tern_kv_cost_max_positions(&c, 1000 * 100 + 500, 1 << 20), 1000);
    assert_int_equal(tern_kv_cost_max_positions(&c, 1000 * 100 + 500, 300), 300);
    assert_int_equal(tern_kv_cost_max_positions(&c, 109, 1 << 20), 0);
    assert_true(tern_kv_cost_bytes(&c, INT64_MAX) == UINT64_MAX); /* saturates, never wraps */
    /* The model's own numbers: the same as the allocated cache reports. */
    tern_kv_cost fc, kc;
    tern_lm_spec *spec;
    TU_OK(tern_lm_spec_load(model_dir, &spec));
    tern_kv_cost_from_desc(tern_lm_spec_desc(spec), TERN_KV_BF16, TERN_KV_BF16, 16, &fc);
    /* What one decode step reads (tern bench's roofline): sliding layers 0, 1, 3 and 4 (sharing 3's cache) read up
     * to the window of 8 positions of 2 x 16 K and V values, full layers 2 and 5 (sharing 2's) every position of
     * 2 x 32; bf16. */
    const tern_lm_desc *d = tern_lm_spec_desc(spec);
    assert_int_equal(tern_lm_desc_kv_read_bytes(d, TERN_KV_BF16, TERN_KV_BF16, 0), 0);
    assert_int_equal(tern_lm_desc_kv_read_bytes(d, TERN_KV_BF16, TERN_KV_BF16, 4), 4 * (4 * 128 + 2 * 256));
    assert_int_equal(tern_lm_desc_kv_read_bytes(d, TERN_KV_BF16, TERN_KV_BF16, 100), 8 * 4 * 128 + 100 * 2 * 256);
    assert_int_equal(tern_lm_desc_kv_read_bytes(d, TERN_KV_F32, TERN_KV_BF16, 4), 4 * (4 * 192 + 2 * 384));
    tern_lm_spec_free(spec);
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(model, 1, 256, 16, TERN_KV_BF16, TERN_KV_BF16, &kv));
    tern_kv_cost_from_kv(kv, &kc);
    assert_int_equal(fc.full_per_pos, kc.full_per_pos);
    assert_int_equal(fc.ring_per_pos, kc.ring_per_pos);
    assert_int_equal(fc.ring_slots, 8 + 16);
    assert_int_equal(kc.ring_slots, 8 + 16);
    /* layers 0,1,3 sliding (2 heads x 16), layers 2 full (2 x 32); 4,5 share: K+V bf16 */
    assert_int_equal(fc.ring_per_pos, 3 * 2 * 2 * 16 * 2);
    assert_int_equal(fc.full_per_pos, 1 * 2 * 2 * 32 * 2);
    tern_kv_free(kv);
    tern_budget b = {.total = 1000};
    assert_true(tern_budget_reserve(&b, 600));
    assert_false(tern_budget_reserve(&b, 401));
    assert_true(tern_budget_reserve(&b, 400));
    tern_budget_release(&b, 600);
    assert_int_equal(b.used, 400);
    assert_int_equal(b.peak, 1000);
}

/* `tern fit` arithmetic: weights from the checkpoint, KV per request with rings saturating, budgets. */
static void test_fit(void **state) {
    const tern_gemma4_config *c = tern_gemma4_config_of(model);
    tern_lm_spec *spec;
    TU_OK(tern_lm_spec_load(model_dir, &spec));
    const uint64_t text = tern_lm_spec_desc(spec)->weights_bytes, other = tern_lm_spec_desc(spec)->other_bytes;
    tern_wspec *specs;
    size_t n;
    TU_OK(tern_gemma4_specs(c, TERN_LAYOUT_HF, &specs, &n));
    uint64_t params = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t e = 1;
        for (int d = 0; d < specs[i].ndim; d++)
            e *= (uint64_t)specs[i].shape[d];
        params += e;
    }
    free(specs);
    assert_int_equal(text, params * 4); /* an f32 checkpoint: 4 bytes per parameter */
    assert_int_equal(other, 0);
    tern_fit_plan p;
    /* ring = window 8 + chunk 16 = 24 slots; full 256 B/token, sliding 384 B/token (bf16) */
    TU_OK(tern_fit_compute(spec, 100, 3, 0, TERN_KV_BF16, TERN_KV_BF16, 16, 0, &p));
    assert_int_equal(p.per_request, 100 * 256 + 24 * 384);
    assert_int_equal(p.all_rows, 3 * p.per_request);
    assert_int_equal(p.budget, p.all_rows);
    assert_int_equal(p.rows_at_ctx, 3);
    assert_int_equal(p.ctx_per_row, 100);
    assert_int_equal(p.step_tokens, 512); /* the engine's default */
    assert_int_equal(p.activations, tern_gemma4_work_bytes(c, 512));
    assert_int_equal(p.total, text + p.budget + p.activations);
    TU_OK(tern_fit_compute(spec, 100, 3, 2 * p.per_request + 10, TERN_KV_BF16, TERN_KV_BF16, 16, 0, &p));
    assert_int_equal(p.rows_at_ctx, 2);
    assert_true(p.ctx_per_row < 100 && p.ctx_per_row > 50);
    assert_int_equal(p.max_one_request, (2 * (100 * 256 + 24 * 384) + 10 - 24 * 384) / 256);
    TU_OK(tern_fit_compute(spec, 0, 1, 0, TERN_KV_F32, TERN_KV_F32, 16, 0, &p)); /* f32 KV doubles the bytes */
    assert_int_equal(p.ctx, tern_fit_default_ctx(tern_lm_spec_desc(spec)));
    assert_int_equal(p.cost.full_per_pos, 512);
    TU_OK(tern_fit_compute(spec, 100, 3, 0, TERN_KV_BF16, TERN_KV_BF16, 16, 64, &p)); /* activations grow with the step */
    assert_int_equal(p.activations, tern_gemma4_work_bytes(c, 64));
    assert_true(tern_gemma4_work_bytes(c, 64) < tern_gemma4_work_bytes(c, 512));
    TU_FAILS_WITH(tern_fit_compute(spec, 100, 0, 0, TERN_KV_BF16, TERN_KV_BF16, 16, 0, &p), "--parallel");
    TU_FAILS_WITH(tern_fit_compute(spec, 100, 3, 0, TERN_KV_BF16, TERN_KV_BF16, 16, -1, &p), "--step-tokens");
    tern_lm_spec_free(spec);
    TU_FAILS_WITH(tern_lm_spec_load("/nonexistent-dir", &spec), "/nonexistent-dir");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_copy_export_release),
        cmocka_unit_test(test_prefix_hit_same_logits),
        cmocka_unit_test(test_prefix_lru),
        cmocka_unit_test(test_prefix_running),
        cmocka_unit_test(test_prefix_disk_restart),
        cmocka_unit_test(test_prefix_disk_corruption),
        cmocka_unit_test(test_prefix_disk_killed_writer),
        cmocka_unit_test(test_kv_cost),
        cmocka_unit_test(test_fit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
