/* bench_kernels.c — the matrix kernels alone (the MLX affine int8 kernel, or with --format the f32/f16/bf16 ones):
 * one matrix far larger than the caches,
 * single-token passes alternated with read-bandwidth probe passes (GB/s of each and their ratio), then
 * multi-token passes (GMAC/s) as prefill and batched decode run them. With --sequence, the products of a decode
 * step of the e2b shape instead (per layer: q/k/v, o, gate/up, down, per-layer-input gate and projection, packed
 * in forward order in one arena as the loader does), timed by shape against the probe: what the products alone
 * cost, without the rest of the forward pass. With --ceiling (AVX-512 only), what bounds the kernel's arithmetic on
 * one core: the VPDPBUSD peak of a register-only loop, which other instructions take issue slots from it, and
 * the kernel itself on cache-resident weights against that peak (MLX affine, or with --format ggml's Q4_0 / Q8_0
 * blocks; whole tiles also two blocks a pass). With --resident, single-token passes over a matrix
 * the caches hold (size it with --rows): the kernel's arithmetic, without memory. With --act-error, the accuracy cost of quantizing
 * the activations: the product's relative error against float64, with the kernels' step and with max|x|/127.
 * usage: bench_kernels [--bits 4|8 | --format f32|f16|bf16|q4_0|q8_0|q4_k|q5_k|q6_k] [--rows 16384] [--in 8192] [--group 64] [--iters 20]
 *                      [--threads 2] [--slab ROWS] [--resident]
 *        bench_kernels --sequence [--layers 35] [--tokens 1] [--iters 12] [--threads 2] [--bits 4|8]
 *        bench_kernels --ceiling [--bits 4|8 | --format q4_0|q8_0] [--tokens 8]
 *        bench_kernels --act-error [--bits 4|8] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/half.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"
#include "tensor/kv_type.h"
#include "tensor/membw.h"
#include "tensor/ops.h"
#include "tensor/qmm.h"
#include "tensor/qpack.h"
#include "tensor/quant_mlx.h"

static long arg(int argc, char **argv, const char *name, long def) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return strtol(argv[i + 1], NULL, 10);
    return def;
}

/* The value after --format, or NULL. */
static const char *format_arg(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--format"))
            return argv[i + 1];
    return NULL;
}

/* Whether a --format names ggml's blocks of 32 (Q4_0, Q8_0), which the int8 kernels take packed. */
static int ggml32_format(const char *format) { return format && (!strcmp(format, "q4_0") || !strcmp(format, "q8_0")); }

static int has_flag(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name))
            return 1;
    return 0;
}

/* One decode step's products of the e2b shape: [rows, in] per layer, in forward order. */
#define SEQ_SHAPES 6
static const int64_t seq_shape[SEQ_SHAPES][2] = {{2560, 1536}, {1536, 2048}, {12288, 1536},
                                                 {1536, 6144}, {256, 1536},  {1536, 256}};
static const char *const seq_name[SEQ_SHAPES] = {"q/k/v", "o", "gate/up", "down", "ple gate", "ple proj"};

