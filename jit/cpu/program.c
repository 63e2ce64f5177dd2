/* program.c — running the CPU backend's program (rt_program_vt); plan.c builds its steps. Steps
 * run in order: generated kernels (elementwise and reduce groups, matmuls, softmaxes, chains of
 * small ones) split across the runtime's thread pool when large; OpenBLAS products followed by
 * their fused epilogue block by block; every other node as the interpreter runs it (reference
 * kernels; CONST, PARAM, VAR_READ, ASSIGN, PRINT and HOST_CALLBACK as in runtime/interp.c). A
 * value is released after its last reader. Only concrete shapes are compiled: a graph with
 * unknown dims is refused with TJ_ERR_UNSUPPORTED (the caller interprets it). */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/program.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/rt_pool.h"

rt_program *jit_cpu_compile(const ir_graph *g) {
    return jit_cpu_compile_opts(g, NULL);
}

static const rt_program_vt cpu_vt;

bool jit_cpu_is_program(const rt_program *p) {
    return p && p->vt == &cpu_vt;
}

const pass_partition *jit_cpu_program_partition(const rt_program *p) {
    return jit_cpu_is_program(p) ? ((const cpu_prog *)p)->part : NULL;
}

/* ---- running --------------------------------------------------------------------------------- */
typedef struct par_ctx {
    jit_cpu_kernel_fn fn;
    void *const *bufs;
    int64_t u0, n_units, chunk;
} par_ctx;

static void par_task(void *ctx, int64_t i) {
    par_ctx *c = ctx;
    int64_t b = i * c->chunk, e = b + c->chunk < c->n_units ? b + c->chunk : c->n_units;
    if (b < e)
        c->fn(c->bufs, c->u0 + b, c->u0 + e);
}

/* An output tensor on the caching allocator, uninitialised: the kernel writes every element. */
static tj_tensor *out_tensor(const ir_node *n) {
    return rt_tensor_alloc_uninit(n->dtype, n->rank, n->dims); /* NULL: the error is set */
}

/* Runs fn over units [u0, u0 + units), split across the pool when the work is large. */
static void run_unit_range(cpu_prog *cp, jit_cpu_kernel_fn fn, const jit_cpu_ew_plan *plan,
                           void *const *bufs, int64_t u0, int64_t units) {
    if (units <= 0)
        return;
    int threads = units * plan->unit_len >= cp->par_min ? rt_pool_size() : 1;
    if (threads <= 1 || units < 2) {
        fn(bufs, u0, u0 + units);
        return;
    }
    int64_t n_tasks = (int64_t)threads * 4 < units ? (int64_t)threads * 4 : units;
    int64_t chunk = (units + n_tasks - 1) / n_tasks;
    if (plan->unit_len == 1)
        chunk = (chunk + 63) & ~(int64_t)63; /* whole cache lines */
    par_ctx c = {fn, bufs, u0, units, chunk};
    rt_parallel_for((units + chunk - 1) / chunk, par_task, &c);
}

void jit_cpu_run_units(cpu_prog *cp, jit_cpu_kernel_fn fn, const jit_cpu_ew_plan *plan,
                       void *const *bufs) {
    run_unit_range(cp, fn, plan, bufs, 0, plan->n_units);
}

/* A caller tensor (tj_call_into) that can take node id's values directly: same dtype and dims,
 * and not aliasing an argument (a kernel must not write what it is still reading). */
static tj_tensor *bound_output(const cpu_prog *cp, uint32_t id, tj_tensor *const *outs,
                               tj_tensor *const *args, uint32_t n_args) {
    int32_t k = cp->out_slot[id];
    tj_tensor *t = k >= 0 && outs ? outs[k] : NULL;
    const ir_node *n = ir_node_get(cp->base.g, id);
    if (!t || t->kind != RT_CONCRETE || t->dtype != n->dtype || t->rank != n->rank ||
        memcmp(t->dims, n->dims, n->rank * sizeof(int64_t)) != 0)
        return NULL;
    for (uint32_t a = 0; a < n_args; a++)
        if (args[a]->data == t->data)
            return NULL;
    return t;
}

static tj_status run_gen(cpu_prog *cp, const step *s, tj_tensor **vals, void **bufs,
                         tj_tensor *const *outs, tj_tensor *const *args, uint32_t n_args) {
    const ir_graph *g = cp->base.g;
    for (uint32_t k = 0; k < s->n_in; k++)
        bufs[k] = vals[s->in[k]]->data;
    for (uint32_t k = 0; k < s->n_out; k++) {
        tj_tensor *t = bound_output(cp, s->out[k], outs, args, n_args);
        t = t ? rt_retain(t) : out_tensor(ir_node_get(g, s->out[k]));
        if (!t)
            return TJ_ERR_OOM;
        vals[s->out[k]] = t;
        bufs[s->n_in + k] = t->data;
    }
    jit_cpu_run_units(cp, s->fn, &s->plan, bufs);
    return TJ_OK;
}

