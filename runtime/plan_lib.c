/* plan_lib.c — the plan's library steps (plan.h): RT_STEP_GEMM, a matrix product by OpenBLAS or
 * the packed f32 kernels followed by its epilogue kernel block by block while the product is in
 * cache (or a + bias / relu epilogue applied by the gemm tiles), and RT_STEP_CONV, an f32
 * convolution by bands of output rows on the direct kernels with its epilogue and a max pool per
 * band. plan.c's run loop calls them; the raw form (plan_raw.c) calls rt_plan_gemm and
 * rt_plan_conv on its own buffers. */
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/plan.h"
#include "runtime/rt_pool.h"

/* An output tensor on the caching allocator, uninitialised: the step writes every element. */
static tj_tensor *out_tensor(const ir_node *n) {
    return rt_tensor_alloc_uninit(n->dtype, n->rank, n->dims); /* NULL: the error is set */
}

void rt_mm_batch(const rt_mm *s, int64_t bi, int64_t *a_off, int64_t *b_off) {
    int64_t oa = 0, ob = 0;
    for (int d = s->rank - 1; d >= 0; d--) {
        int64_t idx = bi % s->dims[d];
        bi /= s->dims[d];
        oa += idx * s->sa[d];
        ob += idx * s->sb[d];
    }
    size_t es = ir_dtype_size(s->dt);
    *a_off = oa * s->m * s->k * (int64_t)es;
    *b_off = ob * s->k * s->n * (int64_t)es;
}

bool rt_mm_of(const ir_graph *g, uint32_t id, rt_mm *s) {
    const ir_node *n = ir_node_get(g, id);
    if (n->op != IR_OP_MATMUL || n->n_in != 2)
        return false;
    const uint32_t *in = ir_inputs(g, n);
    const ir_node *a = ir_node_get(g, in[0]), *b = ir_node_get(g, in[1]);
    int dt = n->dtype;
    if (a->dtype != dt || b->dtype != dt || !(ir_dtype_is_float(dt) || ir_dtype_is_index(dt)) ||
        a->rank < 1 || b->rank < 1 || ir_numel(n->rank, n->dims) < 0 ||
        ir_numel(a->rank, a->dims) < 0 || ir_numel(b->rank, b->dims) < 0)
        return false;
    memset(s, 0, sizeof *s);
    s->dt = dt;
    s->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    s->k = a->dims[a->rank - 1];
    s->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if ((b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0]) != s->k)
        return false;
    int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank >= 2 ? b->rank - 2 : 0;
    s->rank = ra > rb ? ra : rb;
    s->batches = 1;
    for (int d = 0; d < s->rank; d++) {
        int da = d - (s->rank - ra), db = d - (s->rank - rb);
        int64_t xa = da >= 0 ? a->dims[da] : 1, xb = db >= 0 ? b->dims[db] : 1;
        if (xa != xb && xa != 1 && xb != 1)
            return false;
        s->dims[d] = xa == 1 ? xb : xa;
        s->batches *= s->dims[d];
    }
    int64_t ma = 1, mb = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int da = d - (s->rank - ra), db = d - (s->rank - rb);
        int64_t xa = da >= 0 ? a->dims[da] : 1, xb = db >= 0 ? b->dims[db] : 1;
        s->sa[d] = xa == 1 ? 0 : ma;
        s->sb[d] = xb == 1 ? 0 : mb;
        ma *= xa;
        mb *= xb;
    }
    return s->batches * s->m * s->n == ir_numel(n->rank, n->dims);
}

/* ---- RT_STEP_GEMM ---------------------------------------------------------------------------- */
/* Rows of the product per gemm call when an epilogue follows: about 2 MiB of output, so the
 * epilogue reads it from cache; a multiple of what keeps the epilogue's units whole. 0: the
 * epilogue's units do not align with rows (it then runs once, after every gemm). */