static int run_sequence(int argc, char **argv) {
    const int bits = (int)arg(argc, argv, "--bits", 4), L = (int)arg(argc, argv, "--layers", 35);
    const int64_t T = arg(argc, argv, "--tokens", 1);
    const int iters = (int)arg(argc, argv, "--iters", 12), threads = (int)arg(argc, argv, "--threads", 2);
    const int n = L * SEQ_SHAPES, group = 64;
    tern_weight *w = calloc((size_t)n, sizeof *w);
    tern_qpack **pk = calloc((size_t)n, sizeof *pk);
    float *x = malloc((size_t)(T * 12288) * sizeof *x), *y = malloc((size_t)(T * 12288) * sizeof *y);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        w[i] = (tern_weight){.fmt = TERN_WF_MLX_AFFINE, .ndim = 2, .shape = {seq_shape[i % SEQ_SHAPES][0], seq_shape[i % SEQ_SHAPES][1]},
                             .sdtype = TERN_DT_BF16, .bits = bits, .group = group, .name = "seq"};
        total += tern_qpack_bytes(&w[i]);
    }
    uint8_t *arena = tern_stream_alloc(total);
    tern_pool *pool = NULL;
    tern_membw *probe = NULL;
    tern_err *err = !w || !pk || !x || !y || !arena ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
    if (!err)
        err = tern_pool_create(threads, &pool);
    if (!err)
        err = tern_membw_create((size_t)256 << 20, &probe);
    /* Random codes and scales (the speed does not depend on the values), packed in order into the arena. */
    uint64_t s = 1;
    size_t off = 0;
    for (int i = 0; i < n && !err; i++) {
        const int64_t rows = w[i].shape[0], in = w[i].shape[1], words = tern_mlx_row_words(in, bits), ng = in / group;
        uint32_t *data = malloc((size_t)(rows * words) * 4);
        uint16_t *sb = malloc((size_t)(2 * rows * ng) * 2);
        if (!data || !sb)
            err = tern_errf(TERN_ENOMEM, "out of memory");
        for (int64_t k = 0; !err && k < rows * words; k++)
            data[k] = (uint32_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 32);
        for (int64_t k = 0; !err && k < 2 * rows * ng; k++)
            sb[k] = (uint16_t)(0x3c00 + k % 61); /* bf16 values near 1/128 */
        w[i].data = data;
        w[i].scales = sb;
        w[i].biases = sb + rows * ng;
        if (!err)
            err = tern_qpack_create(&w[i], arena + off, &pk[i]);
        w[i].qpack = pk[i];
        off += tern_qpack_bytes(&w[i]);
        free(data);
        free(sb);
        w[i].data = w[i].scales = w[i].biases = NULL;
    }
    if (err) {
        fprintf(stderr, "bench_kernels: %s\n", tern_err_msg(err));
        return 1;
    }
    for (int64_t i = 0; i < T * 12288; i++)
        x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    double t_shape[SEQ_SHAPES] = {0}, t_all = 0, t_probe = 0;
    for (int it = 0; it <= iters; it++) { /* pass 0 warms up */
        double t0 = tern_now_s();
        for (int i = 0; i < n; i++) {
            const double t1 = tern_now_s();
            tern_matmul(pool, &w[i], x, T, y, T == 1 ? TERN_MM_DECODE : TERN_MM_PREFILL);
            if (it)
                t_shape[i % SEQ_SHAPES] += tern_now_s() - t1;
        }
        const double dt = tern_now_s() - t0, dp = tern_membw_pass(probe, pool);
        if (it) {
            t_all += dt;
            t_probe += dp;
        }
    }
    const double pgbs = (double)tern_membw_bytes(probe) * iters / t_probe * 1e-9;
    printf("isa %s, %d threads, q%d/%d, %d layers x %d products, %lld token(s), %.1f MB per step\n",
           tern_isa_name(tern_isa_active()), tern_pool_size(pool), bits, group, L, SEQ_SHAPES, (long long)T, total * 1e-6);
    printf("all products: %.2f ms per step, %.2f GB/s; probe %.2f GB/s; ratio %.1f%%\n", t_all / iters * 1e3,
           total * iters / t_all * 1e-9, pgbs, 100 * total * iters / t_all * 1e-9 / pgbs);
    for (int k = 0; k < SEQ_SHAPES; k++) {
        const double b = (double)tern_qpack_bytes(&w[k]);
        printf("  %-9s %5lld x %-5lld %6.2f MB  %7.1f us each  %6.2f GB/s  %5.1f%% of probe\n", seq_name[k],
               (long long)seq_shape[k][0], (long long)seq_shape[k][1], b * 1e-6, t_shape[k] / iters / L * 1e6,
               b * L * iters / t_shape[k] * 1e-9, 100 * b * L * iters / t_shape[k] * 1e-9 / pgbs);
    }
    for (int i = 0; i < n; i++)
        tern_qpack_free(pk[i]);
    tern_membw_free(probe);
    tern_pool_destroy(pool);
    tern_aligned_free(arena);
    free(w);
    free(pk);
    free(x);
    free(y);
    return 0;
}


/* ---- --ceiling ------------------------------------------------------------------------------------- */

