/* test_core.c — errors, half-precision conversion, thread pool, aligned allocation, JSON helpers, the cache folder. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/base64.h"
#include "core/cache_dir.h"
#include "core/cgroup.h"
#include "core/fileio.h"
#include "core/half.h"
#include "core/json_util.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "core/utf8.h"
#include "testutil.h"

static void test_error_wrap(void **state) {
    tern_err *e = tern_errf(TERN_EFORMAT, "tensor %s: bad", "x.weight");
    e = tern_err_wrap(e, "%s", "model.safetensors");
    assert_string_equal(e->msg, "model.safetensors: tensor x.weight: bad");
    assert_int_equal(e->code, TERN_EFORMAT);
    tern_err_free(e);
    assert_null(tern_err_wrap(NULL, "x"));
    assert_string_equal(tern_err_msg(NULL), "ok");
    assert_string_equal(tern_code_name(TERN_EOVERLOAD), "overloaded");
}

static void test_bf16(void **state) {
    assert_int_equal(tern_f32_to_bf16(1.0f), 0x3f80);
    assert_true(tern_bf16_to_f32(0x3f80) == 1.0f);
    /* 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0). */
    assert_int_equal(tern_f32_to_bf16(1.00390625f), 0x3f80);
    /* 1 + 3*2^-8 ties up to the even 0x3f82. */
    assert_int_equal(tern_f32_to_bf16(1.01171875f), 0x3f82);
    assert_true(isnan(tern_bf16_to_f32(tern_f32_to_bf16(NAN))));
    assert_true(isinf(tern_bf16_to_f32(tern_f32_to_bf16(INFINITY))));
    assert_true(tern_bf16_to_f32(tern_f32_to_bf16(-2.5f)) == -2.5f);
}

static void test_f16(void **state) {
    assert_int_equal(tern_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(tern_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(tern_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(tern_f32_to_f16(65520.0f), 0x7c00); /* rounds to Inf */
    assert_int_equal(tern_f32_to_f16(5.9604645e-8f), 0x0001); /* smallest subnormal */
    assert_int_equal(tern_f32_to_f16(2.0e-8f), 0x0000);
    assert_true(tern_f16_to_f32(0x0001) == 5.9604645e-8f);
    assert_true(tern_f16_to_f32(0x3555) == 0.33325195f);
    assert_true(isnan(tern_f16_to_f32(tern_f32_to_f16(NAN))));
    /* Every finite f16 value round-trips exactly through f32. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        float f = tern_f16_to_f32((uint16_t)h);
        assert_int_equal(tern_f32_to_f16(f), h);
    }
}

typedef struct {
    atomic_long sum;
    int *owner;
} pool_ctx;

static void add_range(void *ctxp, size_t b, size_t e, int tid) {
    pool_ctx *ctx = ctxp;
    long s = 0;
    for (size_t i = b; i < e; i++) {
        s += (long)i;
        ctx->owner[i] = tid;
    }
    atomic_fetch_add(&ctx->sum, s);
}

/* A thread that lowers itself: its nice value goes up by the amount (capped at 19), a pool it then creates has
 * workers at that value too, and the thread that started it keeps its own. */
typedef struct lowered {
    int before, after, worker;
} lowered;

static void worker_nice(void *ctx, size_t b, size_t e, int tid) {
    (void)b, (void)e;
    if (tid == 1)
        ((lowered *)ctx)->worker = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
}

static void *lower_thread(void *arg) {
    lowered *l = arg;
    l->before = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    tern_thread_lower_priority(5);
    l->after = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    tern_pool *pool;
    if (!tern_pool_create(2, &pool)) {
        tern_pool_parallel_for(pool, 2, 1, worker_nice, l);
        tern_pool_destroy(pool);
    }
    return NULL;
}

static void test_lower_priority(void **state) {
    (void)state;
    const int mine = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    lowered l = {0, 0, -100};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, lower_thread, &l), 0);
    pthread_join(t, NULL);
    const int want = l.before + 5 > 19 ? 19 : l.before + 5;
    assert_int_equal(l.after, want);
    assert_int_equal(l.worker, want);
    assert_int_equal(getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)), mine);
}

