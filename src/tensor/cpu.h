/* cpu.h — which instruction set the kernels use: detected once from cpuid, overridable with
 * TERN_ISA=portable|avx2|avx512|amx (tests run every path on one machine). */
#ifndef TERN_TENSOR_CPU_H
#define TERN_TENSOR_CPU_H

#include <stdint.h>

typedef enum tern_isa {
    TERN_ISA_PORTABLE = 0, /* plain C */
    TERN_ISA_AVX2,         /* AVX2 + FMA + F16C */
    TERN_ISA_AVX512,       /* AVX-512 F/BW/VL + VNNI + BF16 */
    TERN_ISA_AMX           /* AVX-512 as above, the int8 products' whole tiles on AMX-INT8 */
} tern_isa;

/* The best ISA this CPU supports. */
tern_isa tern_isa_detect(void);
/* The ISA in use: TERN_ISA if set (capped at what the CPU supports), else the detected one. */
tern_isa tern_isa_active(void);
/* Forces an ISA (capped at what the CPU supports); for tests and benchmarks. */
void tern_isa_set(tern_isa isa);
/* Whether the CPU has AVX-512 VBMI (byte permutes and multishifts: the Q6_K form's kernel, qmm_q6k_avx512.c):
 * Ice Lake, Sapphire Rapids and Zen 4 on, not Cooper Lake. */
int tern_cpu_vbmi(void);
/* The fewest tokens a pass of the int8 products covers before it requests its weight stream ahead in software
 * (below that the stream is left to the hardware prefetchers). TERN_STREAM_TOKENS=1..4 if set; else what
 * tern_cpu_set_stream_tokens chose (the measurement of models/stream_choice.h); else from cpuid: 4 on AMD before
 * family 1Ah (on Zen 4 the requests slowed passes over 1-3 tokens), 1 elsewhere (on Zen 5 a lone token's pass falls
 * a quarter behind the stream without them, on a Xeon of model 207 one to three tokens decode 1.45-1.7x faster
 * with them). */
int tern_cpu_stream_tokens(void);
/* Sets tern_cpu_stream_tokens to n (1..4) unless TERN_STREAM_TOKENS says otherwise; 1 if it was set. Not while
 * products run: their passes read it per block. */
int tern_cpu_set_stream_tokens(int n);
/* Whether TERN_STREAM_TOKENS sets the count (benchmarks compare settings on one machine). */
int tern_cpu_stream_tokens_asked(void);
/* A 64-bit identity of this CPU model and the ISA in use (cpuid vendor, family/model/stepping, brand string): what
 * a choice measured on this CPU is kept under. */
uint64_t tern_cpu_signature(void);
/* "portable", "avx2", "avx512", "amx". */
const char *tern_isa_name(tern_isa isa);

#endif