static int64_t gemm_block_rows(const rt_step *s) {
    const rt_mm *mm = &s->mm;
    int64_t ul = s->units.unit_len, n = mm->n, step_rows = 1;
    if (!rt_step_has_epi(s))
        return mm->m;
    if (n % ul != 0) {
        if (ul % n != 0 || mm->m % (ul / n) != 0)
            return 0;
        step_rows = ul / n;
    }
    int64_t rows = ((int64_t)2 << 20) / (n * (int64_t)ir_dtype_size(mm->dt) + 1);
    rows = rows < 16 ? 16 : rows;
    rows = (rows + step_rows - 1) / step_rows * step_rows;
    return rows;
}

bool rt_plan_own_gemm(const rt_step *s) {
    const rt_mm *mm = &s->mm;
    if (s->kind != RT_STEP_GEMM || mm->dt != TJ_F32 || (s->trans[0] && s->trans[1]))
        return false;
    if (s->trans[1]) /* as C' = B · A' (rt_gemm_f32_bt), without an epilogue in the tiles */
        return !rt_step_has_epi(s) && rt_gemm_f32_bt_takes(mm->m, mm->n, mm->k);
    return rt_gemm_f32_takes(mm->m, mm->n, mm->k);
}

_Static_assert((int)RT_STEP_EPI_ADDS == (int)RT_GEMM_EPI_ADDS, "the tiles take every addend");

static bool same_dims(const ir_node *a, const ir_node *b) {
    return a->rank == b->rank && memcmp(a->dims, b->dims, sizeof a->dims[0] * a->rank) == 0;
}

void rt_plan_simple_epi(const ir_graph *g, rt_step *s) {
    s->epi_simple = s->epi_relu = s->epi_n_add = 0;
    if ((s->kind != RT_STEP_GEMM && s->kind != RT_STEP_CONV) || !rt_step_has_epi(s) || s->pool ||
        s->epi.n_out != 1 || !s->nodes || s->n_nodes < 2 || s->n_nodes > 2 + RT_STEP_EPI_ADDS ||
        (s->kind == RT_STEP_GEMM && s->mm.batches != 1))
        return;
    const ir_node *top = ir_node_get(g, s->id);
    if (top->dtype != TJ_F32 || top->rank < 1)
        return;
    int64_t n_cols = top->dims[top->rank - 1];
    uint32_t cur = s->id; /* the value the next node must read */
    int relu = 0, n_add = 0;
    for (uint32_t k = 1; k < s->n_nodes; k++) {
        const ir_node *n = ir_node_get(g, s->nodes[k]);
        const uint32_t *in = ir_inputs(g, n);
        if (relu || n->dtype != TJ_F32 || !same_dims(n, top))
            return;
        if (n->op == IR_OP_RELU && n->n_in == 1 && in[0] == cur) {
            relu = 1;
        } else if (n->op == IR_OP_ADD && n->n_in == 2 && (in[0] == cur) != (in[1] == cur) &&
                   n_add < RT_STEP_EPI_ADDS) {
            uint32_t b = in[0] == cur ? in[1] : in[0], at = s->epi.n_in;
            const ir_node *bn = ir_node_get(g, b);
            for (uint32_t j = 0; j < s->epi.n_in && b != s->id; j++) /* not the product itself */
                if (s->epi.in[j] == b)
                    at = j;
            bool row = bn->rank >= 1 && ir_numel(bn->rank, bn->dims) == n_cols &&
                       bn->dims[bn->rank - 1] == n_cols;
            if (at == s->epi.n_in || bn->dtype != TJ_F32 || (!row && !same_dims(bn, top)))
                return;
            s->epi_add[n_add] = at;
            s->epi_full[n_add++] = !row;
        } else {
            return;
        }
        cur = s->nodes[k];
    }
    if (cur != s->epi.out[0])
        return;
    s->epi_simple = 1, s->epi_relu = relu, s->epi_n_add = n_add;
}

