/* gemm_packed.c — f32 matrix products whose right operand is a constant (a layer's weights),
 * packed once into panels, on AVX-512 (picked at run time).
 *
 * OpenBLAS packs B on every call: for a dense layer of the seed's CNN ([50,3136] x [3136,1024])
 * that copy of the 12.8 MB weight costs as much as a third of the product. A constant B is
 * packed once, the way ONNX Runtime's MLAS prepacks weights: panels of 64 columns, each [K][64]
 * contiguous (zero past N), so the kernel streams one panel with aligned loads. The register
 * tile is MR rows x 16·NV columns (NV vectors per row, the last masked): per k it loads NV
 * vectors of B, broadcasts MR elements of A and issues MR·NV fused multiply-adds. K is cut in
 * chunks of KC so a panel's chunk (64 KiB) stays in L2 while every row block of the task reads
 * it. Tasks on the runtime's pool are (panel, block of rows). Sums run in k order with fused
 * multiply-adds, as the direct convolutions do; TJ_EXACT_MATH keeps the reference kernels
 * (the caller never takes this path under it). */
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/tiles.h"
#include "runtime/rt_pool.h"

enum { PANEL = 64, KC = 128 };

int rt_gemm_packed_usable(void) {
    return rt_avx512();
}

int rt_gemm_f32_takes(int64_t m, int64_t n, int64_t k) {
    return rt_gemm_packed_usable() && m >= 1 && n >= 1 && k >= 1 && m <= (1 << 30) / n / k;
}

rt_packed_b *rt_gemm_pack(const float *B, int64_t K, int64_t N, int64_t ldb, int trans) {
    if (!rt_gemm_packed_usable() || K < 1 || N < 1)
        return NULL;
    int64_t np = (N + PANEL - 1) / PANEL;
    rt_packed_b *pb = calloc(1, sizeof *pb);
    size_t bytes = (size_t)(np * K * PANEL) * sizeof(float);
    float *p = pb ? aligned_alloc(64, bytes) : NULL;
    if (!p) {
        free(pb);
        return NULL;
    }
    for (int64_t q = 0; q < np; q++) {
        int64_t n0 = q * PANEL, w = N - n0 < PANEL ? N - n0 : PANEL;
        for (int64_t k = 0; k < K; k++) {
            float *dst = p + (q * K + k) * PANEL;
            for (int64_t j = 0; j < w; j++)
                dst[j] = trans ? B[(n0 + j) * ldb + k] : B[k * ldb + n0 + j];
            for (int64_t j = w; j < PANEL; j++)
                dst[j] = 0.0f;
        }
    }
    pb->p = p, pb->k = K, pb->n = N, pb->bytes = bytes;
    return pb;
}

void rt_gemm_packed_free(rt_packed_b *pb) {
    if (pb)
        free(pb->p);
    free(pb);
}

#if HAVE_X86
typedef struct gemm_task {
    const float *B; /* packed panels (ldb = PANEL, panel q at q·K·PANEL) or B itself */
    int packed;
    const float *A;
    float *C;
    int64_t M, K, N, lda, ldb, ldc;
    int64_t n_rgroups, rows_per, panels_per; /* tasks: group of rows x group of panels */
    const float *bias;                       /* the epilogue: + bias[col], then relu; NULL: none */
    int relu;
} gemm_task;

#define UNROLL _Pragma("GCC unroll 16")

/* C[r0 .. r0+MR, n0 + the panel's columns] (+)= A[r0 .., k0 .. k1) · panel[k0 .. k1) (rows of
 * the panel ldb apart; the last vector's lanes past N masked: an unpacked B ends there); after the
 * last chunk of K the epilogue: + bias, then relu as the reference kernel's (NaN stays NaN) */
#define TILE(NV, MR)                                                                               \
    TGT static void tile_##NV##_##MR(const gemm_task *t, const float *bp, int64_t r0, int64_t k0,  \
                                     int64_t k1, int64_t n0, __mmask16 last) {                     \
        float *c = t->C + n0;                                                                      \
        int epi = k1 == t->K && (t->bias || t->relu);                                              \
        __m512 acc[MR][NV];                                                                        \
        UNROLL for (int r = 0; r < MR; r++) UNROLL for (int v = 0; v < NV; v++) acc[r][v] =        \
            _mm512_setzero_ps();                                                                   \
        const float *a = t->A + r0 * t->lda;                                                       \
        for (int64_t k = k0; k < k1; k++) {                                                        \
            __m512 bv[NV];                                                                         \
            UNROLL for (int v = 0; v < NV - 1; v++) bv[v] =                                        \
                _mm512_loadu_ps(bp + k * t->ldb + 16 * v);                                         \
            bv[NV - 1] = _mm512_maskz_loadu_ps(last, bp + k * t->ldb + 16 * (NV - 1));             \
            UNROLL for (int r = 0; r < MR; r++) {                                                  \
                __m512 ab = _mm512_set1_ps(a[r * t->lda + k]);                                     \
                UNROLL for (int v = 0; v < NV; v++) acc[r][v] =                                    \
                    _mm512_fmadd_ps(ab, bv[v], acc[r][v]);                                         \
            }                                                                                      \
        }                                                                                          \
        UNROLL for (int r = 0; r < MR; r++) {                                                      \
            float *cr = c + (r0 + r) * t->ldc;                                                     \
            UNROLL for (int v = 0; v < NV; v++) {                                                  \
                __mmask16 m = v == NV - 1 ? last : (__mmask16)0xffff;                              \
                __m512 x = acc[r][v];                                                              \
                if (k0 > 0)                                                                        \
                    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, cr + 16 * v));                   \
                if (epi && t->bias)                                                                \
                    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, t->bias + n0 + 16 * v));         \
                if (epi && t->relu) /* x > 0 or NaN: x; else +0 */                                 \
                    x = _mm512_maskz_mov_ps(                                                       \
                        _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ), x);               \
                _mm512_mask_storeu_ps(cr + 16 * v, m, x);                                          \
            }                                                                                      \
        }                                                                                          \
    }

