/* cpu.c — instruction-set detection and selection. */
#include "tensor/cpu.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

/* Whether this process may use the AMX tile data: Linux grants it on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XTILEDATA, feature 18), once for the whole process; asked once. */
static int amx_permitted(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    static atomic_int granted = -1;
    int g = atomic_load(&granted);
    if (g < 0) {
        g = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
        atomic_store(&granted, g);
    }
    return g;
#else
    return 0;
#endif
}
#endif

tern_isa tern_isa_detect(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return TERN_ISA_PORTABLE;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave)
        return TERN_ISA_PORTABLE;
    unsigned long long xcr0 = xgetbv0();
    int ymm_os = (xcr0 & 6) == 6, zmm_os = (xcr0 & 0xe6) == 0xe6;
    unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0, b71, c71, d71;
    __cpuid_count(7, 0, a, b7, c7, d7);
    __cpuid_count(7, 1, a71, b71, c71, d71);
    int avx2 = (b7 >> 5) & 1;
    int avx512f = (b7 >> 16) & 1, avx512bw = (b7 >> 30) & 1, avx512vl = (b7 >> 31) & 1;
    int vnni = (c7 >> 11) & 1, bf16 = (a71 >> 5) & 1;
    int amx = ((d7 >> 24) & 1) && ((d7 >> 25) & 1), tiles_os = (xcr0 & 0x60000) == 0x60000;
    if (zmm_os && avx512f && avx512bw && avx512vl && vnni && bf16 && fma && f16c)
        return amx && tiles_os && amx_permitted() ? TERN_ISA_AMX : TERN_ISA_AVX512;
    if (ymm_os && avx2 && fma && f16c)
        return TERN_ISA_AVX2;
#endif
    return TERN_ISA_PORTABLE;
}

/* *slot, set from ask() the first time. The cpuid answers are asked once: cpuid is slow (in a virtual machine it
 * exits to the hypervisor), and every product asks. */
static int ask_once(atomic_int *slot, int (*ask)(void)) {
    int v = atomic_load(slot);
    if (v < 0) {
        v = ask();
        atomic_store(slot, v);
    }
    return v;
}

static int vbmi_of_cpu(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) && ((c >> 27) & 1) && (xgetbv0() & 0xe6) == 0xe6) {
        __cpuid_count(7, 0, a, b, c, d);
        return (c >> 1) & 1;
    }
#endif
    return 0;
}

int tern_cpu_vbmi(void) {
    static atomic_int has = -1;
    return ask_once(&has, vbmi_of_cpu);
}

/* TERN_STREAM_TOKENS as a count 1..4, or 0 when it is not set to one. */
static int stream_tokens_asked(void) {
    const char *env = getenv("TERN_STREAM_TOKENS");
    return env && env[0] >= '1' && env[0] <= '4' && !env[1] ? env[0] - '0' : 0;
}

static int stream_tokens_of_cpu(void) {
    const int asked = stream_tokens_asked();
    if (asked)
        return asked;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    /* AMD's family: the base family (bits 8-11) plus the extended one (bits 20-27) when the base is 0xf */
    if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541 /* "Auth" enticAMD */ && __get_cpuid(1, &a, &b, &c, &d) &&
        ((a >> 8) & 0xf) + ((a >> 8 & 0xf) == 0xf ? (a >> 20) & 0xff : 0) < 0x1a)
        return 4;
#endif
    return 1;
}

static atomic_int stream_tokens = -1;

int tern_cpu_stream_tokens(void) { return ask_once(&stream_tokens, stream_tokens_of_cpu); }

int tern_cpu_set_stream_tokens(int n) {
    if (stream_tokens_asked() || n < 1 || n > 4)
        return 0;
    atomic_store(&stream_tokens, n);
    return 1;
}

int tern_cpu_stream_tokens_asked(void) { return stream_tokens_asked() != 0; }

uint64_t tern_cpu_signature(void) {
    uint32_t regs[17] = {0}; /* vendor (3), leaf 1's EAX (1), brand string (12), the ISA in use (1) */
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d))
        regs[0] = b, regs[1] = d, regs[2] = c;
    if (__get_cpuid(1, &a, &b, &c, &d))
        regs[3] = a;
    for (unsigned leaf = 0; leaf < 3; leaf++)
        if (__get_cpuid(0x80000002u + leaf, &a, &b, &c, &d))
            regs[4 + leaf * 4] = a, regs[5 + leaf * 4] = b, regs[6 + leaf * 4] = c, regs[7 + leaf * 4] = d;
#endif
    regs[16] = (uint32_t)tern_isa_active();
    return tern_hash64(regs, sizeof regs, 0x435055);
}

static atomic_int active = -1;

tern_isa tern_isa_active(void) {
    int a = atomic_load(&active);
    if (a < 0) {
        tern_isa best = tern_isa_detect(), want = best;
        const char *env = getenv("TERN_ISA");
        if (env && !strcmp(env, "portable"))
            want = TERN_ISA_PORTABLE;
        else if (env && !strcmp(env, "avx2"))
            want = TERN_ISA_AVX2;
        else if (env && !strcmp(env, "avx512"))
            want = TERN_ISA_AVX512;
        a = (int)(want < best ? want : best);
        atomic_store(&active, a);
    }
    return (tern_isa)a;
}

void tern_isa_set(tern_isa isa) {
    tern_isa best = tern_isa_detect();
    atomic_store(&active, (int)(isa < best ? isa : best));
}

const char *tern_isa_name(tern_isa isa) {
    switch (isa) {
    case TERN_ISA_PORTABLE: return "portable";
    case TERN_ISA_AVX2: return "avx2";
    case TERN_ISA_AVX512: return "avx512";
    case TERN_ISA_AMX: return "amx";
    }
    return "?";
}
