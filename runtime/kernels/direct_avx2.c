/* direct_avx2.c — the direct kernels (direct_kernels.inc) for AVX2 with FMA: 8 floats a vector,
 * 16 registers, so a tile holds up to 12 accumulators (the 6 x 16 tile of AVX2 sgemm kernels at
 * NV 2). Compiled for AVX2 + FMA here whatever the build's target; run only where rt_isa() says
 * the CPU supports them (direct.h). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif
#define RT_SIMD_AVX2 1
#define RT_SIMD_NAME "avx2"
#include "runtime/kernels/direct.h"
#include "runtime/kernels/simd.h"

enum { GROUP_NV = 2 };
/* products stay with OpenBLAS: its Haswell kernels beat these tiles (an MLP step 1.31x and the
 * seed CNN's 1.12x slower on them, bench/RESULTS.md) */
enum { OWN_PRODUCTS = 0 };
static const int TILE_BIG[4] = {12, 6, 4, 3};

#include "runtime/kernels/direct_kernels.inc"
#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
