/* qmm_amx.c — the int8 product's whole tiles of 8 tokens on AMX, Intel's tile matrix unit (compiled with AVX-512
 * and AMX flags; called only when tern_isa_detect found AMX-INT8 usable: cpuid, the OS's tile state, and this
 * process's permission to use it).
 *
 * For each group of a 16-row block, TDPBSUD forms all 8 x 16 integer dots of the tile at once (the tokens' signed
 * activation codes against the rows' unsigned weight codes: VPDPBUSD's products, summed exactly in int32), four
 * groups at a time in four C tiles; qmm_avx512_epilogue.h then turns them into floats as the VNNI kernel does, so
 * the results are the AVX-512 kernel's — and tern_qmm_ref's — bit for bit. The packed layout is already AMX's: a
 * 64-byte chunk of 8-bit codes (16 rows x 4 consecutive codes) is one row of the B tile; 4-bit chunks are split
 * into their low and high nibbles first.
 *
 * Groups of 64 and 128 only: with groups of 32 (ggml's blocks) each product is half a tile's depth and the
 * per-group store and float epilogue outweigh it (e2b Q4_0 prefill 155 -> 124 tok/s on AMX, while MLX q4/64 gains
 * 158 -> 184 on a Sapphire Rapids-class Xeon); those, tiles of fewer tokens and the activations' quantization are
 * the AVX-512 kernel's. */
#include <immintrin.h>
#include <string.h>

#include "tensor/kernels.h"
#include "tensor/qmm.h"
#include "tensor/qmm_avx512_epilogue.h"

enum { NT = TERN_QACT_TILE, MAX_GROUP = 128, BATCH = 4 };

/* The tiles (the configuration is thread state, loaded when a thread first needs it): four groups' C (8 tokens x
 * 16 rows of int32) in tmm0-3, so their products and stores overlap; two pairs of A (8 tokens x 64 activation
 * bytes) and B (16 x 64 weight bytes) in tmm4/5 and tmm6/7. (The intrinsics take tile numbers as literals.) */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static _Thread_local int configured;

static void configure(void) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 4; i++)
        c.rows[i] = NT, c.colsb[i] = 64;
    for (int i = 4; i < 8; i += 2) {
        c.rows[i] = NT, c.colsb[i] = 64;
        c.rows[i + 1] = 16, c.colsb[i + 1] = 64;
    }
    _tile_loadconfig(&c);
    configured = 1;
}

/* Bytes ahead of a group requested on a block's first tile (the later tiles find the block in L1/L2), as the
 * VNNI kernel's first pass does. */
#define AMX_PREFETCH 4096

/* C += the dots of one group: NT rows of G activation codes at x against the B rows at b, 64 codes per step. */
#define AMX_GROUP(C, A, B, x, b)                                                                           \
    for (int64_t k_ = 0; k_ < G; k_ += 64) {                                                               \
        _tile_loadd(A, (x) + k_, G);                                                                       \
        _tile_loadd(B, (b) + k_ / 4 * 64, 64);                                                             \
        _tile_dpbsud(C, A, B);                                                                             \
    }

void tern_qmm_amx_tile(const uint8_t *blk, const tern_qact *a, int64_t t0, int first, int bits, tern_dtype sdt,
                       size_t gbytes, float *y, int64_t ystride, int valid) {
    const int64_t G = a->group, ng = a->in / G;
    if (a->T - t0 < NT || G % 64 || G > MAX_GROUP || ng % BATCH || a->ggml_steps) {
        tern_qmm_avx512.tile(blk, a, t0, first, bits, sdt, gbytes, y, ystride, valid);
        return;
    }
    if (!configured)
        configure();
    const size_t ss = sdt == TERN_DT_F32 ? 4 : 2;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    _Alignas(64) uint8_t split[BATCH][MAX_GROUP / 4 * 64]; /* 4-bit codes as bytes, one B row per 4 codes */
    _Alignas(64) int32_t dots[BATCH][NT][16];
    __m512 acc[NT];
    for (int t = 0; t < NT; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g += BATCH) {
        const int8_t *xq = a->q + (t0 * ng + g * NT) * G; /* group g + i's NT rows of codes: xq + i * NT * G */
        const uint8_t *bw[BATCH];
        for (int i = 0; i < BATCH; i++) {
            const uint8_t *grp = blk + (size_t)(g + i) * gbytes, *codes = grp + 32 * ss;
            if (first)
                for (size_t off = 0; off < gbytes; off += 64)
                    _mm_prefetch((const char *)(grp + off + AMX_PREFETCH), _MM_HINT_T0);
            bw[i] = codes;
            if (bits == 4) { /* chunk c: codes 8c .. 8c+3 in its low nibbles, 8c+4 .. 8c+7 in its high ones */
                for (int64_t c = 0; c < G / 8; c++) {
                    const __m512i W = _mm512_load_si512(codes + c * 64);
                    _mm512_store_si512(split[i] + 2 * c * 64, _mm512_and_si512(W, low4));
                    _mm512_store_si512(split[i] + (2 * c + 1) * 64,
                                       _mm512_and_si512(_mm512_srli_epi16(W, 4), low4));
                }
                bw[i] = split[i];
            }
        }
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        AMX_GROUP(0, 4, 5, xq, bw[0])
        AMX_GROUP(1, 6, 7, xq + NT * G, bw[1])
        AMX_GROUP(2, 4, 5, xq + 2 * NT * G, bw[2])
        AMX_GROUP(3, 6, 7, xq + 3 * NT * G, bw[3])
        _tile_stored(0, dots[0], 64);
        _tile_stored(1, dots[1], 64);
        _tile_stored(2, dots[2], 64);
        _tile_stored(3, dots[3], 64);
        for (int i = 0; i < BATCH; i++) {
            const uint8_t *grp = blk + (size_t)(g + i) * gbytes;
            const int64_t u0 = t0 * ng + (g + i) * NT;
            __m512i ia[NT];
            for (int t = 0; t < NT; t++)
                ia[t] = _mm512_load_si512(dots[i][t]);
            qmm_epilogue_affine(acc, ia, qmm_load_scales(grp, sdt), qmm_load_scales(grp + 16 * ss, sdt), a, u0, NT);
        }
    }
    const __mmask16 m = (__mmask16)((1u << valid) - 1);
    for (int t = 0; t < NT; t++)
        _mm512_mask_storeu_ps(y + t * ystride, m, acc[t]);
}
