/* isa.c — the one capability query for the runtime's hand-written CPU kernels: which vector
 * instruction set they may use here. The planner (a fused conv step, a product on packed
 * weights), the kernels and the tests all ask rt_isa(), so a test asserts a fast path exactly
 * where the planner would plan one. TJ_ISA=avx512|avx2|neon|generic lowers it (never raises it
 * past what the CPU and the OS support, never to another architecture's), so CI runs every path
 * the machine can execute. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

static const char *const isa_names[] = {"generic", "avx2", "avx512", "neon"};

/* What the CPU and the OS support: AVX-512 F (with its register state saved), or AVX2 + FMA. */
static int isa_detect(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return RT_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return RT_ISA_AVX2;
#elif defined(__aarch64__)
    return RT_ISA_NEON; /* Advanced SIMD is part of every AArch64 CPU */
#endif
    return RT_ISA_GENERIC;
}

int rt_isa_parse(const char *s) {
    for (int i = 0; s && i < (int)(sizeof isa_names / sizeof *isa_names); i++)
        if (strcmp(s, isa_names[i]) == 0)
            return i;
    return -1;
}

int rt_isa(void) {
    static int isa = -1;
    int v = __atomic_load_n(&isa, __ATOMIC_RELAXED);
    if (v < 0) { /* threads may race to store the same value */
        v = isa_detect();
        int cap = rt_config_get()->isa_cap;
        /* generic always lowers; an x86 ISA lowers only an x86 one (AVX-512 to AVX2) */
        if (cap == RT_ISA_GENERIC || (cap >= 0 && cap < v && v != RT_ISA_NEON))
            v = cap;
        __atomic_store_n(&isa, v, __ATOMIC_RELAXED);
    }
    return v;
}

const char *rt_isa_name(int isa) {
    return isa >= 0 && isa <= RT_ISA_NEON ? isa_names[isa] : "?";
}

const char *tj_cpu_isa(void) {
    return rt_isa_name(rt_isa());
}
