/* tiles.h — private to runtime/kernels/: the register tiles shared by the direct convolutions
 * and the f32 products (direct_kernels.inc). A tile is NV vectors (1 to 4, the last one masked)
 * by a block of B pixels, taps or rows, at most 24 accumulators (of AVX-512's 32 registers; 12
 * of AVX2's 16); every block size is compiled so that a run splits into near-equal blocks
 * (14 = 5 + 5 + 4, not 6 + 6 + 1 + 1: a one-row block has too few accumulators to hide the FMA
 * latency). */
#ifndef TJ_RT_TILES_H
#define TJ_RT_TILES_H

#include <stdint.h>

#include "runtime/runtime.h"

enum { RT_TILE_BIG = 12 }; /* the largest block of any ISA (direct.h: rt_simd_kernels.tile_big) */

/* Instantiates T(NV, B) for every tile. (clang-format re-indents this list on every pass.) */
// clang-format off
#define RT_TILES(T)                                                                                \
    T(1, 1) T(1, 2) T(1, 3) T(1, 4) T(1, 5) T(1, 6) T(1, 7) T(1, 8) T(1, 9) T(1, 10) T(1, 11)      \
    T(1, 12) T(2, 1) T(2, 2) T(2, 3) T(2, 4) T(2, 5) T(2, 6) T(2, 7) T(2, 8) T(2, 9) T(2, 10)      \
    T(2, 11) T(2, 12) T(3, 1) T(3, 2) T(3, 3) T(3, 4) T(3, 5) T(3, 6) T(3, 7) T(3, 8) T(4, 1)      \
    T(4, 2) T(4, 3) T(4, 4) T(4, 5) T(4, 6)
// clang-format on

/* The dispatch table [NV - 1][B] of the functions p##_NV_B (NULL where B is 0 or too large). */
#define RT_TILE_TABLE(fn_type, name, p)                                                            \
    static const fn_type name[4][RT_TILE_BIG + 1] = {                                              \
        {NULL, p##_1_1, p##_1_2, p##_1_3, p##_1_4, p##_1_5, p##_1_6, p##_1_7, p##_1_8, p##_1_9,    \
         p##_1_10, p##_1_11, p##_1_12},                                                            \
        {NULL, p##_2_1, p##_2_2, p##_2_3, p##_2_4, p##_2_5, p##_2_6, p##_2_7, p##_2_8, p##_2_9,    \
         p##_2_10, p##_2_11, p##_2_12},                                                            \
        {NULL, p##_3_1, p##_3_2, p##_3_3, p##_3_4, p##_3_5, p##_3_6, p##_3_7, p##_3_8},            \
        {NULL, p##_4_1, p##_4_2, p##_4_3, p##_4_4, p##_4_5, p##_4_6},                              \
    }

/* n split into blocks of at most big, as equal as possible: how many, and block i's start and
 * length (the first n % count blocks get one more). */
static inline int64_t rt_tile_blocks(int64_t n, int64_t big) {
    return (n + big - 1) / big;
}
static inline void rt_tile_block(int64_t n, int64_t nb, int64_t i, int64_t *start, int64_t *len) {
    int64_t q = n / nb, r = n % nb;
    *start = i * q + (i < r ? i : r);
    *len = q + (i < r);
}

#endif
