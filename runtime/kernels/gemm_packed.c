/* gemm_packed.c — f32 matrix products whose right operand is a constant (a layer's weights),
 * packed once into panels, on the vector kernels of the CPU's instruction set (direct.h: AVX-512
 * or AVX2 + FMA, picked at run time by rt_isa()).
 *
 * OpenBLAS packs B on every call: for a dense layer of the seed's CNN ([50,3136] x [3136,1024])
 * that copy of the 12.8 MB weight costs as much as a third of the product. A constant B is
 * packed once, the way ONNX Runtime's MLAS prepacks weights: panels of 64 columns, each [K][64]
 * contiguous (zero past N), so the kernel streams one panel with aligned loads. The register
 * tile is MR rows x VL·NV columns (NV vectors of VL floats per row, the last masked; a panel is
 * one tile wide on AVX-512, two on AVX2): per k it loads NV vectors of B, broadcasts MR elements
 * of A and issues MR·NV fused multiply-adds. K is cut in
 * chunks of KC so a panel's chunk (64 KiB) stays in L2 while every row block of the task reads
 * it. Tasks on the runtime's pool are (panel, block of rows). Sums run in k order with fused
 * multiply-adds, as the direct convolutions do; TJ_EXACT_MATH keeps the reference kernels
 * (the caller never takes this path under it). This file is the ISA-neutral half (packing,
 * tasks); the tiles are in direct_kernels.inc. */
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/direct.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernels.h"
#include "runtime/rt_pool.h"

enum { PANEL = RT_PANEL };

int rt_gemm_packed_usable(void) {
    const rt_simd_kernels *k = rt_simd();
    return k && k->products;
}

int rt_gemm_epi_in_place(int64_t K) {
    return K >= 1 && K <= RT_KC; /* gemm_piece: one chunk of K */
}

int rt_gemm_f32_takes(int64_t m, int64_t n, int64_t k) {
    return rt_gemm_packed_usable() && m >= 1 && n >= 1 && k >= 1 && m <= (1 << 30) / n / k;
}

/* Panel q of B ([K][N], or [N][K] if trans) into dst: [K][panel], zero past N. */
static void pack_panel(float *dst, const float *B, int64_t K, int64_t N, int64_t ldb, int trans,
                       int64_t panel, int64_t q) {
    int64_t n0 = q * panel, w = N - n0 < panel ? N - n0 : panel;
    for (int64_t k = 0; k < K; k++, dst += panel) {
        if (trans)
            for (int64_t j = 0; j < w; j++)
                dst[j] = B[(n0 + j) * ldb + k];
        else
            memcpy(dst, B + k * ldb + n0, (size_t)w * sizeof *dst);
        if (w < panel)
            memset(dst + w, 0, (size_t)(panel - w) * sizeof *dst);
    }
}

void rt_pack_panels_into(float *dst, const float *B, int64_t K, int64_t N, int64_t ldb, int trans,
                         int64_t panel) {
    for (int64_t q = 0; q < (N + panel - 1) / panel; q++)
        pack_panel(dst + q * K * panel, B, K, N, ldb, trans, panel, q);
}

rt_packed_b *rt_pack_panels(const float *B, int64_t K, int64_t N, int64_t ldb, int trans,
                            int64_t panel) {
    if (K < 1 || N < 1 || panel < 1)
        return NULL;
    rt_packed_b *pb = calloc(1, sizeof *pb);
    size_t bytes = (size_t)((N + panel - 1) / panel * K * panel) * sizeof(float);
    float *p = pb ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    if (!p) {
        free(pb);
        return NULL;
    }
    rt_pack_panels_into(p, B, K, N, ldb, trans, panel);
    pb->p = p, pb->k = K, pb->n = N, pb->panel = panel, pb->bytes = bytes;
    return pb;
}

rt_packed_b *rt_gemm_pack(const float *B, int64_t K, int64_t N, int64_t ldb, int trans) {
    return rt_gemm_packed_usable() ? rt_pack_panels(B, K, N, ldb, trans, PANEL) : NULL;
}

void rt_gemm_packed_free(rt_packed_b *pb) {
    if (pb)
        free(pb->p);
    free(pb);
}

