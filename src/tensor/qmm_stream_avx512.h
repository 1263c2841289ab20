/* qmm_stream_avx512.h — the weight-stream requests the AVX-512 int8 kernels (qmm_avx512.c, and the Q6_K form's,
 * qmm_q6k_avx512.c) issue as they read packed blocks, in passes over tern_cpu_stream_tokens() tokens or more.
 * Included only by files compiled with AVX-512 flags. */
#ifndef TERN_TENSOR_QMM_STREAM_AVX512_H
#define TERN_TENSOR_QMM_STREAM_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "tensor/cpu.h"

/* Bytes ahead of the current chunk requested from memory, into L1 and (further ahead) into L2, in passes over
 * tern_cpu_stream_tokens() or more tokens (always from 4). From 4 tokens a pass consumes the stream slowly enough
 * that hardware prefetch alone leaves the core waiting on DRAM latency (without the L1 requests a pass over 4 or 8
 * tokens takes ~1.8x as long; busy with VPDPBUSD, it needs the L2 ones too to keep enough lines in flight: over
 * the e2b-shaped sequence at 8 tokens q8 49 -> 38 ms at 36 GB/s, q4 4 tokens 31 -> 19 ms). Passes over 1 to 3
 * tokens: on Zen 4 they consumed the stream fast enough for the hardware prefetchers and the requests got in their
 * way (a single token lost 2-14 points of the probe at 35-60 GB/s, 2 tokens 80 -> 75%); on Zen 5 a single token's
 * pass reads a 16384 x 8192 Q4_0 matrix at 24-48 GB/s without them, 39-57 with them (probe 40-65, alternating). */
#define QMM_PREFETCH 4096
#define QMM_PREFETCH_L2 12288

/* Whether a pass over NT tokens (a compile-time constant) issues the requests above. */
static inline __attribute__((always_inline)) int stream_requests(const int NT) {
    return NT >= 4 || NT >= tern_cpu_stream_tokens();
}

/* The requests above, issued at each 64-byte chunk of a pass that makes them. */
static inline __attribute__((always_inline)) void request_ahead(const uint8_t *chunk, int ask) {
    if (ask) {
        _mm_prefetch((const char *)(chunk + QMM_PREFETCH), _MM_HINT_T0);
        _mm_prefetch((const char *)(chunk + QMM_PREFETCH_L2), _MM_HINT_T1);
    }
}

#endif
