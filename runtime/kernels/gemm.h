/* gemm.h — f32 products with a packed constant right operand (gemm_packed.c), used by the CPU
 * program's matrix-product steps when B is a constant of the graph. */
#ifndef TJ_RT_GEMM_H
#define TJ_RT_GEMM_H

#include <stddef.h>
#include <stdint.h>

/* B [k, n] in panels of `panel` columns: p is [ceil(n/panel)][k][panel], zero past n (products:
 * panels of RT_PANEL; the direct convolutions' filters: of rt_simd_kernels.group) */
typedef struct rt_packed_b {
    float *p;
    int64_t k, n, panel;
    size_t bytes;
} rt_packed_b;

/* An epilogue applied in registers after the last chunk of K, in order: + each addend, a row of
 * N floats added to every row (a bias) or, full, an [M][N] matrix whose rows are ld floats apart
 * (a residual: ResNet's skip connection), then relu (NaN stays NaN, as the reference kernel's).
 * A full addend must not overlap C (the tiles store partial sums in C before its last chunk),
 * unless it is C itself and rt_gemm_epi_in_place(K): K in one chunk, each element of the addend
 * read by its tile before the tile stores it. */
enum { RT_GEMM_EPI_ADDS = 4 };
typedef struct rt_gemm_epi {
    const float *add[RT_GEMM_EPI_ADDS];
    uint8_t full[RT_GEMM_EPI_ADDS];
    int n_add, relu;
    int64_t ld;
} rt_gemm_epi;

/* 1 when f32 products run on the runtime's own tiles here (AVX-512; on AVX2 OpenBLAS is faster:
 * direct.h's rt_simd_kernels.products). */
int rt_gemm_packed_usable(void);
/* 1 when the tiles sum K in one chunk, so that a full addend may be C itself. */
int rt_gemm_epi_in_place(int64_t K);
/* 1 when an f32 product of this size should run on these kernels (rt_gemm_f32) rather than
 * OpenBLAS: up to 2^30 multiply-adds they match or beat it here (bench/RESULTS.md); beyond,
 * OpenBLAS's packing of A keeps it ahead (2048^3: 36 vs 42 ms). */
int rt_gemm_f32_takes(int64_t m, int64_t n, int64_t k);
/* B [K,N] row-major with leading dimension ldb (trans: B is stored [N,K], ldb its row length)
 * packed into panels. New, owned by the caller (rt_gemm_packed_free); NULL when the CPU lacks
 * AVX-512 or memory is short. */
rt_packed_b *rt_gemm_pack(const float *B, int64_t K, int64_t N, int64_t ldb, int trans);
/* The same with panels of `panel` columns (any CPU); NULL when memory is short. */
rt_packed_b *rt_pack_panels(const float *B, int64_t K, int64_t N, int64_t ldb, int trans,
                            int64_t panel);
/* B's panels written into dst ([ceil(N/panel)][K][panel] floats). */
void rt_pack_panels_into(float *dst, const float *B, int64_t K, int64_t N, int64_t ldb, int trans,
                         int64_t panel);
void rt_gemm_packed_free(rt_packed_b *pb); /* NULL-safe */
/* C [M, pb->n] (row length ldc) = A [M, pb->k] (row length lda) · B, then epi (NULL: none), on
 * the runtime's pool. */
void rt_gemm_packed(const rt_packed_b *pb, int64_t M, const float *A, int64_t lda, float *C,
                    int64_t ldc, const rt_gemm_epi *epi);
/* C [M, N] = op(A) [M, K] · B [K, N] (row lengths lda, ldb, ldc) with the same kernels, B
 * packed for the call or read as it lies (the interpreter's products, so a tiered function's
 * first call does not wait for OpenBLAS to start); op(A) is A, or with trans_a A stored [K, M]
 * (a dense layer's weight gradient, x' · dy). 0 when done; 1 when this CPU lacks AVX-512 or a
 * size is 0 (nothing written). */
int rt_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, int trans_a,
                const float *B, int64_t ldb, float *C, int64_t ldc, const rt_gemm_epi *epi);
/* 1 when C = A · B' with B stored [N, K] (a dense layer's input gradient, dy · W') should run
 * on these kernels (rt_gemm_f32_bt): few rows of A, so it is computed as C' = B · A' with A'
 * packed. */
int rt_gemm_f32_bt_takes(int64_t m, int64_t n, int64_t k);
/* C [M, N] (contiguous) = A [M, K] · B' with B stored [N, K] (row lengths lda, ldb): C' on the
 * tiles into a scratch block, then transposed into C; on allocation failure a plain loop. */
void rt_gemm_f32_bt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float *C);

#endif