/* Rows of the product per gemm call when an epilogue follows: about 2 MiB of output, so the
 * epilogue reads it from cache; a multiple of what keeps the epilogue's units whole. 0: the
 * epilogue's units do not align with rows (it then runs once, after every gemm). */
static int64_t blas_block_rows(const step *s) {
    const jit_cpu_mm *mm = &s->mm;
    int64_t ul = s->plan.unit_len, n = mm->n, step_rows = 1;
    if (!s->epi)
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

/* f32 without transposed operands: gemm_packed.c's kernels on B as it lies, not OpenBLAS */
static bool own_gemm(const step *s) {
    return s->kind == STEP_BLAS && s->mm.dt == TJ_F32 && !s->trans[0] && !s->trans[1] &&
           rt_gemm_f32_takes(s->mm.m, s->mm.n, s->mm.k);
}

/* The constant right operand of product s packed, at its first run (f32, one batch, A not
 * transposed, M small enough that not packing A costs little); NULL: OpenBLAS runs it. */
static bool packable(const cpu_prog *cp, const step *s) {
    const jit_cpu_mm *mm = &s->mm;
    return s->kind == STEP_BLAS && mm->dt == TJ_F32 && mm->batches == 1 && !s->trans[0] &&
           mm->k >= 1 && mm->m <= 4096 && ir_node_get(cp->base.g, s->src[1])->op == IR_OP_CONST &&
           rt_gemm_packed_usable();
}

static const rt_packed_b *packed_b(cpu_prog *cp, const step *s, const char *B) {
    const jit_cpu_mm *mm = &s->mm;
    if (!s->packs)
        return NULL;
    step *w = &cp->steps[s - cp->steps]; /* the program's own step: its cache is mutable */
    rt_packed_b *pb = __atomic_load_n(&w->packed, __ATOMIC_ACQUIRE), *none = NULL;
    if (pb || __atomic_load_n(&w->no_pack, __ATOMIC_RELAXED))
        return pb;
    if (!(pb = rt_gemm_pack((const float *)B, mm->k, mm->n, s->trans[1] ? mm->k : mm->n,
                            s->trans[1]))) {
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

/* Whether product s's epilogue is `+ bias[col]` and/or relu writing one output, which the
 * gemm tiles apply in registers (rt_gemm_epi): *bias_in is the bias's index among the group's
 * buffers (-1: none). The product is [M, N], the bias f32 of N elements along the last axis. */
static bool simple_epilogue(const cpu_prog *cp, const step *s, int32_t *bias_in, int *relu) {
    const ir_graph *g = cp->base.g;
    const pass_group *gr = s->epi;
    if (!gr || gr->n_outputs != 1 || gr->n_nodes < 1 || gr->n_nodes > 2 || s->mm.dt != TJ_F32 ||
        s->mm.batches != 1 || gr->outputs[0] != gr->nodes[gr->n_nodes - 1])
        return false;
    *bias_in = -1, *relu = 0;
    uint32_t cur = s->id; /* the value the next node must read */
    for (uint32_t k = 0; k < gr->n_nodes; k++) {
        const ir_node *n = ir_node_get(g, gr->nodes[k]);
        const uint32_t *in = ir_inputs(g, n);
        if (n->dtype != TJ_F32)
            return false;
        if (n->op == IR_OP_RELU && n->n_in == 1 && in[0] == cur && !*relu) {
            *relu = 1;
        } else if (n->op == IR_OP_ADD && n->n_in == 2 && k == 0 && (in[0] == cur || in[1] == cur) &&
                   in[0] != in[1]) {
            const ir_node *b = ir_node_get(g, in[0] == cur ? in[1] : in[0]);
            if (b->dtype != TJ_F32 || b->rank < 1 || ir_numel(b->rank, b->dims) != s->mm.n ||
                b->dims[b->rank - 1] != s->mm.n)
                return false;
            for (uint32_t j = 0; j < gr->n_inputs; j++)
                if (gr->inputs[j] == (in[0] == cur ? in[1] : in[0]))
                    *bias_in = (int32_t)j;
            if (*bias_in < 0)
                return false;
        } else {
            return false;
        }
        cur = gr->nodes[k];
    }
    return true;
}

void jit_cpu_blas_run(cpu_prog *cp, const step *s, const char *A, const char *B, char *C,
                      void *const *bufs) {
    const jit_cpu_mm *mm = &s->mm;
    const rt_packed_b *pb = packed_b(cp, s, B);
    /* a bias/relu epilogue applied by the tiles: the product goes to the group's output */
    rt_gemm_epi ge = {s->epi_bias >= 0 ? (const float *)bufs[s->epi_bias] : NULL, s->epi_relu};
    const rt_gemm_epi *gep = s->epi_simple && (pb || own_gemm(s)) ? &ge : NULL;
    if (gep)
        C = (char *)bufs[s->epi->n_inputs];
    if (pb) { /* the product on the pool, then (unless the tiles did) the epilogue on the pool */
        rt_gemm_packed(pb, mm->m, (const float *)A, mm->k, (float *)C, mm->n, gep);
        if (s->epi && !gep)
            jit_cpu_run_units(cp, s->fn, &s->plan, bufs);
        return;
    }
    size_t es = ir_dtype_size(mm->dt), bytes = (size_t)(mm->batches * mm->m * mm->n) * es;
    int64_t rb = blas_block_rows(s), m = mm->m, n = mm->n, k = mm->k;
    int64_t ul = s->plan.unit_len ? s->plan.unit_len : 1;
    /* f32 without transposed operands: gemm_packed.c's kernels on B as it lies */
    int own = own_gemm(s);
    if (k == 0)
        memset(C, 0, bytes);
    for (int64_t bi = 0; bi < mm->batches && m * n > 0; bi++) {
        int64_t ao, bo;
        jit_cpu_mm_batch(mm, bi, &ao, &bo);
        int64_t step_rows = rb > 0 ? rb : m;
        for (int64_t r0 = 0; r0 < m; r0 += step_rows) {
            int64_t r1 = r0 + step_rows < m ? r0 + step_rows : m;
            char *c = C + (size_t)((bi * m + r0) * n) * es;
            /* a transposed operand (s->trans) is stored [k, m] / [n, k]: rows of op(A) are its
             * columns */
            const char *a = A + ao + (size_t)(s->trans[0] ? r0 : r0 * k) * es, *b = B + bo;
            int lda = (int)(s->trans[0] ? m : k), ldb = (int)(s->trans[1] ? k : n);
            int ta = s->trans[0] ? 112 : 111, tb = s->trans[1] ? 112 : 111;
            if (own) { /* the AVX-512 kernels, then the epilogue of the block on the pool */
                rt_gemm_f32(r1 - r0, n, k, (const float *)a, k, (const float *)b, n, (float *)c, n,
                            gep);
                if (s->epi && rb > 0 && !gep)
                    run_unit_range(cp, s->fn, &s->plan, bufs, (bi * m + r0) * n / ul,
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
            if (s->epi && rb > 0)
                s->fn(bufs, (bi * m + r0) * n / ul, (bi * m + r1) * n / ul);
        }
    }
    if (s->epi && rb == 0 && !gep)
        jit_cpu_run_units(cp, s->fn, &s->plan, bufs);
}

static tj_status run_blas(cpu_prog *cp, const step *s, tj_tensor **vals, void **bufs) {
    const ir_graph *g = cp->base.g;
    const ir_node *mn = ir_node_get(g, s->id);
    size_t bytes = jit_cpu_blas_bytes(s);
    char *C;
    void *tmp = NULL;
    if (s->epi) {
        if (!(C = tmp = rt_alloc(bytes)))
            return ir_errorf(TJ_ERR_OOM, "cpu program: out of memory for matmul %%%u", s->id);
        const pass_group *gr = s->epi;
        for (uint32_t k = 0; k < gr->n_inputs; k++)
            bufs[k] = gr->inputs[k] == s->id ? (void *)C : vals[gr->inputs[k]]->data;
        for (uint32_t k = 0; k < gr->n_outputs; k++) {
            tj_tensor *t = out_tensor(ir_node_get(g, gr->outputs[k]));
            if (!t) {
                rt_free(tmp, bytes);
                return TJ_ERR_OOM;
            }
            vals[gr->outputs[k]] = t;
            bufs[gr->n_inputs + k] = t->data;
        }
    } else {
        tj_tensor *t = out_tensor(mn);
        if (!t)
            return TJ_ERR_OOM;
        vals[s->id] = t;
        C = t->data;
    }
    jit_cpu_blas_run(cp, s, vals[s->src[0]]->data, vals[s->src[1]]->data, C, bufs);
    if (tmp)
        rt_free(tmp, bytes);
    return TJ_OK;
}

size_t jit_cpu_blas_bytes(const step *s) {
    return (size_t)(s->mm.batches * s->mm.m * s->mm.n) * ir_dtype_size(s->mm.dt);
}

/* ---- STEP_CONV ------------------------------------------------------------------------------ */
enum { CONV_MAX_BUFS = 16 }; /* the epilogue's buffers, copied per band */

/* the convolution's geometry and, when pool_id is a node, the pool's (conv.c's) */
static void conv_geoms(const ir_graph *g, uint32_t id, uint32_t pool_id, rt_conv_geom *cg,
                       rt_conv_geom *pg) {
    const ir_node *n = ir_node_get(g, id);
    *cg = rt_conv_geom_of(n, ir_node_get(g, ir_inputs(g, n)[0])->dims,
                          ir_node_get(g, ir_inputs(g, n)[1])->dims, n->dims);
    if (pool_id != IR_NONE)
        *pg = rt_pool_geom_of(ir_node_get(g, pool_id), n->dims, ir_node_get(g, pool_id)->dims);
}

bool jit_cpu_conv_fusable(const ir_graph *g, uint32_t id, const pass_group *epi, uint32_t pool_id) {
    const ir_node *n = ir_node_get(g, id);
    if (n->op != IR_OP_CONV2D || n->dtype != TJ_F32 || n->rank != 4 ||
        ir_node_get(g, ir_inputs(g, n)[0])->dtype != TJ_F32 ||
        ir_node_get(g, ir_inputs(g, n)[1])->dtype != TJ_F32 || (!epi && pool_id == IR_NONE))
        return false;
    rt_conv_geom cg, pg;
    conv_geoms(g, id, pool_id, &cg, &pg);
    if (!rt_conv_direct_usable(&cg) || cg.ow * cg.o > RT_CONV_BAND_FLOATS || cg.n * cg.oh == 0)
        return false;
    if (epi && (epi->n_inputs + epi->n_outputs > CONV_MAX_BUFS || epi->rank != 4 ||
                memcmp(epi->dims, n->dims, sizeof n->dims[0] * 4) != 0))
        return false;
    if (pool_id == IR_NONE)
        return true;
    const ir_node *p = ir_node_get(g, pool_id);
    /* a band of kh rows is exactly one pooled row: windows that tile the rows from the top */
    return p->op == IR_OP_MAX_POOL2D && pg.dh == 1 && pg.dw == 1 && p->dtype == TJ_F32 &&
           (!epi || epi->n_outputs == 1) && pg.kh == pg.sh && pg.pt == 0 && pg.oh >= 1 &&
           pg.ow >= 1 && pg.kh * cg.ow * cg.o <= RT_CONV_BAND_FLOATS;
}

typedef struct conv_ctx {
    const step *s;
    void *const *bufs;
    uint32_t n_bufs, ci, eo; /* the convolution's index in bufs; the pooled output's (or n_bufs) */
    int64_t oh, row, ul;     /* output rows per image, elements per row, per epilogue unit */
    rt_conv_geom pg;
    float *pool_out;
} conv_ctx;

static void conv_band(void *ctx, int64_t b, int64_t r0, int64_t nr, float *buf) {
    const conv_ctx *c = ctx;
    int64_t t0 = b * c->oh + r0;
    if (c->s->epi) { /* the kernel indexes whole tensors: the band's rows sit at their offset */
        void *lb[CONV_MAX_BUFS];
        memcpy(lb, c->bufs, c->n_bufs * sizeof *lb);
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

/* Without the direct kernels (exact math, TJ_NO_DIRECT_CONV, no memory) or with epilogue units
 * across rows: the reference kernels and the whole epilogue, one after the other. */
static tj_status conv_unfused(cpu_prog *cp, const step *s, const void *x, const void *w,
                              void **bufs, const conv_ctx *c) {
    const ir_graph *g = cp->base.g;
    const ir_node *n = ir_node_get(g, s->id);
    size_t bytes = (size_t)ir_numel(n->rank, n->dims) * sizeof(float);
    void *tmp = rt_alloc(bytes);
    if (!tmp)
        return ir_errorf(TJ_ERR_OOM, "cpu program: out of memory for conv2d %%%u", s->id);
    tj_tensor h[3], *hp[2] = {&h[0], &h[1]};
    jit_cpu_header(&h[0], ir_node_get(g, s->src[0]), (void *)x);
    jit_cpu_header(&h[1], ir_node_get(g, s->src[1]), (void *)w);
    jit_cpu_header(&h[2], n, tmp);
    tj_status st = rt_ref_kernel(n, hp, &h[2]);
    if (!st && s->epi) {
        bufs[c->ci] = tmp;
        if (c->eo < c->n_bufs)
            bufs[c->eo] = tmp;
        jit_cpu_run_units(cp, s->fn, &s->plan, bufs);
    }
    if (!st && s->pool) {
        const ir_node *pn = ir_node_get(g, s->pool - 1);
        jit_cpu_header(&h[0], ir_node_get(g, ir_inputs(g, pn)[0]), tmp);
        jit_cpu_header(&h[1], pn, c->pool_out);
        st = rt_ref_kernel(pn, hp, &h[1]);
    }
    rt_free(tmp, bytes);
    return st;
}

tj_status jit_cpu_conv_run(cpu_prog *cp, const step *s, const void *x, const void *w, void **bufs,
                           void *pool_out) {
    const ir_graph *g = cp->base.g;
    rt_conv_geom cg;
    conv_ctx c = {s, bufs, 0, 0, 0, 0, 0, 1, {0}, pool_out};
    conv_geoms(g, s->id, s->pool ? s->pool - 1 : IR_NONE, &cg, &c.pg);
    c.oh = cg.oh, c.row = cg.ow * cg.o, c.ul = s->plan.unit_len > 0 ? s->plan.unit_len : 1;
    if (s->epi) {
        const pass_group *gr = s->epi;
        c.n_bufs = c.eo = gr->n_inputs + gr->n_outputs;
        for (uint32_t k = 0; k < gr->n_inputs; k++)
            if (gr->inputs[k] == s->id)
                c.ci = k;
        if (s->pool)
            c.eo = gr->n_inputs; /* its one output, which the pool reads */
    }
    const rt_config *cfg = rt_config_get();
    int64_t band = s->pool ? c.pg.kh : RT_CONV_BAND_FLOATS / c.row;
    int64_t used = s->pool ? (c.pg.oh * c.pg.kh < cg.oh ? c.pg.oh * c.pg.kh : cg.oh) : cg.oh;
    if (!cfg->exact_math && !cfg->no_direct_conv && c.row % c.ul == 0 &&
        rt_conv_direct_fwd_bands(&cg, x, w, band, used, conv_band, &c) == 0)
        return TJ_OK;
    return conv_unfused(cp, s, x, w, bufs, &c);
}

static tj_status run_conv(cpu_prog *cp, const step *s, tj_tensor **vals, void **bufs) {
    const ir_graph *g = cp->base.g;
    tj_tensor *pooled = NULL;
    if (s->pool && !(vals[s->pool - 1] = pooled = out_tensor(ir_node_get(g, s->pool - 1))))
        return TJ_ERR_OOM;
    const pass_group *gr = s->epi;
    for (uint32_t k = 0; gr && k < gr->n_inputs; k++)
        bufs[k] = gr->inputs[k] == s->id ? NULL : vals[gr->inputs[k]]->data;
    for (uint32_t k = 0; gr && !s->pool && k < gr->n_outputs; k++) {
        tj_tensor *t = out_tensor(ir_node_get(g, gr->outputs[k]));
        if (!t)
            return TJ_ERR_OOM;
        vals[gr->outputs[k]] = t;
        bufs[gr->n_inputs + k] = t->data;
    }
    return jit_cpu_conv_run(cp, s, vals[s->src[0]]->data, vals[s->src[1]]->data, bufs,
                            pooled ? pooled->data : NULL);
}

/* A natively lowered branch or loop: operands in, one-element results out, packed as the node's
 * tuple; when the code hands back (an error to report) the executor runs the node instead. */
static tj_status run_cf(cpu_prog *cp, const step *s, tj_tensor **vals, void **bufs,
                        const rt_exec_env *env) {
    const ir_graph *g = cp->base.g;
    /* checking numerics: the executor runs the regions' programs, whose every step is checked
     * (the native function has no checks in it) */
    if (RT_CHECKING_NUMERICS())
        return rt_exec_node(g, s->id, env, vals, (tj_tensor **)bufs, NULL);
    const ir_node *n = ir_node_get(g, s->id);
    uint32_t nr = ir_cf_n_results(g, n);
    tj_tensor *stack_res[16] = {0}, **res = nr <= 16 ? stack_res : calloc(nr + 1, sizeof *res);
    if (!res)
        return ir_errorf(TJ_ERR_OOM, "cpu program: out of memory");
    tj_status st = TJ_OK;
    for (uint32_t k = 0; k < s->n_in; k++)
        bufs[k] = vals[s->in[k]]->data;
    for (uint32_t k = 0; k < nr && !st; k++) {
        ir_node d;
        if ((st = ir_cf_result(g, n, k, &d)) == TJ_OK &&
            !(res[k] = rt_tensor_alloc_uninit(d.dtype, d.rank, d.dims)))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        if (!st)
            bufs[s->n_in + k] = res[k]->data;
    }
    int32_t rc = st ? 1 : ((jit_cpu_cf_fn)(void *)s->fn)(bufs);
    if (!st && rc == 0) {
        vals[s->id] = rt_tuple_new((int)nr, res);
        st = vals[s->id]->kind == RT_ERROR ? vals[s->id]->code : TJ_OK;
    }
    for (uint32_t k = 0; k < nr; k++)
        rt_release(res[k]);
    if (res != stack_res)
        free(res);
    if (!st && rc != 0) /* an error to report: the executor finds it and names the iteration */
        st = rt_exec_node(g, s->id, env, vals, (tj_tensor **)bufs, NULL);
    return st;
}

/* A step that only materialises a value (a constant, a parameter, a variable read): not work. */
static bool is_value(const ir_graph *g, const step *sp) {
    int op = ir_node_get(g, sp->id)->op;
    return sp->kind == STEP_NODE &&
           (op == IR_OP_CONST || op == IR_OP_PARAM || op == IR_OP_VAR_READ || op == IR_OP_GET);
}

/* The profile event of step s: its label, the function, its first output and the bytes it
 * reads and writes (its buffers). */
static void profile_step(const cpu_prog *cp, uint32_t s, double t0) {
    const ir_graph *g = cp->base.g;
    const step *sp = &cp->steps[s];
    int64_t bytes = 0;
    for (uint32_t k = 0; k < sp->n_in + sp->n_out; k++) {
        const ir_node *n = ir_node_get(g, k < sp->n_in ? sp->in[k] : sp->out[k - sp->n_in]);
        if (n->dtype != IR_VOID)
            bytes += ir_numel(n->rank, n->dims) * (int64_t)ir_dtype_size(n->dtype);
    }
    const ir_node *o = ir_node_get(g, sp->n_out ? sp->out[0] : sp->id);
    char d[96], fn[256];
    rt_profile_event("kernel", cp->labels ? cp->labels[s] : "step", t0,
                     "\"function\":\"%s\",\"out\":\"%s%s\",\"outputs\":%u,\"bytes\":%lld",
                     rt_profile_json(fn, sizeof fn, g->name ? g->name : ""),
                     o->dtype == IR_VOID ? "void" : ir_dtype_short(o->dtype),
                     rt_profile_dims(d, sizeof d, o->rank, o->dims), sp->n_out, (long long)bytes);
}

/* Check numerics: step s's outputs; a NaN or infinity is blamed on the first of the step's ops
 * whose reference-kernel result has one, else on the kernel. */
static tj_status check_step(const cpu_prog *cp, uint32_t s, const rt_exec_env *env,
                            tj_tensor *const *vals) {
    const ir_graph *g = cp->base.g;
    const step *sp = &cp->steps[s];
    for (uint32_t k = 0; k < sp->n_out; k++) {
        int is_nan = 0;
        int64_t at = rt_numerics_first_bad(vals[sp->out[k]], &is_nan);
        if (at < 0)
            continue;
        char ctx[320];
        snprintf(ctx, sizeof ctx, "(kernel '%s')", cp->labels ? cp->labels[s] : "?");
        uint32_t *ids = malloc((g->n_nodes + 1) * sizeof *ids);
        tj_status st = TJ_OK;
        if (ids) {
            uint32_t n = jit_cpu_step_nodes(cp, sp, ids);
            st = rt_numerics_locate(g, ids, n, env, vals, ctx);
            free(ids);
        }
        if (!st) { /* not reproduced op by op: name the kernel's output */
            const ir_node *o = ir_node_get(g, sp->out[k]);
            st = rt_numerics_error("", ir_ops[o->op].name, sp->out[k], vals[sp->out[k]], at, is_nan,
                                   ctx);
        }
        return st;
    }
    return TJ_OK;
}

static tj_status cpu_run(rt_program *p, tj_tensor *const *args, uint32_t n_args, tj_variable **caps,
                         tj_tensor **outs) {
    cpu_prog *cp = (cpu_prog *)p;
    const ir_graph *g = p->g;
    /* small programs keep their per-call state on the stack: the hit path allocates nothing */
    tj_tensor *stack_vals[64];
    void *stack_scratch[64];
    tj_tensor **vals = g->n_nodes < 64 ? stack_vals : calloc(g->n_nodes + 1, sizeof *vals);
    void **scratch = cp->max_bufs < 64 ? stack_scratch : calloc(cp->max_bufs + 1, sizeof(void *));
    if (vals == stack_vals)
        memset(stack_vals, 0, g->n_nodes * sizeof *vals); /* only what this graph uses */
    if (!vals || !scratch) {
        if (vals != stack_vals)
            free(vals);
        if (scratch != stack_scratch)
            free(scratch);
        return ir_errorf(TJ_ERR_OOM, "cpu program: out of memory");
    }
    tj_status st = TJ_OK;
    /* nodes without a generated kernel run as the interpreter runs them (runtime/exec.c) */
    rt_exec_env env = {.args = args,
                       .n_args = n_args,
                       .caps = caps,
                       .consts = cp->consts,
                       .regions = cp->regions,
                       .effects = 1,
                       .check_params = 1,
                       .who = "cpu program"};
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        const step *sp = &cp->steps[s];
        double t0 = RT_PROFILING() && !is_value(g, sp) ? rt_profile_now() : 0;
        if (sp->kind == STEP_GEN)
            st = run_gen(cp, sp, vals, scratch, outs, args, n_args);
        else if (sp->kind == STEP_BLAS)
            st = run_blas(cp, sp, vals, scratch);
        else if (sp->kind == STEP_CF)
            st = run_cf(cp, sp, vals, scratch, &env);
        else if (sp->kind == STEP_CONV)
            st = run_conv(cp, sp, vals, scratch);
        else
            st = rt_exec_node(g, sp->id, &env, vals, (tj_tensor **)scratch, NULL);
        if (t0)
            profile_step(cp, s, t0);
        if (!st && RT_CHECKING_NUMERICS() && !is_value(g, sp))
            st = check_step(cp, s, &env, vals);
        /* drop values whose last reader was this step */
        for (uint32_t k = 0; k < sp->n_in; k++) {
            if (cp->last_use[sp->in[k]] == s) {
                rt_release(vals[sp->in[k]]);
                vals[sp->in[k]] = NULL;
            }
        }
    }
    for (uint32_t k = 0; k < g->n_outputs && !st; k++) {
        tj_tensor *v = vals[g->outputs[k]];
        if (!outs[k])
            outs[k] = rt_retain(v);
        else if (outs[k] != v) /* not written in place: copy into the caller's tensor */
            st = rt_copy_into(outs[k], v);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++)
        rt_release(vals[i]);
    if (vals != stack_vals)
        free(vals);
    if (scratch != stack_scratch)
        free(scratch);
    return st;
}

void jit_cpu_prog_free(rt_program *p) {
    cpu_prog *cp = (cpu_prog *)p;
    if (!cp)
        return;
    if (cp->consts)
        for (uint32_t i = 0; i < p->g->n_nodes; i++)
            rt_release(cp->consts[i]);
    free(cp->consts);
    jit_cpu_shared_release(cp->shared);
    pass_partition_free(cp->part);
    for (uint32_t s = 0; cp->steps && s < cp->n_steps; s++) {
        free(cp->steps[s].in);
        free(cp->steps[s].out);
        free(cp->steps[s].raw_res);
        free(cp->steps[s].chain_nodes);
        for (uint32_t m = 0; m < cp->steps[s].n_members; m++) {
            free(cp->steps[s].members[m].in);
            free(cp->steps[s].members[m].out);
        }
        free(cp->steps[s].members);
        rt_gemm_packed_free(cp->steps[s].packed);
        if (cp->labels)
            free(cp->labels[s]);
    }
    free(cp->labels);
    free(cp->steps);
    free(cp->raw_off);
    free(cp->raw_inplace);
    rt_regions_free(cp->regions, p->g);
    free(cp->last_use);
    free(cp->out_slot);
    free(cp->key);
    free(cp);
}

static uint32_t cpu_kernels(const rt_program *p, int32_t *kernel_of, const char *const **names) {
    const cpu_prog *cp = (const cpu_prog *)p;
    uint32_t n = p->g->n_nodes, *ids = malloc((n + 1) * sizeof *ids);
    for (uint32_t i = 0; i < n; i++)
        kernel_of[i] = -1;
    *names = (const char *const *)cp->labels;
    if (!ids || !cp->labels)
        return free(ids), 0;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        uint32_t k = jit_cpu_step_nodes(cp, &cp->steps[s], ids);
        for (uint32_t j = 0; j < k; j++) {
            int op = p->g->nodes[ids[j]].op; /* values, not work */
            if (op != IR_OP_CONST && op != IR_OP_PARAM && op != IR_OP_VAR_READ && op != IR_OP_GET)
                kernel_of[ids[j]] = (int32_t)s;
        }
    }
    free(ids);
    return cp->n_steps;
}

static const rt_program_vt cpu_vt = {cpu_run,           jit_cpu_prog_free, "cpu",
                                     jit_cpu_raw_bytes, jit_cpu_run_raw,   jit_cpu_raw_inplace,
                                     cpu_kernels};

/* ---- building: what every program needs once its steps exist ------------------------------ */
cpu_prog *jit_cpu_prog_new(const ir_graph *g, const jit_cpu_opts *o) {
    cpu_prog *cp = calloc(1, sizeof *cp);
    if (cp && !(cp->out_slot = malloc((g->n_nodes + 1) * sizeof *cp->out_slot))) {
        free(cp);
        cp = NULL;
    }
    if (!cp) {
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        return NULL;
    }
    cp->base.vt = &cpu_vt;
    cp->base.g = g;
    cp->opts = *o;
    cp->par_min = o->par_min;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        cp->out_slot[i] = -1;
    for (uint32_t k = g->n_outputs; k-- > 0;)
        cp->out_slot[g->outputs[k]] = (int32_t)k;
    return cp;
}

uint32_t jit_cpu_step_nodes(const cpu_prog *cp, const step *sp, uint32_t *out) {
    if (sp->kind == STEP_GEN && sp->sub == SUB_CHAIN) {
        memcpy(out, sp->chain_nodes, sp->n_chain_nodes * sizeof *out);
        return sp->n_chain_nodes;
    }
    const pass_group *gr = NULL;
    uint32_t n = 0;
    if (sp->kind == STEP_GEN && (sp->sub == SUB_EW || sp->sub == SUB_RED))
        gr = &cp->part->groups[sp->id];
    else
        out[n++] = sp->id, gr = sp->kind == STEP_BLAS || sp->kind == STEP_CONV ? sp->epi : NULL;
    for (uint32_t k = 0; gr && k < gr->n_nodes; k++)
        out[n++] = gr->nodes[k];
    if (sp->kind == STEP_CONV && sp->pool)
        out[n++] = sp->pool - 1;
    return n;
}

/* Labels for pictures and profiles: "k3 fused mul add tanh", "openblas matmul + add relu",
 * "chain of 4: ...", "reference conv2d", "native while". */
static tj_status label_steps(cpu_prog *cp) {
    const ir_graph *g = cp->base.g;
    uint32_t *ids = malloc((g->n_nodes + 1) * sizeof *ids);
    cp->labels = calloc(cp->n_steps + 1, sizeof *cp->labels);
    if (!ids || !cp->labels) {
        free(ids);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        const step *sp = &cp->steps[s];
        char buf[256];
        int len = 0;
        const char *what = sp->kind == STEP_BLAS   ? (sp->packs      ? "packed"
                                                      : own_gemm(sp) ? "gemm"
                                                                     : "openblas")
                           : sp->kind == STEP_CF   ? "native"
                           : sp->kind == STEP_CONV ? "conv"
                           : sp->kind == STEP_NODE
                               ? "reference"
                               : (const char *[]){"fused",   "reduce", "matmul",
                                                  "softmax", "view",   "chain"}[sp->sub];
        len = snprintf(buf, sizeof buf, "s%u %s:", s, what);
        uint32_t n = jit_cpu_step_nodes(cp, sp, ids), shown = 0;
        for (uint32_t k = 0; k < n && len < (int)sizeof buf - 40; k++) {
            int op = ir_node_get(g, ids[k])->op;
            if (op == IR_OP_CONST || op == IR_OP_PARAM)
                continue;
            len += snprintf(buf + len, sizeof buf - (size_t)len, " %s", ir_ops[op].name);
            shown++;
        }
        if (shown < n && len >= (int)sizeof buf - 40)
            snprintf(buf + len, sizeof buf - (size_t)len, " ...");
        if (!(cp->labels[s] = strdup(buf))) {
            free(ids);
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        }
    }
    free(ids);
    return TJ_OK;
}

tj_status jit_cpu_prog_finish(cpu_prog *cp, rt_program *(*region)(const ir_graph *, void *),
                              void *ctx) {
    const ir_graph *g = cp->base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        sp->packs = packable(cp, sp);
        sp->epi_bias = -1;
        sp->epi_simple =
            sp->kind == STEP_BLAS && simple_epilogue(cp, sp, &sp->epi_bias, &sp->epi_relu);
    }
    tj_status st = label_steps(cp);
    if (st)
        return st;
    if (!(cp->last_use = calloc(g->n_nodes + 1, sizeof *cp->last_use)))
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    cp->max_bufs = 8;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        const step *sp = &cp->steps[s];
        uint32_t nb = sp->epi ? sp->epi->n_inputs + sp->epi->n_outputs : sp->n_in + sp->n_out;
        if (sp->kind == STEP_CF)
            nb = sp->n_in + ir_cf_n_results(g, ir_node_get(g, sp->id));
        if (nb > cp->max_bufs)
            cp->max_bufs = nb;
        for (uint32_t k = 0; k < sp->n_in; k++)
            cp->last_use[sp->in[k]] = s;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        cp->last_use[g->outputs[k]] = UINT32_MAX;
    if ((st = jit_cpu_raw_plan(cp)) != TJ_OK)
        return st;
    return rt_regions_new(g, region, ctx, &cp->regions);
}

#ifndef TJ_HAVE_LLVM

rt_program *jit_cpu_compile_opts(const ir_graph *g, const jit_cpu_opts *opts) {
    ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: tracejit was built without LLVM");
    return NULL;
}

#else

/* A control-flow region: compiled like the graph around it (its kernels native; the loop or
 * branch itself runs in the executor), interpreted where the backend declines. */
static rt_program *compile_region(const ir_graph *g, void *ctx) {
    rt_program *p = jit_cpu_compile_opts(g, ctx);
    if (!p) {
        ir_clear_error();
        p = rt_interp_new(g);
    }
    return p;
}

rt_program *jit_cpu_compile_opts(const ir_graph *g, const jit_cpu_opts *opts) {
    jit_cpu_opts o = opts ? *opts : (jit_cpu_opts){0};
    o.exact_math = jit_cpu_exact_math(opts);
    if (!g) {
        ir_errorf(TJ_ERR_INVALID, "cpu jit: graph is NULL");
        return NULL;
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = ir_node_get(g, i);
        for (int d = 0; d < n->rank; d++) {
            if (n->dims[d] < 0) {
                ir_errorf(TJ_ERR_UNSUPPORTED,
                          "cpu jit: node %%%u (%s) has unknown dims; only "
                          "concrete signatures are compiled",
                          i, ir_ops[n->op].name);
                return NULL;
            }
        }
        if (n->a.sub[0] && !(ir_ops[n->op].flags & IR_F_CF)) {
            ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: node %%%u (%s) has a subgraph", i,
                      ir_ops[n->op].name);
            return NULL;
        }
    }
    if (jit_cpu_llvm_init() != TJ_OK)
        return NULL;
    o.par_min = o.par_min > 0 ? o.par_min : 65536;
    cpu_prog *cp = jit_cpu_prog_new(g, &o);
    if (!cp)
        return NULL;
    if (jit_cpu_plan(cp, &o) != TJ_OK || jit_cpu_prog_finish(cp, compile_region, &o) != TJ_OK) {
        jit_cpu_prog_free(&cp->base);
        return NULL;
    }
    return &cp->base;
}

#endif /* TJ_HAVE_LLVM */