RT_TILES(TILE)

typedef void (*tile_fn)(const gemm_task *, const float *, int64_t, int64_t, int64_t, int64_t,
                        __mmask16);
RT_TILE_TABLE(tile_fn, tiles, tile);

/* Task i: rows [m0, m1) x panels [q0, q1). Per chunk of K the rows' chunk of A stays in L2
 * while each panel's chunk (32 KiB, in L1) is read by every block of rows. */
static void gemm_piece(void *ctx, int64_t i) {
    const gemm_task *t = ctx;
    int64_t np = (t->N + PANEL - 1) / PANEL, rg = i % t->n_rgroups, pg = i / t->n_rgroups;
    int64_t m0 = rg * t->rows_per, m1 = m0 + t->rows_per < t->M ? m0 + t->rows_per : t->M;
    int64_t q0 = pg * t->panels_per, q1 = q0 + t->panels_per < np ? q0 + t->panels_per : np;
    if (m0 >= m1 || q0 >= q1)
        return;
    /* chunks of K as equal as possible (784 = 7 x 112, not 6 x 128 + 16) */
    int64_t nkc = (t->K + KC - 1) / KC, kc = (t->K + nkc - 1) / nkc;
    for (int64_t k0 = 0; k0 < t->K; k0 += kc) {
        int64_t k1 = k0 + kc < t->K ? k0 + kc : t->K;
        for (int64_t q = q0; q < q1; q++) {
            int64_t n0 = q * PANEL, w = t->N - n0 < PANEL ? t->N - n0 : PANEL;
            int nv = (int)((w + 15) / 16);
            __mmask16 last = rt_lanes(w - 16 * (nv - 1));
            int64_t rows = m1 - m0, nb = rt_tile_blocks(rows, rt_tile_big[nv - 1]);
            const float *bp = t->packed ? t->B + q * t->K * PANEL : t->B + n0;
            /* row blocks as equal as possible (50 = 5 blocks of 6 + 4 of 5, not 8 x 6 + 2) */
            for (int64_t b = 0; b < nb; b++) {
                int64_t r, len;
                rt_tile_block(rows, nb, b, &r, &len);
                tiles[nv - 1][len](t, bp, m0 + r, k0, k1, n0, last);
            }
        }
    }
}
#endif

#if HAVE_X86
/* Splits t over the pool: groups of at most ROWS rows (their chunk of A fits L2), then enough
 * groups of panels for two tasks per thread; a single panel splits its rows further. */
static void gemm_run(gemm_task t) {
    enum { ROWS = 256 };
    int64_t M = t.M, np = (t.N + PANEL - 1) / PANEL, threads = rt_pool_size();
    int64_t rgroups = (M + ROWS - 1) / ROWS, want = 2 * threads;
    int64_t pgroups = (want + rgroups - 1) / rgroups;
    pgroups = pgroups > np ? np : pgroups < 1 ? 1 : pgroups;
    if (rgroups * pgroups < want && M >= 2 * 12) /* few panels: more row groups */
        rgroups = (want + pgroups - 1) / pgroups;
    if (M * t.N * t.K < 65536)
        rgroups = pgroups = 1;
    int64_t rows_per = (M + rgroups - 1) / rgroups, panels_per = (np + pgroups - 1) / pgroups;
    t.n_rgroups = (M + rows_per - 1) / rows_per;
    t.rows_per = rows_per, t.panels_per = panels_per;
    pgroups = (np + panels_per - 1) / panels_per;
    if (t.n_rgroups * pgroups > 1)
        rt_parallel_for(t.n_rgroups * pgroups, gemm_piece, &t);
    else
        gemm_piece(&t, 0);
}
#endif

void rt_gemm_packed(const rt_packed_b *pb, int64_t M, const float *A, int64_t lda, float *C,
                    int64_t ldc, const rt_gemm_epi *epi) {
#if HAVE_X86
    if (M >= 1)
        gemm_run((gemm_task){.B = pb->p,
                             .packed = 1,
                             .A = A,
                             .C = C,
                             .M = M,
                             .K = pb->k,
                             .N = pb->n,
                             .lda = lda,
                             .ldb = PANEL,
                             .ldc = ldc,
                             .bias = epi ? epi->bias : NULL,
                             .relu = epi && epi->relu});
#else
    (void)pb, (void)M, (void)A, (void)lda, (void)C, (void)ldc, (void)epi;
#endif
}

int rt_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                int64_t ldb, float *C, int64_t ldc, const rt_gemm_epi *epi) {
#if HAVE_X86
    if (!rt_gemm_packed_usable() || M < 1 || N < 1 || K < 1)
        return 1;
    gemm_run((gemm_task){.B = B,
                         .A = A,
                         .C = C,
                         .M = M,
                         .K = K,
                         .N = N,
                         .lda = lda,
                         .ldb = ldb,
                         .ldc = ldc,
                         .bias = epi ? epi->bias : NULL,
                         .relu = epi && epi->relu});
    return 0;
#else
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)C, (void)ldc,
        (void)epi;
    return 1;
#endif
}