#if defined(__x86_64__)
/* Register-only instruction streams (inline assembly, so this file needs no AVX-512 compiler flags): twelve
 * independent VPDPBUSD accumulators, optionally with other instructions mixed in, timed per iteration. */
#define DP(r) "vpdpbusd %%zmm12, %%zmm13, %%zmm" #r "\n\t"
#define DP12 DP(0) DP(1) DP(2) DP(3) DP(4) DP(5) DP(6) DP(7) DP(8) DP(9) DP(10) DP(11)
#define DP16 DP12 DP(0) DP(1) DP(2) DP(3)
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
                "xmm12", "xmm13", "xmm14", "xmm15"
/* The operands are zeroed in every iteration (a rename-stage idiom, no issue slot), so no denormal or NaN from
 * whatever the registers held can slow the floating-point instructions. */
#define MIX_LOOP(extra)                                                                                     \
    for (long i = 0; i < n; i++)                                                                            \
        __asm__ volatile("vpxord %%zmm12, %%zmm12, %%zmm12\n\tvpxord %%zmm13, %%zmm13, %%zmm13\n\t" DP16 extra \
                         ::: CLOBBER);                                                                      \
    __asm__ volatile("vzeroupper" ::: CLOBBER);

static double ns_per_iter(int which, long n) {
    const double t0 = tern_now_s();
    switch (which) {
    case 0: MIX_LOOP("") break;
    case 1: MIX_LOOP("vfmadd231ps %%zmm12, %%zmm13, %%zmm14\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm15\n\t") break;
    case 2: MIX_LOOP("vcvtdq2ps %%zmm12, %%zmm14\n\tvpaddd %%zmm12, %%zmm13, %%zmm15\n\t"
                     "vpandd %%zmm12, %%zmm13, %%zmm14\n\tvpsrlw $4, %%zmm12, %%zmm15\n\t") break;
    }
    return (tern_now_s() - t0) / (double)n * 1e9;
}