static void test_pool(void **state) {
    tern_pool *pool;
    TU_OK(tern_pool_create(3, &pool));
    assert_int_equal(tern_pool_size(pool), 3);
    int owner[1000];
    for (int round = 0; round < 200; round++) {
        pool_ctx ctx = {0, owner};
        size_t n = 1 + (size_t)round * 5;
        tern_pool_parallel_for(pool, n, 4, add_range, &ctx);
        assert_int_equal(atomic_load(&ctx.sum), (long)(n * (n - 1) / 2));
        /* Ranges are contiguous and in thread order, split at multiples of the grain. */
        for (size_t i = 1; i < n; i++) {
            assert_true(owner[i] >= owner[i - 1]);
            if (owner[i] != owner[i - 1])
                assert_int_equal(i % 4, 0);
        }
    }
    tern_pool_destroy(pool);
    TU_FAILS_WITH(tern_pool_create(100000, &pool), "out of range");
}

typedef struct {
    atomic_int *hits;
    int slow_tid;       /* this thread dawdles, so the others must take over its share */
    atomic_int misaligned; /* runs not starting at a multiple of the grain (asserted on the test's thread) */
} balanced_ctx;

static void count_range(void *ctxp, size_t b, size_t e, int tid) {
    balanced_ctx *ctx = ctxp;
    if (b % 3 || b >= e)
        atomic_fetch_add(&ctx->misaligned, 1);
    for (size_t i = b; i < e; i++) {
        atomic_fetch_add(&ctx->hits[i], 1);
        if (tid == ctx->slow_tid) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* The balanced split covers every index exactly once, in runs aligned to the grain, even when one thread is
 * far slower than the others (its share is taken over from the back). */
static void test_pool_balanced(void **state) {
    tern_pool *pool;
    TU_OK(tern_pool_create(3, &pool));
    atomic_int hits[2000];
    for (int round = 0; round < 60; round++) {
        const size_t n = 1 + (size_t)round * 31;
        for (size_t i = 0; i < n; i++)
            atomic_store(&hits[i], 0);
        balanced_ctx ctx = {hits, round % 4, 0};
        tern_pool_parallel_balanced(pool, n, 3, count_range, &ctx);
        assert_int_equal(atomic_load(&ctx.misaligned), 0);
        for (size_t i = 0; i < n; i++)
            if (atomic_load(&hits[i]) != 1)
                fail_msg("n %zu: index %zu run %d times", n, i, atomic_load(&hits[i]));
    }
    tern_pool_destroy(pool);
}

static void test_aligned(void **state) {
    void *p = tern_aligned_alloc(100, 64);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    tern_aligned_free(p);
    float *z = tern_aligned_calloc(33, sizeof(float));
    for (int i = 0; i < 33; i++)
        assert_true(z[i] == 0.0f);
    tern_aligned_free(z);
    assert_null(tern_aligned_calloc(SIZE_MAX / 2, 4));
    assert_null(tern_aligned_alloc(8, 3));
}

static void test_json_helpers(void **state) {
    json_t *o;
    const char *doc = "{\"a\": 3, \"b\": 2.5, \"c\": true, \"d\": null, \"e\": \"x\", \"f\": 4.0}";
    TU_OK(tern_json_load_buf(doc, strlen(doc), "t", &o));
    int64_t i;
    double d;
    int b;
    TU_OK(tern_json_get_int(o, "a", 0, 0, 10, &i));
    assert_int_equal(i, 3);
    TU_OK(tern_json_get_int(o, "d", 7, 0, 10, &i));
    assert_int_equal(i, 7);
    TU_OK(tern_json_get_int(o, "f", 0, 0, 10, &i));
    assert_int_equal(i, 4);
    TU_FAILS_WITH(tern_json_get_int(o, "a", 0, 5, 10, &i), "\"a\" = 3 is out of range");
    TU_FAILS_WITH(tern_json_get_int(o, "b", 0, 0, 10, &i), "\"b\" must be an integer");
    TU_OK(tern_json_get_num(o, "b", 0, &d));
    assert_true(d == 2.5);
    TU_FAILS_WITH(tern_json_get_num(o, "e", 0, &d), "must be a number");
    TU_OK(tern_json_get_bool(o, "c", 0, &b));
    assert_true(b);
    TU_FAILS_WITH(tern_json_get_bool(o, "a", 0, &b), "true or false");
    json_decref(o);
    TU_FAILS_WITH(tern_json_load_buf("{\"a\": }", 7, "cfg.json", &o), "cfg.json: invalid JSON at line 1");
    TU_FAILS_WITH(tern_json_load_buf("{\"a\":1,\"a\":2}", 13, "cfg.json", &o), "duplicate");
}

/* The cache folder stays bounded: files unused for longer than the limit and temporaries of dead writers go;
 * recent files, live writers' temporaries, another machine's recent temporaries (its pids are not ours to ask
 * about) and files that are not tern's stay; a used file counts as recent. A temporary names its writer's machine. */
static void test_cache_prune(void **state) {
    char dir[4096], path[4400], cmd[9000];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("cache-prune"));
    static const char *const names[] = {"old.pack", "new.pack", "tokenizer-00ff.tables", "notes.txt",
                                        "old-used.pack", "x.pack.tmp.999999999", "y.pack.tmp.999999999.other-pod",
                                        "z.pack.tmp.999999999.other-pod", "cpu-00ff00ff00ff00ff.stream", NULL};
    for (int i = 0; names[i]; i++)
        tu_write(dir, names[i], "x", 1);
    char live[160], dead_here[160], tmp_name[8400];
    snprintf(path, sizeof path, "%s/w.pack", dir);
    char *tmp = NULL;
    assert_null(tern_cache_begin_write(path, &tmp));
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp.%ld.", path, (long)getpid());
    assert_true(!strncmp(tmp, tmp_name, strlen(tmp_name))); /* then this machine's name */
    snprintf(live, sizeof live, "%s", strrchr(tmp, '/') + 1);
    snprintf(dead_here, sizeof dead_here, "d.pack.tmp.999999999.%s", tmp + strlen(tmp_name));
    free(tmp);
    tu_write(dir, live, "x", 1);
    tu_write(dir, dead_here, "x", 1);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && touch -d '40 days ago' old.pack tokenizer-00ff.tables notes.txt old-used.pack "
             "z.pack.tmp.999999999.other-pod cpu-00ff00ff00ff00ff.stream", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/old-used.pack", dir);
    tern_cache_used(path);
    snprintf(path, sizeof path, "%s/new.pack", dir);
    tern_cache_prune(path, TERN_CACHE_MAX_AGE_DAYS);
    static const struct {
        const char *name;
        int kept;
    } want[] = {{"old.pack", 0}, {"new.pack", 1}, {"tokenizer-00ff.tables", 0}, {"notes.txt", 1},
                {"old-used.pack", 1}, {"x.pack.tmp.999999999", 0}, {"y.pack.tmp.999999999.other-pod", 1},
                {"z.pack.tmp.999999999.other-pod", 0}, {"cpu-00ff00ff00ff00ff.stream", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, want[i].name);
        if (tern_is_file(path) != want[i].kept)
            fail_msg("%s: %s", want[i].name, want[i].kept ? "removed" : "kept");
    }
    snprintf(path, sizeof path, "%s/%s", dir, live);
    assert_true(tern_is_file(path));
    snprintf(path, sizeof path, "%s/%s", dir, dead_here);
    assert_false(tern_is_file(path));
    /* The folder follows the environment. */
    char *saved = getenv("TERN_CACHE_DIR") ? strdup(getenv("TERN_CACHE_DIR")) : NULL;
    setenv("TERN_CACHE_DIR", "off", 1);
    assert_null(tern_cache_dir());
    setenv("TERN_CACHE_DIR", dir, 1);
    char *d = tern_cache_dir();
    assert_string_equal(d, dir);
    free(d);
    if (saved)
        setenv("TERN_CACHE_DIR", saved, 1);
    else
        unsetenv("TERN_CACHE_DIR");
    free(saved);
}

/* Writes text to dir/name, making dir first. */
static void put(const char *dir, const char *name, const char *text) {
    assert_null(tern_mkdir_p(dir));
    tu_write(dir, name, text, strlen(text));
}

/* A container's limits from its cgroup files: v2 (cpu.max, memory.max, memory.stat's anon), v1 (the cpu and memory
 * controllers' own folders), a limit on an enclosing group, "max" and v1's huge number as no limit, and a missing
 * tree as no limit at all. */
static void test_cgroup_limits(void **state) {
    char root[4096], dir[4200];
    tern_cgroup_limits cg;
    /* v2 inside a cgroup namespace: the group is the mount's root */
    snprintf(root, sizeof root, "%s", tu_tmpdir("cgroup-v2"));
    put(root, "cpu.max", "250000 100000\n");
    put(root, "memory.max", "8589934592\n");
    put(root, "memory.stat", "anon 1073741824\nfile 4096\n");
    tern_cgroup_read(root, "0::/\n", &cg);
    assert_true(cg.cpus == 2.5);
    assert_true(cg.mem_limit == 8589934592ULL && cg.mem_anon == 1073741824ULL);
    /* v2 without a namespace: the group's own folder says "max", its parent limits */
    put(root, "cpu.max", "max 100000\n");
    snprintf(dir, sizeof dir, "%s/kubepods/pod1", root);
    put(dir, "cpu.max", "max 100000\n");
    put(dir, "memory.max", "max\n");
    snprintf(dir, sizeof dir, "%s/kubepods", root);
    put(dir, "cpu.max", "400000 100000\n");
    tern_cgroup_read(root, "0::/kubepods/pod1\n", &cg);
    assert_true(cg.cpus == 4);
    assert_true(cg.mem_limit == 8589934592ULL); /* the root's, the tightest on the way up */
    /* v1: one folder per controller; no quota is -1, no limit a page-rounded LLONG_MAX */
    snprintf(root, sizeof root, "%s", tu_tmpdir("cgroup-v1"));
    snprintf(dir, sizeof dir, "%s/cpu,cpuacct/docker/abc", root);
    put(dir, "cpu.cfs_quota_us", "150000\n");
    put(dir, "cpu.cfs_period_us", "100000\n");
    snprintf(dir, sizeof dir, "%s/memory/docker/abc", root);
    put(dir, "memory.limit_in_bytes", "2147483648\n");
    put(dir, "memory.stat", "cache 99\nrss 5\ntotal_rss 536870912\n");
    snprintf(dir, sizeof dir, "%s/memory", root);
    put(dir, "memory.limit_in_bytes", "9223372036854771712\n");
    tern_cgroup_read(root, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n", &cg);
    assert_true(cg.cpus == 1.5);
    assert_true(cg.mem_limit == 2147483648ULL && cg.mem_anon == 536870912ULL);
    snprintf(dir, sizeof dir, "%s/cpu,cpuacct/docker/abc", root);
    put(dir, "cpu.cfs_quota_us", "-1\n");
    tern_cgroup_read(root, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n", &cg);
    assert_true(cg.cpus == 0);
    /* nothing there: no limits */
    tern_cgroup_read("/nonexistent", "0::/\n", &cg);
    assert_true(cg.cpus == 0 && cg.mem_limit == 0);
    /* this process: whatever its limits, the CPU count stays within the online cores */
    assert_true(tern_cpu_count() >= 1 && tern_cpu_count() <= sysconf(_SC_NPROCESSORS_ONLN));
}

/* UTF-8 as the house reads it: well-formed characters of every length; overlong forms, surrogates, values past
 * U+10FFFF, stray continuation bytes and invalid leads refused, each maximal subpart one unit; a valid start cut
 * short is "incomplete"; the loose decoder takes WTF-8's lone surrogates; encoding and decoding are inverses. */
static void test_utf8(void **state) {
    static const struct {
        const char *s;
        int check; /* tern_utf8_check of the whole string */
        uint32_t cp;
    } cases[] = {
        {"A", 1, 0x41},           {"\xc3\xa9", 2, 0xe9},          {"\xe2\x82\xac", 3, 0x20ac},
        {"\xf0\x9f\x98\x80", 4, 0x1f600}, {"\xf4\x8f\xbf\xbf", 4, 0x10ffff},
        {"\xc0\x80", -1, 0},      /* overlong NUL: C0 is never a lead */
        {"\xe0\x80\x80", -1, 0}, /* overlong: E0 needs A0..BF next */
        {"\xf0\x80\x80\x80", -1, 0},
        {"\xed\xa0\x80", -1, 0}, /* a surrogate */
        {"\xf4\x90\x80\x80", -1, 0}, /* past U+10FFFF */
        {"\xf5\x80\x80\x80", -1, 0}, /* no such lead */
        {"\x80", -1, 0},           /* a stray continuation byte */
        {"\xe2\x28\xa1", -1, 0}, {"\xf0\x9f\x28", -2, 0}, {"\xf0\x9f\x98\x28", -3, 0},
        {"\xe2\x82", 0, 0},       {"\xf0\x9f\x98", 0, 0}, /* valid starts, cut short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned char *u = (const unsigned char *)cases[i].s;
        const size_t n = strlen(cases[i].s);
        assert_int_equal(tern_utf8_check(u, n), cases[i].check);
        uint32_t cp = 0xdead;
        assert_int_equal(tern_utf8_decode(u, n, &cp), cases[i].check > 0 ? cases[i].check : 0);
        assert_int_equal(cp, cases[i].check > 0 ? cases[i].cp : 0xdead);
        size_t bad = 99;
        assert_int_equal(tern_utf8_valid(cases[i].s, n, &bad), cases[i].check > 0);
        assert_int_equal(bad, cases[i].check > 0 ? 99 : 0);
    }
    size_t bad = 0;
    assert_false(tern_utf8_valid("ok \xe2\x82\xac then \xff", 13, &bad));
    assert_int_equal(bad, 12); /* "ok " 3, the euro sign 3, " then " 6 */
    assert_true(tern_utf8_valid("", 0, NULL));
    /* the loose decoder: a lone surrogate as WTF-8 writes it, and U+FFFD of length 1 for what no lead announces */
    size_t len = 0;
    assert_int_equal(tern_utf8_decode_loose((const unsigned char *)"\xed\xa0\x80", 3, &len), 0xd800);
    assert_int_equal(len, 3);
    assert_int_equal(tern_utf8_decode_loose((const unsigned char *)"\x80x", 2, &len), 0xfffd);
    assert_int_equal(len, 1);
    assert_int_equal(tern_utf8_decode_loose((const unsigned char *)"\xe2\x82", 2, &len), 0xfffd);
    assert_int_equal(len, 1);
    /* every code point but the surrogates encodes to bytes that decode back to it, at the length it needs */
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        char b[4];
        const size_t k = tern_utf8_put(cp, b);
        assert_int_equal(k, cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
        uint32_t back = 0;
        if ((size_t)tern_utf8_decode((const unsigned char *)b, k, &back) != k || back != cp)
            fail_msg("U+%04X does not round-trip", cp);
    }
}

static void test_log_and_time(void **state) {
    assert_int_equal(tern_log_parse_level("debug"), TERN_LOG_DEBUG);
    assert_int_equal(tern_log_parse_level("loud"), -1);
    tern_log_set_level(TERN_LOG_ERROR);
    assert_int_equal(tern_log_get_level(), TERN_LOG_ERROR);
    uint64_t a = tern_now_ns(), b = tern_now_ns();
    assert_true(b >= a);
}

/* Base64 as clients send uploads: standard and URL-safe alphabets, padding optional, MIME line breaks; broken
 * text is refused naming the offset. */
static void test_base64(void **state) {
    static const struct {
        const char *in, *out;
    } ok[] = {{"", ""},         {"QQ==", "A"},        {"QQ", "A"},         {"QUI=", "AB"},      {"QUJD", "ABC"},
              {"QUJDRA", "ABCD"}, {"SGVs\nbG8=\r\n", "Hello"}, {" QU JD ", "ABC"}, {"-_8", "\xfb\xff"}, {"+/8=", "\xfb\xff"}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        unsigned char *out;
        size_t n;
        TU_OK(tern_base64_decode(ok[i].in, strlen(ok[i].in), &out, &n));
        assert_int_equal(n, strlen(ok[i].out));
        if (n)
            assert_memory_equal(out, ok[i].out, n);
        else
            assert_null(out);
        free(out);
    }
    static const struct {
        const char *in, *error;
    } bad[] = {{"QUJD!", "outside the alphabet at offset 4"}, {"Q", "lone character"}, {"QQ=A", "after the '=' padding"},
               {"=QQ", "misplaced '='"},   {"QQ===", "misplaced '='"},           {"QUI==", "wrong amount of '=' padding"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        unsigned char *out = (unsigned char *)1;
        size_t n = 1;
        TU_FAILS_WITH(tern_base64_decode(bad[i].in, strlen(bad[i].in), &out, &n), bad[i].error);
        assert_null(out);
        assert_int_equal(n, 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_wrap), cmocka_unit_test(test_bf16),   cmocka_unit_test(test_f16),
        cmocka_unit_test(test_pool),       cmocka_unit_test(test_pool_balanced), cmocka_unit_test(test_lower_priority),
        cmocka_unit_test(test_aligned),    cmocka_unit_test(test_json_helpers),
        cmocka_unit_test(test_log_and_time), cmocka_unit_test(test_cache_prune), cmocka_unit_test(test_cgroup_limits), cmocka_unit_test(test_utf8), cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