/* Splits t over the pool into groups of rows (at most ROWS: their chunk of A fits L2; at least
 * two tiles' worth where M allows) by groups of panels, taking the split whose slowest thread has
 * the least work (tasks in waves of one per thread) and, among those, the fewest tasks from two a
 * thread up (a spare task a thread lets a thread that gets a core first take more). Two threads
 * on 6 panels of 64 rows (Inception's 8 x 8 convolutions) ran 3 tasks of 2 panels: one thread
 * did twice the other's work. */
static void gemm_split(int64_t M, int64_t np, int64_t threads, int64_t *rows_per,
                       int64_t *panels_per) {
    /* at most TRIES more groups of rows than the fewest, and TRIES groups of panels: a product
     * call decides this every time, and more tasks than that buy no balance */
    enum { ROWS = RT_GEMM_ROWS, MIN_ROWS = 12, TRIES = 16 };
    int64_t want = 2 * threads, more = 4 * threads < TRIES ? 4 * threads : TRIES;
    int64_t rg_min = (M + ROWS - 1) / ROWS, rg_max = M / MIN_ROWS;
    rg_max = rg_max > rg_min + more ? rg_min + more : rg_max < rg_min ? rg_min : rg_max;
    int64_t pp[TRIES], n_pg[TRIES], n_pp = 0; /* the distinct panels a group, and groups */
    for (int64_t pg = 1; pg <= np && pg <= more; pg++) {
        int64_t q = (np + pg - 1) / pg;
        if (!n_pp || q != pp[n_pp - 1])
            pp[n_pp] = q, n_pg[n_pp++] = (np + q - 1) / q;
    }
    int64_t best_cost = INT64_MAX, best_tasks = 0;
    for (int64_t rg = rg_min, last = 0; rg <= rg_max; rg++) {
        int64_t rp = (M + rg - 1) / rg;
        if (rp == last)
            continue; /* the same groups as rg - 1 */
        last = rp;
        int64_t n_rg = (M + rp - 1) / rp;
        for (int64_t i = 0; i < n_pp; i++) {
            int64_t tasks = n_rg * n_pg[i], cost = (tasks + threads - 1) / threads * rp * pp[i];
            int better =
                cost < best_cost ||
                (cost == best_cost &&
                 (best_tasks < want ? tasks > best_tasks : tasks >= want && tasks < best_tasks));
            if (better)
                best_cost = cost, best_tasks = tasks, *rows_per = rp, *panels_per = pp[i];
        }
    }
}

static void gemm_run(rt_gemm_task t) {
    void (*piece)(void *, int64_t) = rt_simd()->gemm_piece;
    int64_t M = t.M, np = (t.N + PANEL - 1) / PANEL;
    int64_t rows_per = M, panels_per = np;
    if (M * t.N * t.K >= 65536)
        gemm_split(M, np, rt_pool_size(), &rows_per, &panels_per);
    t.n_rgroups = (M + rows_per - 1) / rows_per;
    t.rows_per = rows_per, t.panels_per = panels_per;
    int64_t pgroups = (np + panels_per - 1) / panels_per;
    if (t.n_rgroups * pgroups > 1)
        rt_parallel_for(t.n_rgroups * pgroups, piece, &t);
    else
        piece(&t, 0);
}

static void run_packed(const rt_packed_b *pb, int64_t M, const float *A, int64_t lda, int trans_a,
                       float *C, int64_t ldc, const rt_gemm_epi *epi) {
    gemm_run((rt_gemm_task){.B = pb->p,
                            .packed = 1,
                            .A = A,
                            .trans_a = trans_a,
                            .C = C,
                            .M = M,
                            .K = pb->k,
                            .N = pb->n,
                            .lda = lda,
                            .ldb = PANEL,
                            .ldc = ldc,
                            .epi = epi ? *epi : (rt_gemm_epi){.n_add = 0}});
}

void rt_gemm_packed(const rt_packed_b *pb, int64_t M, const float *A, int64_t lda, float *C,
                    int64_t ldc, const rt_gemm_epi *epi) {
    if (M >= 1 && rt_gemm_packed_usable())
        run_packed(pb, M, A, lda, 0, C, ldc, epi);
}

