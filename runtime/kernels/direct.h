/* direct.h — private to runtime/kernels/: the direct f32 kernels (convolutions, their filter
 * gradient, max pooling, packed products) written once (direct_kernels.inc) in simd.h's vector
 * operations and compiled once per instruction set (direct_avx512.c, direct_avx2.c), and what the
 * ISA-neutral halves (conv_direct.c, gemm_packed.c) hand them. rt_simd() picks the table for
 * rt_isa(): the planner, the kernels and the tests ask the same query. */
#ifndef TJ_RT_DIRECT_H
#define TJ_RT_DIRECT_H

#include <stdint.h>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/tiles.h"

struct rt_simd_kernels;

/* One convolution over a padded input: xp[b][r][col][c] at b·xs_img + r·xs_row + col·C + c. */
typedef struct rt_dconv {
    const struct rt_simd_kernels *k;
    const float *x;
    int64_t xs_img, xs_row, C;
    /* forward: the filter packed per group of GROUP output channels (rt_simd_kernels.group):
     * group g's tap t (= ky·KWC + j) at w + g·wg + t·wt, wt = GROUP floats, zero past O, each
     * tap's vectors aligned and one group's taps one contiguous stream */
    const float *w;
    int64_t wg, wt;
    const float *dy;
    float *y; /* forward: [N][OH][OW][O]; filter grad: [KH][KWC][O] */
    int64_t N, OH, OW, O, KH, KWC, sh, sw;
    /* forward with short filter rows (KWC < 16: few channels): every tap (ky, j) in one loop,
     * at input offset tap[t] = ky·xs_row + j, instead of a KWC-long loop per filter row (the
     * seed CNN's first layer: 5 taps a row, the row loop's setup cost as much as its FMAs) */
    int n_taps;
    int32_t tap[256];
} rt_dconv;

/* The taps a forward tile sums: filter rows [ky0, ky1), taps [j0, j1) of each, onto the sums in
 * its output (add) or from zero. */
typedef struct rt_kspan {
    int64_t ky0, ky1, j0, j1;
    int add;
} rt_kspan;

/* Filter-gradient tasks: (ky, channel group, block of taps). */
typedef struct rt_dw_plan {
    const rt_dconv *d;
    int64_t n_groups, n_blocks, span; /* span: taps per task */
} rt_dw_plan;

/* A product C (+)= A · B on the pool: B packed panels (ldb = RT_PANEL, panel q at q·K·RT_PANEL)
 * or B itself; tasks are (group of rows, group of panels). */
enum { RT_PANEL = 64, RT_KC = 128 };
/* A product's tasks take at most RT_GEMM_ROWS rows of A each, every one reading all of B; an
 * unpacked B is packed first only where there are several such groups of rows (gemm_packed.c) */
enum { RT_GEMM_ROWS = 256, RT_PACK_ROWS = RT_GEMM_ROWS + 1 };
typedef struct rt_gemm_task {
    const float *B;
    int packed;
    const float *A;
    int trans_a; /* A stored [K][M] */
    float *C;
    int64_t M, K, N, lda, ldb, ldc;
    int64_t n_rgroups, rows_per, panels_per;
    rt_gemm_epi epi; /* applied after the last chunk of K (n_add 0 and no relu: none) */
} rt_gemm_task;

typedef struct rt_simd_kernels {
    const char *isa;
    int lanes;           /* floats per vector */
    int group;           /* output channels (columns) per register tile: 4 vectors */
    const int *tile_big; /* the largest block of pixels, taps or rows per tile of 1-4 vectors */
    /* whether f32 products run on these tiles rather than OpenBLAS (measured per ISA:
     * bench/RESULTS.md; gemm_packed.c) */
    int products;
    /* forward output rows [oy0, oy1) of image b of d into y ([OW][O] a row, rows ystride floats
     * apart), the groups of output channels [g0, g1) (of `group` channels each) */
    void (*fwd_rows_into)(const rt_dconv *d, int64_t b, int64_t oy0, int64_t oy1, int64_t g0,
                          int64_t g1, float *y, int64_t ystride);
    /* filter-gradient task t of plan ctx (an rt_dw_plan) */
    void (*dw_task)(void *ctx, int64_t t);
    /* max pooling of sample b; one pooled row from its window's nr input rows (conv.h) */
    void (*max_pool_rows)(const rt_conv_geom *p, const float *x, float *y, int64_t b, int64_t oy0,
                          int64_t oy1);
    void (*avg_pool_rows)(const rt_conv_geom *p, const float *x, float *y, int64_t b, int64_t oy0,
                          int64_t oy1);
    void (*max_pool_band)(const rt_conv_geom *p, const float *rows, int64_t nr, float *y);
    /* product task i of ctx (an rt_gemm_task) */
    void (*gemm_piece)(void *ctx, int64_t i);
} rt_simd_kernels;

/* The kernels for rt_isa(), or NULL (no vector ISA they are written for: the callers' reference
 * paths run). */
const rt_simd_kernels *rt_simd(void);

#endif /* TJ_RT_DIRECT_H */