static int run_ceiling(int argc, char **argv) {
    if (tern_isa_active() < TERN_ISA_AVX512) {
        fprintf(stderr, "bench_kernels --ceiling: needs the AVX-512 VNNI path (this CPU: %s)\n",
                tern_isa_name(tern_isa_active()));
        return 1;
    }
    const char *format = format_arg(argc, argv);
    /* ggml's Q4_0 / Q8_0 blocks (GGUF files) instead of MLX's affine groups: the kernel's ggml tile */
    const int ggml = ggml32_format(format);
    if (format && !ggml) {
        fprintf(stderr, "bench_kernels --ceiling: --format takes q4_0 or q8_0 (without it: MLX q4/q8, --bits)\n");
        return 2;
    }
    const int bits = ggml ? (format[1] == '4' ? 4 : 8) : (int)arg(argc, argv, "--bits", 4), group = ggml ? 32 : 64;
    const int64_t T = arg(argc, argv, "--tokens", 8), rows = 128, in = 1536, ng = in / group;
    /* The cache-resident matrix (random codes, scales near 1/128), multiplied by one thread, every block per pass. */
    const int64_t words = tern_mlx_row_words(in, bits);
    uint32_t *data = malloc((size_t)(rows * words) * 4);
    uint16_t *sb = malloc((size_t)(2 * rows * ng) * 2);
    float *x = malloc((size_t)(T * in) * sizeof *x), *y = malloc((size_t)(T * rows) * sizeof *y);
    tern_qact a = {0};
    if (!data || !sb || !x || !y || !tern_qact_alloc(&a, T, in, group)) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    uint64_t s = 7;
    for (int64_t k = 0; k < rows * words; k++)
        data[k] = (uint32_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 32);
    for (int64_t k = 0; k < 2 * rows * ng; k++)
        sb[k] = (uint16_t)(0x3c00 + k % 61);
    for (int64_t i = 0; i < T * in; i++)
        x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    tern_weight w = {.fmt = TERN_WF_MLX_AFFINE, .ndim = 2, .shape = {rows, in}, .data = data, .scales = sb,
                     .biases = sb + rows * ng, .sdtype = TERN_DT_BF16, .bits = bits, .group = group, .name = "hot"};
    void *blocks = NULL;
    if (ggml) { /* the same random values as ggml's blocks */
        const tern_kv_type kvt = bits == 4 ? TERN_KV_Q4_0 : TERN_KV_Q8_0;
        const size_t row_bytes = tern_kv_type_bytes(kvt, in);
        float *row = malloc((size_t)in * sizeof *row);
        if (!row || !(blocks = malloc((size_t)rows * row_bytes))) {
            fprintf(stderr, "bench_kernels: out of memory\n");
            return 1;
        }
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t k = 0; k < in; k++)
                row[k] = (float)(int32_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 32) / 2147483648.0f;
            tern_kv_type_store(kvt, row, (uint8_t *)blocks + (size_t)r * row_bytes, in);
        }
        free(row);
        w = (tern_weight){.fmt = TERN_WF_QBLOCK, .ndim = 2, .shape = {rows, in}, .data = blocks, .bits = bits,
                          .group = group, .name = "hot", .qblock = bits == 4 ? TERN_QB_Q4_0 : TERN_QB_Q8_0};
    }
    tern_qpack *pk = NULL;
    tern_err *err = tern_qpack_create(&w, NULL, &pk);
    if (err) {
        fprintf(stderr, "bench_kernels: %s\n", tern_err_msg(err));
        return 1;
    }
    a.ggml_steps = ggml;
    (ggml ? tern_qmm_avx512.fill_ggml : tern_qmm_avx512.fill)(&a, x, 0, T * ng);
    const tern_qpack_form f = tern_qpack_form_of(&w);
    /* Five rounds of every measurement, interleaved, the fastest of each kept: the virtual machine's clock and
     * neighbours move from moment to moment, and a ratio of two unlucky moments would mean nothing. */
    const long n = 4000000, passes = 40000 / T;
    double base = 1e30, mul = 1e30, other = 1e30, kern = 1e30, pair = 1e30;
    ns_per_iter(0, n); /* warm-up: the clock settles */
    for (int round = 0; round < 5; round++) {
        const double b0 = ns_per_iter(0, n), m0 = ns_per_iter(1, n), o0 = ns_per_iter(2, n);
        base = b0 < base ? b0 : base;
        mul = m0 < mul ? m0 : mul;
        other = o0 < other ? o0 : other;
        const double t0 = tern_now_s();
        for (long p = 0; p < passes; p++)
            for (int64_t t0 = 0; t0 < T; t0 += TERN_QACT_TILE)
                for (int64_t b = 0; b < pk->blocks; b++)
                    tern_qmm_avx512.tile(tern_qpack_block_data(pk, b), &a, t0, 0, f.bits, f.sdtype,
                                         tern_qpack_group_bytes(f), y + t0 * rows + b * 16, rows, 16);
        const double dt = tern_now_s() - t0;
        kern = dt < kern ? dt : kern;
        if (T % TERN_QACT_TILE == 0) { /* the same product two blocks at a time */
            const double p0 = tern_now_s();
            for (long p = 0; p < passes; p++)
                for (int64_t t0 = 0; t0 < T; t0 += TERN_QACT_TILE)
                    for (int64_t b = 0; b < pk->blocks; b += 2)
                        tern_qmm_avx512.tile_pair(tern_qpack_block_data(pk, b), tern_qpack_block_data(pk, b + 1), &a,
                                                  t0, f.bits, f.sdtype, tern_qpack_group_bytes(f),
                                                  y + t0 * rows + b * 16, y + t0 * rows + b * 16 + 16, rows, 16, 16);
            const double pt = tern_now_s() - p0;
            pair = pt < pair ? pt : pair;
        }
    }
    const double peak = 16 * 64 / base; /* GMAC/s: 64 multiply-adds per VPDPBUSD */
    const double gmacs = (double)rows * in * T * passes / kern * 1e-9;
    printf("one core: 16 VPDPBUSD %.2f ns -> peak %.1f GMAC/s\n", base, peak);
    printf("  + 2 FMA: %.2f ns (+%.1f VPDPBUSD slots); + convert, integer add, and, shift: %.2f ns (+%.1f)\n",
           mul, (mul - base) / base * 16, other, other > base ? (other - base) / base * 16 : 0.0);
    /* Per group, token and 16 rows: MLX (64 inputs) 16 VPDPBUSD and the epilogue's two multiply-adds (the step's
     * power of two is an integer add); ggml (32 inputs) 8 VPDPBUSD, a multiply and an FMA. */
    printf("kernel, %s, %lld token(s), %lld x %lld in cache: %.1f GMAC/s = %.1f%% of the peak "
           "(%s with the epilogue's multiplies)\n",
           ggml ? format : bits == 4 ? "MLX q4" : "MLX q8", (long long)T, (long long)rows, (long long)in, gmacs,
           100 * gmacs / peak, ggml ? "8 / (8 + 2) = 80.0%" : "16 / (16 + 2) = 88.9%");
    if (pair < 1e30) {
        const double pg = (double)rows * in * T * passes / pair * 1e-9;
        printf("the same, two blocks a pass (tile_pair): %.1f GMAC/s = %.1f%% of the peak\n", pg, 100 * pg / peak);
    }
    tern_qpack_free(pk);
    tern_qact_free(&a);
    free(blocks);
    free(data);
    free(sb);
    free(x);
    free(y);
    return 0;
}
#else
static int run_ceiling(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "bench_kernels --ceiling: x86-64 with AVX-512 VNNI only\n");
    return 1;
}
#endif

