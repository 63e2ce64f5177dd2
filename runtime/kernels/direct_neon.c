/* direct_neon.c — the direct kernels (direct_kernels.inc) for aarch64's Advanced SIMD: 4 floats
 * a vector, 32 registers, so tiles as AVX-512's (up to 24 accumulators) over 4 vectors of
 * channels. NEON has no masked loads: simd.h takes a tail vector lane by lane. Products stay with
 * OpenBLAS (not measured against these tiles on an ARM CPU yet). */
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define RT_SIMD_NEON 1
#define RT_SIMD_NAME "neon"
#include "runtime/kernels/direct.h"
#include "runtime/kernels/simd.h"

enum { GROUP_NV = 4 };
enum { OWN_PRODUCTS = 0 };
static const int TILE_BIG[4] = {12, 12, 8, 6};

#include "runtime/kernels/direct_kernels.inc"
#endif