typedef struct pack_job {
    float *dst;
    const float *B;
    int64_t K, N, ldb;
} pack_job;
static void pack_task(void *ctx, int64_t q) {
    const pack_job *j = ctx;
    pack_panel(j->dst + q * j->K * PANEL, j->B, j->K, j->N, j->ldb, 0, PANEL, q);
}

int rt_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, int trans_a,
                const float *B, int64_t ldb, float *C, int64_t ldc, const rt_gemm_epi *epi) {
    if (!rt_gemm_packed_usable() || M < 1 || N < 1 || K < 1)
        return 1;
    /* B packed for this call, once, on the pool (its rows N floats apart: for N a multiple of 256
     * the rows of a chunk fall in a few L1 sets and the tiles read B from L2), from the caching
     * allocator, so a call in a loop reuses the block. With one group of rows (M <= RT_GEMM_ROWS)
     * B is read once anyway and the copy would triple its traffic (the seed CNN's dense layer,
     * 50 x 3136 x 1024: 4.5 -> 5.1 ms), so then, or without the memory, the tiles read B as it
     * lies. */
    int64_t np = (N + PANEL - 1) / PANEL;
    size_t bytes = (size_t)(np * K * PANEL) * sizeof(float);
    float *bp = M >= RT_PACK_ROWS ? rt_alloc(bytes) : NULL;
    if (bp) {
        pack_job j = {bp, B, K, N, ldb};
        if (np > 1 && K * N >= 65536)
            rt_parallel_for(np, pack_task, &j);
        else
            for (int64_t q = 0; q < np; q++)
                pack_task(&j, q);
        rt_packed_b pb = {.p = bp, .k = K, .n = N, .bytes = bytes};
        run_packed(&pb, M, A, lda, trans_a, C, ldc, epi);
        rt_free(bp, bytes);
        return 0;
    }
    gemm_run((rt_gemm_task){.B = B,
                            .A = A,
                            .trans_a = trans_a,
                            .C = C,
                            .M = M,
                            .K = K,
                            .N = N,
                            .lda = lda,
                            .ldb = ldb,
                            .ldc = ldc,
                            .epi = epi ? *epi : (rt_gemm_epi){.n_add = 0}});
    return 0;
}

int rt_gemm_f32_bt_takes(int64_t m, int64_t n, int64_t k) {
    return m <= RT_GEMM_ROWS && rt_gemm_f32_takes(n, m, k);
}

void rt_gemm_f32_bt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float *C) {
    /* C' [N][M] = B [N][K] · A' [K][M]: A' is the packed operand (its panels are A's rows, read
     * once), B is read once as it lies; OpenBLAS ran the seed CNN's dense input gradient (50 x
     * 3136 x 1024) at 55 GFLOP/s */
    int64_t np = (M + PANEL - 1) / PANEL;
    size_t pbytes = (size_t)(np * K * PANEL) * sizeof(float),
           tbytes = (size_t)(N * M) * sizeof(float);
    float *ap = rt_alloc(pbytes), *t = ap ? rt_alloc(tbytes) : NULL;
    if (!t || !rt_gemm_packed_usable()) {
        rt_free(t, tbytes);
        rt_free(ap, pbytes);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    s += A[m * lda + k] * B[n * ldb + k];
                C[m * N + n] = s;
            }
        return;
    }
    for (int64_t q = 0; q < np; q++)
        pack_panel(ap + q * K * PANEL, A, K, M, lda, 1, PANEL, q);
    rt_packed_b pb = {.p = ap, .k = K, .n = M, .panel = PANEL, .bytes = pbytes};
    run_packed(&pb, N, B, ldb, 0, t, M, NULL);
    /* C = C' transposed: the blocked copy on the pool that eager transposes use */
    tj_tensor ct = {.kind = RT_CONCRETE,
                    .dtype = TJ_F32,
                    .rank = 2,
                    .numel = M * N,
                    .dims = {N, M},
                    .data = t},
              c = ct;
    c.dims[0] = M, c.dims[1] = N, c.data = C;
    ir_node tr = {.op = IR_OP_TRANSPOSE, .dtype = TJ_F32, .rank = 2, .dims = {M, N}};
    (void)rt_k_copy_strided(&tr, &ct, 0, (const int64_t[]){1, M}, &c); /* f32: cannot fail */
    rt_free(t, tbytes);
    rt_free(ap, pbytes);
}