/* One weight far larger than the caches: single-token passes alternated with probe passes, optionally the same
 * stream cut into products of `slab` rows, then multi-token passes. wbytes: what one pass reads. */
static void measure_matrix(int argc, char **argv, tern_pool *pool, tern_membw *probe, const tern_weight *w,
                           double wbytes, const float *x, float *y, const char *what) {
    const int64_t rows = w->shape[0], in = w->shape[1];
    const int iters = (int)arg(argc, argv, "--iters", 20);
    double mm_s = 0, probe_s = 0;
    tern_matmul(pool, w, x, 1, y, TERN_MM_DECODE); /* warm-up */
    if (has_flag(argc, argv, "--resident")) { /* a matrix the caches hold (choose --rows): the kernel's arithmetic */
        const double t0 = tern_now_s();
        for (int i = 0; i < iters; i++)
            tern_matmul(pool, w, x, 1, y, TERN_MM_DECODE);
        printf("%s, %lld x %lld (%.2f MB) from the caches: T=1 %.2f GB/s\n", what, (long long)rows, (long long)in,
               wbytes * 1e-6, wbytes * iters / (tern_now_s() - t0) * 1e-9);
        return;
    }
    tern_membw_pass(probe, pool);
    for (int i = 0; i < iters; i++) {
        double t0 = tern_now_s();
        tern_matmul(pool, w, x, 1, y, TERN_MM_DECODE);
        mm_s += tern_now_s() - t0;
        probe_s += tern_membw_pass(probe, pool);
    }
    const double mm_gbs = wbytes * iters / mm_s * 1e-9, probe_gbs = (double)tern_membw_bytes(probe) * iters / probe_s * 1e-9;
    printf("isa %s, %d threads, %s, %lld x %lld (%.1f MB)\n", tern_isa_name(tern_isa_active()), tern_pool_size(pool),
           what, (long long)rows, (long long)in, wbytes * 1e-6);
    printf("T=1   %.2f GB/s streamed; probe %.2f GB/s; ratio %.1f%%\n", mm_gbs, probe_gbs, 100 * mm_gbs / probe_gbs);
    /* The same stream cut into separate products of `slab` rows each (one parallel region per product, as a
     * forward pass makes one per matrix): what a region boundary costs. */
    const int64_t slab = arg(argc, argv, "--slab", 0);
    if (slab > 0 && slab % 16 == 0 && slab <= rows) {
        double sl_s = 0, sl_probe = 0;
        const int64_t nslab = rows / slab;
        for (int i = 0; i < iters; i++) {
            double t0 = tern_now_s();
            for (int64_t k = 0; k < nslab; k++)
                tern_matmul_rows(pool, w, k * slab, slab, x, 1, y, TERN_MM_DECODE);
            sl_s += tern_now_s() - t0;
            sl_probe += tern_membw_pass(probe, pool);
        }
        const double sl_bytes = wbytes * (double)(nslab * slab) / (double)rows;
        const double gbs = sl_bytes * iters / sl_s * 1e-9, pgbs = (double)tern_membw_bytes(probe) * iters / sl_probe * 1e-9;
        printf("T=1 in products of %lld rows (%.2f MB each): %.2f GB/s; probe %.2f GB/s; ratio %.1f%%\n",
               (long long)slab, sl_bytes / (double)nslab * 1e-6, gbs, pgbs, 100 * gbs / pgbs);
    }
    static const int64_t Ts[] = {8, 64, 512};
    for (int ti = 0; ti < 3; ti++) {
        const int64_t T = Ts[ti];
        tern_matmul(pool, w, x, T, y, TERN_MM_PREFILL); /* warm-up: the first touch of y's pages */
        double t0 = tern_now_s();
        const int reps = iters / 4 > 1 ? iters / 4 : 1;
        for (int i = 0; i < reps; i++)
            tern_matmul(pool, w, x, T, y, TERN_MM_PREFILL);
        const double dt = tern_now_s() - t0;
        printf("T=%-3lld %.1f GMAC/s (%.2f GB/s of weights)\n", (long long)T, (double)rows * in * T * reps / dt * 1e-9,
               wbytes * reps / dt * 1e-9);
    }
}

