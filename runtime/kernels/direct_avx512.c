/* direct_avx512.c — the direct kernels (direct_kernels.inc) for AVX-512 F: 16 floats a vector,
 * 32 registers, so a tile holds up to 24 accumulators. Compiled for AVX-512 here whatever the
 * build's target; run only where rt_isa() says the CPU and the OS support it (direct.h). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC target("avx512f")
#endif
#define RT_SIMD_AVX512 1
#define RT_SIMD_NAME "avx512"
#include "runtime/kernels/direct.h"
#include "runtime/kernels/simd.h"

enum { GROUP_NV = 4 };
/* products on these tiles match or beat OpenBLAS up to 2^30 multiply-adds (gemm.h) */
enum { OWN_PRODUCTS = 1 };
static const int TILE_BIG[4] = {12, 12, 8, 6};

#include "runtime/kernels/direct_kernels.inc"
#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