/* The epilogue of step s for its tiles, reading bufs (its buffers; the output, `bytes` long in
 * rows of n_cols floats, at bufs[epi.n_in]; products over k): false when s's is not one
 * (rt_plan_simple_epi), or a full addend overlaps the output other than as the output itself
 * summed in one chunk of k (the tiles store partial sums in the output between chunks). */
static bool tiles_epi(const rt_step *s, void *const *bufs, int64_t n_cols, int64_t k, size_t bytes,
                      rt_gemm_epi *e) {
    if (!s->epi_simple)
        return false;
    const char *o = bufs[s->epi.n_in];
    memset(e, 0, sizeof *e);
    e->n_add = s->epi_n_add, e->relu = s->epi_relu, e->ld = n_cols;
    for (int i = 0; i < s->epi_n_add; i++) {
        const char *a = bufs[s->epi_add[i]];
        if (s->epi_full[i] && a < o + bytes && o < a + bytes &&
            !(a == o && rt_gemm_epi_in_place(k))) /* the residual itself, summed in one chunk */
            return false;
        e->add[i] = (const float *)a, e->full[i] = s->epi_full[i];
    }
    return true;
}

/* Step s's constant B ([K][N] with row length ldb, or stored [N][K] if trans), or its constant
 * filter when conv (a convolution's geometry) is given, packed at the first run and kept by the
 * step; NULL when s does not pack or packing failed. */