/* ---- --act-error ----------------------------------------------------------------------------------- */

static double gauss(uint64_t *s) { /* sum of 12 uniforms: mean 0, variance 1 */
    double u = 0;
    for (int i = 0; i < 12; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        u += (double)(*s >> 11) * 0x1.0p-53;
    }
    return u - 6;
}

/* The int8 product's error from quantizing the activations: tern_qmm_ref (steps of 2^e or 1.5 x 2^e) and, for
 * comparison, a step of exactly max|x| / 127 per group, each against the float64 product of the same dequantized
 * weights with the unquantized activations; relative RMS over 256 outputs x 40 inputs per distribution. */
static int run_act_error(int argc, char **argv) {
    const int bits = (int)arg(argc, argv, "--bits", 4), G = 64;
    const int64_t rows = 256, in = 1536, ng = in / G, words = tern_mlx_row_words(in, bits), trials = 40;
    uint32_t *data = malloc((size_t)(rows * words) * 4);
    uint16_t *sc = malloc((size_t)(rows * ng) * 2), *bi = malloc((size_t)(rows * ng) * 2);
    float *wf = malloc((size_t)(rows * in) * sizeof *wf), *x = malloc((size_t)in * sizeof *x), *y = malloc((size_t)rows * sizeof *y);
    double *xm = malloc((size_t)in * sizeof *xm);
    tern_qact a = {0};
    if (!data || !sc || !bi || !wf || !x || !y || !xm || !tern_qact_alloc(&a, 1, in, G)) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    uint64_t s = 11;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t k = 0; k < in; k++)
            wf[r * in + k] = (float)gauss(&s);
        tern_mlx_quantize_row(wf + r * in, in, bits, G, TERN_DT_BF16, data + r * words, sc + r * ng, bi + r * ng);
    }
    tern_weight w = {.fmt = TERN_WF_MLX_AFFINE, .ndim = 2, .shape = {rows, in}, .data = data, .scales = sc,
                     .biases = bi, .sdtype = TERN_DT_BF16, .bits = bits, .group = G, .name = "w"};
    for (int64_t r = 0; r < rows; r++)
        tern_weight_row(&w, r, wf + r * in); /* from here on, the dequantized weights */
    static const char *names[] = {"normal", "normal, every 97th x30", "normal, every 13th x8"};
    for (int dist = 0; dist < 3; dist++) {
        double e_kern = 0, e_max = 0, ref2 = 0;
        for (int t = 0; t < trials; t++) {
            for (int64_t k = 0; k < in; k++)
                x[k] = (float)(gauss(&s) * (dist == 1 && k % 97 == 0 ? 30 : dist == 2 && k % 13 == 0 ? 8 : 1));
            for (int64_t g = 0; g < ng; g++) { /* the max/127 step, for comparison */
                double amax = 0;
                for (int64_t k = g * G; k < (g + 1) * G; k++)
                    amax = fmax(amax, fabs(x[k]));
                const double st = amax > 0 ? amax / 127 : 1;
                for (int64_t k = g * G; k < (g + 1) * G; k++)
                    xm[k] = st * nearbyint(x[k] / st);
            }
            tern_qact_fill_ref(&a, x);
            tern_qmm_ref(&w, 0, rows, &a, y);
            for (int64_t r = 0; r < rows; r++) {
                double ref = 0, m = 0;
                for (int64_t k = 0; k < in; k++) {
                    ref += (double)wf[r * in + k] * x[k];
                    m += (double)wf[r * in + k] * xm[k];
                }
                e_kern += (y[r] - ref) * (y[r] - ref);
                e_max += (m - ref) * (m - ref);
                ref2 += ref * ref;
            }
        }
        printf("q%d, activations %-24s relative RMS error: the int8 step %.2e, max/127 step %.2e (ratio %.2f)\n",
               bits, names[dist], sqrt(e_kern / ref2), sqrt(e_max / ref2), sqrt(e_kern / e_max));
    }
    tern_qact_free(&a);
    free(data);
    free(sc);
    free(bi);
    free(wf);
    free(x);
    free(y);
    free(xm);
    return 0;
}

int main(int argc, char **argv) {
    if (has_flag(argc, argv, "--act-error"))
        return run_act_error(argc, argv);
    if (has_flag(argc, argv, "--sequence"))
        return run_sequence(argc, argv);
    if (has_flag(argc, argv, "--ceiling"))
        return run_ceiling(argc, argv);
    const int bits = (int)arg(argc, argv, "--bits", 4), group = (int)arg(argc, argv, "--group", 64);
    const int64_t rows = arg(argc, argv, "--rows", 16384), in = arg(argc, argv, "--in", 8192);
    const int threads = (int)arg(argc, argv, "--threads", 2);
    const char *format = format_arg(argc, argv);
    /* ggml blocks (GGUF): stored as the KV cache stores them, ggml's reference quantizers. */
    const int ggml = ggml32_format(format);
    /* K-quants (Q4_K_M files: Q4_K and Q6_K, Q6_K also the tied head of Q4_0 files): random codes and scales,
     * fixed f16 steps per block; their products run on ggml's blocks at every token count. */
    const tern_qblock kq = !format                   ? TERN_QB_NONE
                           : !strcmp(format, "q4_k") ? TERN_QB_Q4_K
                           : !strcmp(format, "q5_k") ? TERN_QB_Q5_K
                           : !strcmp(format, "q6_k") ? TERN_QB_Q6_K
                                                     : TERN_QB_NONE;
    const int kquant = kq != TERN_QB_NONE;
    const tern_kv_type kvt = ggml && format[1] == '4' ? TERN_KV_Q4_0 : TERN_KV_Q8_0;
    const tern_wformat fmt = !format ? TERN_WF_MLX_AFFINE : !strcmp(format, "f32") ? TERN_WF_F32
                           : !strcmp(format, "f16")   ? TERN_WF_F16 : !strcmp(format, "bf16") ? TERN_WF_BF16
                           : ggml || kquant           ? TERN_WF_QBLOCK
                                                      : TERN_WF_NONE;
    if (fmt == TERN_WF_NONE || (ggml && in % 32) || (kquant && in % 256)) {
        fprintf(stderr, "bench_kernels: --format takes f32, f16, bf16, q4_0, q8_0, q4_k, q5_k or q6_k (without it: "
                "MLX q4/q8, --bits)\n");
        return 2;
    }
    const int64_t words = tern_mlx_row_words(in, bits), ng = in / group, Tmax = 512;
    const size_t es = fmt == TERN_WF_F32 ? 4 : 2; /* float formats: bytes per element */
    const size_t ggml_row = ggml ? tern_kv_type_bytes(kvt, in) : kquant ? tern_qblock_row_bytes(kq, in) : 0;
    void *data = malloc(fmt == TERN_WF_MLX_AFFINE ? (size_t)(rows * words) * 4
                        : ggml || kquant             ? (size_t)rows * ggml_row
                                                  : (size_t)(rows * in) * es);
    uint16_t *scales = malloc((size_t)(rows * ng) * 2), *biases = malloc((size_t)(rows * ng) * 2);
    float *row = malloc((size_t)in * sizeof *row);
    float *x = malloc((size_t)(Tmax * in) * sizeof *x), *y = malloc((size_t)(Tmax * rows) * sizeof *y);
    if (!data || !scales || !biases || !row || !x || !y) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    uint64_t s = 1;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t k = 0; k < in; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            row[k] = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
        }
        if (kquant)
            for (size_t b = 0; b < ggml_row; b++) {
                /* codes and scales any bytes; each block's step (Q6_K: its last two bytes; Q4_K, Q5_K: d and dmin,
                 * its first four) f16 1/1024 */
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                const size_t bb = tern_qblock_bytes(kq), o = b % bb, at = kq == TERN_QB_Q6_K ? bb - 2 : 0;
                const int step = o >= at && o < at + (kq == TERN_QB_Q6_K ? 2u : 4u);
                ((uint8_t *)data)[(size_t)r * ggml_row + b] = step ? (o % 2 ? 0x14 : 0x00) : (uint8_t)(s >> 56);
            }
        else if (ggml)
            tern_kv_type_store(kvt, row, (uint8_t *)data + (size_t)r * ggml_row, in);
        else if (fmt == TERN_WF_MLX_AFFINE)
            tern_mlx_quantize_row(row, in, bits, group, TERN_DT_BF16, (uint32_t *)data + r * words, scales + r * ng,
                                  biases + r * ng);
        else
            for (int64_t k = 0; k < in; k++) {
                if (fmt == TERN_WF_F32)
                    ((float *)data)[r * in + k] = row[k];
                else
                    ((uint16_t *)data)[r * in + k] = fmt == TERN_WF_F16 ? tern_f32_to_f16(row[k]) : tern_f32_to_bf16(row[k]);
            }
    }
    for (int64_t i = 0; i < Tmax * in; i++)
        x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    tern_weight w = {.fmt = fmt, .ndim = 2, .shape = {rows, in}, .data = data, .scales = scales, .biases = biases,
                     .sdtype = TERN_DT_BF16, .bits = bits, .group = group, .name = "bench",
                     .qblock = kquant ? kq : kvt == TERN_KV_Q4_0 ? TERN_QB_Q4_0 : TERN_QB_Q8_0};
    tern_qpack *pk = NULL;
    tern_pool *pool = NULL;
    tern_membw *probe = NULL;
    tern_err *err = tern_qpack_supported(&w) ? tern_qpack_create(&w, NULL, &pk) : NULL; /* as the loader packs */
    if (!err)
        err = tern_pool_create(threads, &pool);
    if (!err)
        err = tern_membw_create((size_t)256 << 20, &probe);
    if (err) {
        fprintf(stderr, "bench_kernels: %s\n", tern_err_msg(err));
        return 1;
    }
    w.qpack = pk;
    char what[32];
    if (kquant)
        snprintf(what, sizeof what, "%s %s", tern_qblock_name(kq), pk ? "packed" : "(ggml blocks)");
    else if (ggml)
        snprintf(what, sizeof what, "%s packed", format);
    else if (pk)
        snprintf(what, sizeof what, "q%d/%d packed", bits, group);
    else
        snprintf(what, sizeof what, "%s", format);
    measure_matrix(argc, argv, pool, probe, &w,
                   ggml || kquant ? (double)rows * (double)ggml_row
                   : pk ? (double)pk->block_bytes * (double)pk->blocks : (double)(rows * in) * (double)es,
                   x, y, what);
    tern_membw_free(probe);
    tern_pool_destroy(pool);
    tern_qpack_free(pk);
    free(data);
    free(scales);
    free(biases);
    free(row);
    free(x);
    free(y);
    return 0;
}