static const rt_packed_b *packed_b(rt_plan *p, const rt_step *s, const char *B, int64_t K,
                                   int64_t N, int64_t ldb, int trans, const rt_conv_geom *conv) {
    if (!s->packs)
        return NULL;
    rt_step *w = &p->steps[s - p->steps]; /* the plan's own step: its cache is mutable */
    rt_packed_b *pb = __atomic_load_n(&w->packed, __ATOMIC_ACQUIRE), *none = NULL;
    if (pb || __atomic_load_n(&w->no_pack, __ATOMIC_RELAXED))
        return pb;
    if (!(pb = conv ? rt_conv_direct_pack(conv, (const float *)B)
                    : rt_gemm_pack((const float *)B, K, N, ldb, trans))) {
        __atomic_store_n(&w->no_pack, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    if (!__atomic_compare_exchange_n(&w->packed, &none, pb, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) { /* another call packed it first */
        rt_gemm_packed_free(pb);
        pb = none;
    }
    return pb;
}

void rt_plan_gemm(rt_plan *p, const rt_step *s, const char *A, const char *B, char *C,
                  void *const *bufs) {
    const rt_mm *mm = &s->mm;
    const rt_packed_b *pb =
        packed_b(p, s, B, mm->k, mm->n, s->trans[1] ? mm->k : mm->n, s->trans[1], NULL);
    bool epi = rt_step_has_epi(s);
    size_t es = ir_dtype_size(mm->dt), bytes = (size_t)(mm->batches * mm->m * mm->n) * es;
    /* an epilogue of additions and relu applied by the tiles: the product goes to the
     * epilogue's output */
    rt_gemm_epi ge;
    const rt_gemm_epi *gep =
        (pb || rt_plan_own_gemm(s)) && tiles_epi(s, bufs, mm->n, mm->k, bytes, &ge) ? &ge : NULL;
    if (gep)
        C = (char *)bufs[s->epi.n_in];
    if (pb) { /* the product on the pool, then (unless the tiles did) the epilogue on the pool */
        rt_gemm_packed(pb, mm->m, (const float *)A, mm->k, (float *)C, mm->n, gep);
        if (epi && !gep)
            rt_plan_run_units(p, s->fn, &s->units, bufs);
        return;
    }
    int64_t rb = gemm_block_rows(s), m = mm->m, n = mm->n, k = mm->k;
    int64_t ul = s->units.unit_len ? s->units.unit_len : 1;
    /* f32: gemm_packed.c's kernels (A or B transposed, not both) */
    int own = rt_plan_own_gemm(s);
    if (k == 0)
        memset(C, 0, bytes);
    for (int64_t bi = 0; bi < mm->batches && m * n > 0; bi++) {
        int64_t ao, bo;
        rt_mm_batch(mm, bi, &ao, &bo);
        int64_t step_rows = rb > 0 ? rb : m;
        for (int64_t r0 = 0; r0 < m; r0 += step_rows) {
            int64_t r1 = r0 + step_rows < m ? r0 + step_rows : m;
            char *c = C + (size_t)((bi * m + r0) * n) * es;
            /* a transposed operand (s->trans) is stored [k, m] / [n, k]: rows of op(A) are its
             * columns */
            const char *a = A + ao + (size_t)(s->trans[0] ? r0 : r0 * k) * es, *b = B + bo;
            int lda = (int)(s->trans[0] ? m : k), ldb = (int)(s->trans[1] ? k : n);
            int ta = s->trans[0] ? 112 : 111, tb = s->trans[1] ? 112 : 111;
            if (own && s->trans[1]) {
                rt_gemm_f32_bt(r1 - r0, n, k, (const float *)a, lda, (const float *)b, ldb,
                               (float *)c);
                continue;
            }
            if (own) { /* the packed kernels, then the epilogue of the block on the pool */
                rt_gemm_epi be = gep ? *gep : (rt_gemm_epi){.n_add = 0};
                for (int i = 0; i < be.n_add; i++) /* a residual from the block's first row */
                    be.add[i] += be.full[i] ? r0 * n : 0;
                rt_gemm_f32(r1 - r0, n, k, (const float *)a, lda, s->trans[0], (const float *)b, n,
                            (float *)c, n, gep ? &be : NULL);
                if (epi && rb > 0 && !gep)
                    rt_plan_run_range(p, s->fn, &s->units, bufs, (bi * m + r0) * n / ul,
                                      (r1 - r0) * n / ul);
                continue;
            }
            if (k > 0 && mm->dt == TJ_F32)
                s->blas->sgemm(101, ta, tb, (int)(r1 - r0), (int)n, (int)k, 1.0f, (const float *)a,
                               lda, (const float *)b, ldb, 0.0f, (float *)c, (int)n);
            else if (k > 0)
                s->blas->dgemm(101, ta, tb, (int)(r1 - r0), (int)n, (int)k, 1.0, (const double *)a,
                               lda, (const double *)b, ldb, 0.0, (double *)c, (int)n);
            /* the epilogue on this thread while the block is in cache; OpenBLAS's threads are
             * idle (spinning) meanwhile, so the pool would only compete with them */
            if (epi && rb > 0)
                s->fn(bufs, (bi * m + r0) * n / ul, (bi * m + r1) * n / ul);
        }
    }
    if (epi && rb == 0 && !gep)
        rt_plan_run_units(p, s->fn, &s->units, bufs);
}

size_t rt_plan_gemm_bytes(const rt_step *s) {
    return (size_t)(s->mm.batches * s->mm.m * s->mm.n) * ir_dtype_size(s->mm.dt);
}

tj_status rt_plan_run_gemm(rt_plan *p, const rt_step *s, tj_tensor **vals, void **bufs) {
    const ir_graph *g = p->base.g;
    size_t bytes = rt_plan_gemm_bytes(s);
    char *C;
    void *tmp = NULL;
    if (rt_step_has_epi(s)) {
        if (!(C = tmp = rt_alloc(bytes)))
            return ir_errorf(TJ_ERR_OOM, "%s: out of memory for matmul %%%u", p->who, s->id);
        for (uint32_t k = 0; k < s->epi.n_in; k++)
            bufs[k] = s->epi.in[k] == s->id ? (void *)C : vals[s->epi.in[k]]->data;
        for (uint32_t k = 0; k < s->epi.n_out; k++) {
            tj_tensor *t = out_tensor(ir_node_get(g, s->epi.out[k]));
            if (!t) {
                rt_free(tmp, bytes);
                return TJ_ERR_OOM;
            }
            vals[s->epi.out[k]] = t;
            bufs[s->epi.n_in + k] = t->data;
        }
        bufs[s->epi.n_in + s->epi.n_out] = s->geom;
    } else {
        tj_tensor *t = out_tensor(ir_node_get(g, s->id));
        if (!t)
            return TJ_ERR_OOM;
        vals[s->id] = t;
        C = t->data;
    }
    rt_plan_gemm(p, s, vals[s->src[0]]->data, vals[s->src[1]]->data, C, bufs);
    if (tmp)
        rt_free(tmp, bytes);
    return TJ_OK;
}

/* ---- RT_STEP_CONV ---------------------------------------------------------------------------- */
void rt_plan_conv_geoms(const ir_graph *g, uint32_t id, uint32_t pool_id, rt_conv_geom *cg,
                        rt_conv_geom *pg) {
    const ir_node *n = ir_node_get(g, id);
    *cg = rt_conv_geom_of(n, ir_node_get(g, ir_inputs(g, n)[0])->dims,
                          ir_node_get(g, ir_inputs(g, n)[1])->dims, n->dims);
    if (pool_id != IR_NONE)
        *pg = rt_pool_geom_of(ir_node_get(g, pool_id), n->dims, ir_node_get(g, pool_id)->dims);
}

typedef struct conv_ctx {
    const rt_step *s;
    void *const *bufs;
    uint32_t n_bufs, ci, eo; /* the convolution's index in bufs; the pooled output's (or n_bufs) */
    int64_t oh, row, ul;     /* output rows per image, elements per row, per epilogue unit */
    rt_conv_geom pg;
    float *pool_out;
} conv_ctx;

static void conv_band(void *ctx, int64_t b, int64_t r0, int64_t nr, float *buf) {
    const conv_ctx *c = ctx;
    int64_t t0 = b * c->oh + r0;
    if (rt_step_has_epi(
            c->s)) { /* the kernel indexes whole tensors: the band's rows sit at their offset */
        void *lb[RT_PLAN_CONV_MAX_BUFS + 1]; /* and a shape-generic epilogue's geometry */
        memcpy(lb, c->bufs, (c->n_bufs + 1) * sizeof *lb);
        void *at = (void *)((uintptr_t)buf - (uintptr_t)(t0 * c->row) * sizeof(float));
        lb[c->ci] = at;
        if (c->eo < c->n_bufs)
            lb[c->eo] = at; /* elementwise, in place */
        c->s->fn(lb, t0 * c->row / c->ul, (t0 + nr) * c->row / c->ul);
    }
    if (c->pool_out)
        rt_max_pool_band(&c->pg, buf, nr,
                         c->pool_out + (b * c->pg.oh + r0 / c->pg.sh) * c->pg.ow * c->pg.c);
}

/* Step s's constant filter w packed once for the route g runs on (rt_conv_direct_pack); NULL
 * when s does not pack, or where the direct kernels' own packing costs little beside the
 * convolution: it copies the filter once a call for 2·pixels multiply-adds a weight, about
 * 60/pixels of the call here, so from PACK_ONCE_PIXELS output pixels a kept copy (ResNet-50's
 * 3x3 filters at batch 32: 45 MB more at its peak) would buy under 2%. */
enum { PACK_ONCE_PIXELS = 3072 };
static const rt_packed_b *conv_filter(rt_plan *p, const rt_step *s, const rt_conv_geom *g,
                                      const void *w) {
    if (!rt_conv_direct_as_product(g) && g->n * g->oh * g->ow > PACK_ONCE_PIXELS)
        return NULL;
    return packed_b(p, s, w, 0, 0, 0, 0, g);
}

/* Step s's convolution (geometry cg) into y: with the direct kernels allowed, on those kernels
 * (a constant filter packed once by the step); else (or when they decline) the reference
 * kernel. */
static tj_status conv_into(rt_plan *p, const rt_step *s, const rt_conv_geom *cg, bool direct,
                           const void *x, const void *w, void *y) {
    const ir_graph *g = p->base.g;
    if (direct && rt_conv_direct_fwd(cg, x, w, conv_filter(p, s, cg, w), y) == 0)
        return TJ_OK;
    tj_tensor h[3], *hp[2] = {&h[0], &h[1]};
    rt_plan_header(&h[0], ir_node_get(g, s->src[0]), (void *)x);
    rt_plan_header(&h[1], ir_node_get(g, s->src[1]), (void *)w);
    rt_plan_header(&h[2], ir_node_get(g, s->id), y);
    return rt_ref_kernel(ir_node_get(g, s->id), hp, &h[2]);
}

/* Without the direct kernels (exact math, TJ_NO_DIRECT_CONV, no memory), with epilogue units
 * across rows, or on the product route: the convolution (conv_into), then the whole epilogue and
 * the pool. */
static tj_status conv_unfused(rt_plan *p, const rt_step *s, const void *x, const void *w,
                              void **bufs, const conv_ctx *c, const rt_conv_geom *cg, bool direct) {
    const ir_graph *g = p->base.g;
    const ir_node *n = ir_node_get(g, s->id);
    size_t bytes = (size_t)ir_numel(n->rank, n->dims) * sizeof(float);
    void *tmp = rt_alloc(bytes);
    if (!tmp)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory for conv2d %%%u", p->who, s->id);
    tj_status st = conv_into(p, s, cg, direct, x, w, tmp);
    if (!st && rt_step_has_epi(s)) {
        bufs[c->ci] = tmp;
        if (c->eo < c->n_bufs)
            bufs[c->eo] = tmp;
        rt_plan_run_units(p, s->fn, &s->units, bufs);
    }
    if (!st && s->pool) {
        const ir_node *pn = ir_node_get(g, s->pool - 1);
        tj_tensor h[2], *hp = &h[0];
        rt_plan_header(&h[0], ir_node_get(g, ir_inputs(g, pn)[0]), tmp);
        rt_plan_header(&h[1], pn, c->pool_out);
        st = rt_ref_kernel(pn, &hp, &h[1]);
    }
    rt_free(tmp, bytes);
    return st;
}

tj_status rt_plan_conv(rt_plan *p, const rt_step *s, const void *x, const void *w, void **bufs,
                       void *pool_out) {
    const ir_graph *g = p->base.g;
    const rt_config *cfg = rt_config_get();
    bool direct = !cfg->exact_math && !cfg->no_direct_conv;
    rt_conv_geom cg;
    if (!rt_step_has_epi(s) && !s->pool) { /* alone: bufs[0] is the convolution's output */
        rt_plan_conv_geoms(g, s->id, IR_NONE, &cg, &(rt_conv_geom){0});
        return conv_into(p, s, &cg, direct, x, w, bufs[0]);
    }
    conv_ctx c = {s, bufs, 0, 0, 0, 0, 0, 1, {0}, pool_out};
    rt_plan_conv_geoms(g, s->id, s->pool ? s->pool - 1 : IR_NONE, &cg, &c.pg);
    c.oh = cg.oh, c.row = cg.ow * cg.o, c.ul = s->units.unit_len > 0 ? s->units.unit_len : 1;
    if (rt_step_has_epi(s)) {
        c.n_bufs = c.eo = s->epi.n_in + s->epi.n_out;
        for (uint32_t k = 0; k < s->epi.n_in; k++)
            if (s->epi.in[k] == s->id)
                c.ci = k;
        if (s->pool)
            c.eo = s->epi.n_in; /* its one output, which the pool reads */
    }
    /* on the product route an epilogue of additions and relu runs in the product's tiles, into
     * the epilogue's output: no temporary for the convolution's output (no faster here: the
     * residual's reads cost in the tiles what the separate pass cost; bench/RESULTS.md) */
    rt_gemm_epi ge;
    if (direct && !s->pool && rt_conv_direct_as_product(&cg) &&
        tiles_epi(s, bufs, cg.o, cg.kh * cg.kw * cg.c,
                  (size_t)(cg.n * cg.oh * c.row) * sizeof(float), &ge) &&
        rt_conv_direct_product(&cg, x, w, conv_filter(p, s, &cg, w), &ge, bufs[s->epi.n_in]) == 0)
        return TJ_OK;
    int64_t band = s->pool ? c.pg.kh : RT_CONV_BAND_FLOATS / c.row;
    int64_t used = s->pool ? (c.pg.oh * c.pg.kh < cg.oh ? c.pg.oh * c.pg.kh : cg.oh) : cg.oh;
    if (direct && c.row % c.ul == 0 &&
        rt_conv_direct_fwd_bands(&cg, x, w, conv_filter(p, s, &cg, w), band, used, conv_band, &c) ==
            0)
        return TJ_OK;
    /* the product route reads a constant filter packed once, in panels it streams (a model's
     * weights come from memory on every call: ResNet-50's 100 MB at batch 1) */
    return conv_unfused(p, s, x, w, bufs, &c, &cg, direct);
}

/* An input of the epilogue's one output's shape that dies at step `at` (a residual block's
 * input), whose buffer the output may take: the epilogue reads each element before it writes it
 * (elementwise by bands or after the convolution, or in the product's tiles over one chunk of
 * K); NULL where none may. The fresh 3.2 MB output of ResNet's 56 x 56 expansions cost a read
 * for ownership of every line beside the residual's read. */
static tj_tensor *conv_out_over(rt_plan *p, const rt_step *s, tj_tensor *const *vals, uint32_t at,
                                uint32_t keep) {
    const ir_graph *g = p->base.g;
    if (s->pool || s->epi.n_out != 1)
        return NULL;
    rt_conv_geom cg;
    rt_plan_conv_geoms(g, s->id, IR_NONE, &cg, &(rt_conv_geom){0});
    const rt_config *cfg = rt_config_get();
    if (!cfg->exact_math && !cfg->no_direct_conv && rt_conv_direct_as_product(&cg) &&
        !rt_gemm_epi_in_place(cg.kh * cg.kw * cg.c))
        return NULL; /* the tiles store partial sums in the output before the last chunk */
    const ir_node *o = ir_node_get(g, s->epi.out[0]);
    for (uint32_t k = 0; k < s->epi.n_in; k++) {
        tj_tensor *t =
            s->epi.in[k] == s->id ? NULL : rt_plan_dying(p, s->epi.in[k], at, keep, vals, o);
        if (t)
            return t;
    }
    return NULL;
}

tj_status rt_plan_run_conv(rt_plan *p, const rt_step *s, tj_tensor **vals, void **bufs, uint32_t at,
                           uint32_t keep) {
    const ir_graph *g = p->base.g;
    tj_tensor *pooled = NULL;
    if (s->pool && !(vals[s->pool - 1] = pooled = out_tensor(ir_node_get(g, s->pool - 1))))
        return TJ_ERR_OOM;
    for (uint32_t k = 0; k < s->epi.n_in; k++)
        bufs[k] = s->epi.in[k] == s->id ? NULL : vals[s->epi.in[k]]->data;
    tj_tensor *over = conv_out_over(p, s, vals, at, keep);
    for (uint32_t k = 0; !s->pool && k < s->epi.n_out; k++) {
        tj_tensor *t = over ? rt_retain(over) : out_tensor(ir_node_get(g, s->epi.out[k]));
        if (!t)
            return TJ_ERR_OOM;
        vals[s->epi.out[k]] = t;
        bufs[s->epi.n_in + k] = t->data;
    }
    if (rt_step_has_epi(s))
        bufs[s->epi.n_in + s->epi.n_out] = s->geom; /* a shape-generic epilogue's */
    if (!rt_step_has_epi(s) && !s->pool) {          /* alone: the convolution's own output */
        if (!(vals[s->id] = out_tensor(ir_node_get(g, s->id))))
            return TJ_ERR_OOM;
        bufs[0] = vals[s->id]->data;
    }
    return rt_plan_conv(p, s, vals[s->src[0]]->data, vals[s->src[1]]->data, bufs,
                        pooled ? pooled->data : NULL);
}

/* ---- what a library step may be: the plan's and an image's checks ------------------------------
 */
bool rt_plan_gemm_matches(const ir_graph *g, const rt_step *s) {
    const ir_node *n = ir_node_get(g, s->id);
    rt_mm mm;
    if (n->op != IR_OP_MATMUL || !rt_mm_of(g, s->id, &mm) || (mm.dt != TJ_F32 && mm.dt != TJ_F64))
        return false;
    for (int k = 0; k < 2; k++) {
        uint32_t in = ir_inputs(g, n)[k];
        const ir_node *t = ir_node_get(g, in);
        if (s->trans[k] > 1 || (s->trans[k] == 0 && s->src[k] != in) ||
            (s->trans[k] == 1 && (t->op != IR_OP_TRANSPOSE || t->rank != 2 || t->a.n_list != 2 ||
                                  t->a.list[0] != 1 || s->src[k] != ir_inputs(g, t)[0])))
            return false;
    }
    return true;
}

bool rt_plan_conv_usable(const ir_graph *g, uint32_t id, uint32_t pool_id, uint32_t epi_in,
                         uint32_t epi_out) {
    const ir_node *n = ir_node_get(g, id);
    bool epi = epi_in + epi_out > 0;
    if (n->op != IR_OP_CONV2D || n->n_in != 2 || n->dtype != TJ_F32 || n->rank != 4 ||
        ir_node_get(g, ir_inputs(g, n)[0])->dtype != TJ_F32 ||
        ir_node_get(g, ir_inputs(g, n)[1])->dtype != TJ_F32 ||
        epi_in + epi_out > RT_PLAN_CONV_MAX_BUFS)
        return false;
    rt_conv_geom cg, pg;
    rt_plan_conv_geoms(g, id, pool_id, &cg, &pg);
    /* rows larger than a band (ResNet's 1x1 expansions: 56 x 256) run whole, then the epilogue
     * (rt_plan_conv), reading a constant filter packed on the product route */
    if (!rt_conv_direct_usable(&cg) || cg.n * cg.oh == 0)
        return false;
    if (pool_id == IR_NONE)
        return true;
    if (cg.ow * cg.o > RT_CONV_BAND_FLOATS)
        return false;
    const ir_node *p = ir_node_get(g, pool_id);
    /* a band of kh rows is exactly one pooled row: windows that tile the rows from the top */
    return p->op == IR_OP_MAX_POOL2D && pg.dh == 1 && pg.dw == 1 && p->dtype == TJ_F32 &&
           (!epi || epi_out == 1) && pg.kh == pg.sh && pg.pt == 0 && pg.oh >= 1 && pg.ow >= 1 &&
           pg.kh * cg.ow * cg.o <= RT_CONV_BAND_FLOATS;
}

bool rt_plan_conv_matches(const ir_graph *g, const rt_step *s) {
    const ir_node *n = ir_node_get(g, s->id);
    if (n->op != IR_OP_CONV2D || n->n_in != 2 || s->src[0] != ir_inputs(g, n)[0] ||
        s->src[1] != ir_inputs(g, n)[1])
        return false;
    bool epi = rt_step_has_epi(s), reads = !epi;
    for (uint32_t k = 0; epi && k < s->epi.n_in; k++)
        reads = reads || s->epi.in[k] == s->id;
    if (!reads || (epi && s->epi.n_out == 0))
        return false;
    uint32_t pool = s->pool ? s->pool - 1 : IR_NONE;
    if (pool != IR_NONE) {
        const ir_node *p = ir_node_get(g, pool);
        if (p->op != IR_OP_MAX_POOL2D || p->n_in != 1 ||
            ir_inputs(g, p)[0] != (epi ? s->epi.out[0] : s->id))
            return false;
    }
    return rt_plan_conv_usable(g, s->id, pool, s->epi.n_in, s->epi.n_out);
}
