/* exec_raw.c — loops whose regions have a raw form (rt_program_vt.run_raw: the CPU backend's
 * programs without effects, strings or reference-kernel nodes). Each loop variable gets two
 * buffers, allocated once per run of the loop node: an iteration reads one and writes the other,
 * then they swap, so after the buffers exist an iteration allocates nothing and builds no tensor;
 * the regions' intermediates live in one scratch block. A loop variable the body only updates in
 * place (a tensor array written each iteration: rt_program_vt.raw_inplace) has one buffer, which
 * goes in and out of the body: a write costs its row, not a copy of the array. A scan reads its
 * rows in place and writes its outputs straight into the stacked results when rows keep 64-byte
 * alignment (else through an aligned row buffer). Semantics are exec.c's loops' exactly; whatever
 * this path does not take (no raw form, a for_range step of 0, a node with an error to report) it
 * hands back with RT_RAW_REDO and exec.c runs the loop the usual way, which is safe because raw
 * regions are pure.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_pool.h"
#include "runtime/runtime.h"

static atomic_ullong n_raw_runs;

uint64_t rt_raw_loop_count(void) {
    return atomic_load(&n_raw_runs);
}

static size_t raw_size(const rt_program *p) {
    return p && p->vt->run_raw && p->vt->raw_bytes ? p->vt->raw_bytes(p) : 0;
}

/* every value a concrete tensor of a fixed-size dtype */
static bool plain(tj_tensor *const *v, uint32_t n) {
    for (uint32_t k = 0; k < n; k++)
        if (!v[k] || v[k]->kind != RT_CONCRETE || v[k]->dtype == TJ_STRING)
            return false;
    return true;
}

/* the region's single output is a one-element bool (a while condition) */
static bool bool_out(const rt_program *p) {
    const ir_graph *g = p->g;
    if (g->n_outputs != 1)
        return false;
    const ir_node *o = ir_node_get(g, g->outputs[0]);
    return o->dtype == TJ_BOOL && ir_numel(o->rank, o->dims) == 1;
}

typedef struct raw_loop {
    uint32_t nr;        /* loop variables */
    tj_tensor **buf[2]; /* their two buffers each (one when updated in place) */
    uint8_t *inplace;   /* per variable: the body writes it over itself */
    int cur;            /* which holds the current values; -1: still the operands */
    void **in, **out;   /* the region's param and output pointers */
    void *scratch;
    size_t scratch_bytes;
} raw_loop;

static void raw_free(raw_loop *L) {
    for (int b = 0; b < 2; b++) {
        for (uint32_t k = 0; L->buf[b] && k < L->nr; k++)
            rt_release(L->buf[b][k]);
        free(L->buf[b]);
    }
    free(L->inplace);
    free(L->in);
    free(L->out);
    if (L->scratch)
        rt_free(L->scratch, L->scratch_bytes);
}

/* Buffers for the nr loop variables (results 0..nr of node n; variable k is param first + k of
 * body, its first value init[k]), room for na params and n_out outputs, and the scratch. */
static tj_status raw_init(raw_loop *L, const ir_graph *g, const ir_node *n, rt_program *body,
                          uint32_t first, tj_tensor *const *init, uint32_t nr, uint32_t na,
                          uint32_t n_out, size_t scratch) {
    memset(L, 0, sizeof *L);
    L->nr = nr;
    L->cur = -1;
    L->buf[0] = calloc(nr + 1, sizeof(tj_tensor *));
    L->buf[1] = calloc(nr + 1, sizeof(tj_tensor *));
    L->inplace = calloc(nr + 1, 1);
    L->in = calloc(na + 1, sizeof(void *));
    L->out = calloc(n_out + 1, sizeof(void *));
    L->scratch_bytes = scratch;
    L->scratch = rt_alloc(scratch);
    if (!L->buf[0] || !L->buf[1] || !L->inplace || !L->in || !L->out || !L->scratch)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", ir_ops[n->op].name);
    for (uint32_t k = 0; k < nr; k++) {
        ir_node d;
        tj_status st = ir_cf_result(g, n, k, &d);
        if (st)
            return st;
        L->inplace[k] =
            body->vt->raw_inplace && body->vt->raw_inplace(body, k) == (int32_t)(first + k);
        for (int b = 0; b < 2 - L->inplace[k]; b++)
            if (!(L->buf[b][k] = rt_tensor_alloc_uninit(d.dtype, d.rank, d.dims)))
                return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        if (L->inplace[k]) { /* the operand is not ours to write: its copy is */
            size_t bytes = (size_t)init[k]->numel * ir_dtype_size(init[k]->dtype);
            if (bytes)
                memcpy(L->buf[0][k]->data, init[k]->data, bytes);
        }
    }
    return TJ_OK;
}

/* The loop variables' params, from in[at]: the operands, or the in-place buffers. */
static void raw_start(raw_loop *L, tj_tensor *const *init, uint32_t at) {
    for (uint32_t k = 0; k < L->nr; k++)
        L->in[at + k] = L->inplace[k] ? L->buf[0][k]->data : init[k]->data;
}
/* Points out[0..nr) at the free buffers (where the next iteration writes). */
static void raw_targets(raw_loop *L) {
    int nx = L->cur == 0 ? 1 : 0;
    for (uint32_t k = 0; k < L->nr; k++)
        L->out[k] = L->buf[L->inplace[k] ? 0 : nx][k]->data;
}
/* The iteration wrote them: they are current, and the next iteration reads them at in + at. */
static void raw_advance(raw_loop *L, uint32_t at) {
    L->cur = L->cur == 0 ? 1 : 0;
    for (uint32_t k = 0; k < L->nr; k++)
        L->in[at + k] = L->out[k];
}
/* The loop's results: the current buffers (or the operands when no iteration ran). */
static void raw_results(raw_loop *L, tj_tensor *const *init, tj_tensor **res) {
    for (uint32_t k = 0; k < L->nr; k++) {
        int b = L->inplace[k] ? 0 : L->cur;
        if (L->cur < 0) {
            res[k] = rt_retain(init[k]);
        } else {
            res[k] = L->buf[b][k];
            L->buf[b][k] = NULL;
        }
    }
}

static tj_status raw_while(const ir_node *n, const ir_graph *g, rt_program *cond, rt_program *body,
                           tj_tensor **ins, tj_tensor **res) {
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in;
    size_t sb = raw_size(cond) > raw_size(body) ? raw_size(cond) : raw_size(body);
    raw_loop L;
    tj_status st = raw_init(&L, g, n, body, 0, ins, nr, na, nr, sb);
    _Alignas(64) unsigned char flag[64];
    void *flag_out = flag;
    for (uint32_t k = nr; k < na && !st; k++)
        L.in[k] = ins[k]->data;
    if (!st)
        raw_start(&L, ins, 0);
    for (int64_t it = 0; !st; it++) {
        if (n->a.i[0] > 0 && it >= n->a.i[0])
            break; /* maximum_iterations, as exec.c */
        if ((st = cond->vt->run_raw(cond, L.in, &flag_out, L.scratch)) || !flag[0])
            break;
        raw_targets(&L);
        if (!(st = body->vt->run_raw(body, L.in, L.out, L.scratch)))
            raw_advance(&L, 0);
    }
    if (!st)
        raw_results(&L, ins, res);
    raw_free(&L);
    return st;
}

static tj_status raw_for(const ir_node *n, const ir_graph *g, rt_program *body, tj_tensor **ins,
                         tj_tensor **res) {
    int64_t v = *(const int64_t *)ins[0]->data, limit = *(const int64_t *)ins[1]->data;
    int64_t delta = *(const int64_t *)ins[2]->data;
    if (delta == 0)
        return RT_RAW_REDO;                                /* exec.c reports it */
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in - 2; /* i, carried..., invariants... */
    raw_loop L;
    tj_status st = raw_init(&L, g, n, body, 1, ins + 3, nr, na, nr, raw_size(body));
    _Alignas(64) int64_t index[8];
    L.in[0] = index;
    for (uint32_t k = 1 + nr; k < na && !st; k++)
        L.in[k] = ins[2 + k]->data;
    if (!st)
        raw_start(&L, ins + 3, 1);
    while (!st && (delta > 0 ? v < limit : v > limit)) {
        index[0] = v;
        raw_targets(&L);
        if ((st = body->vt->run_raw(body, L.in, L.out, L.scratch)))
            break;
        raw_advance(&L, 1);
        if (__builtin_add_overflow(v, delta, &v))
            break;
    }
    if (!st)
        raw_results(&L, ins + 3, res);
    raw_free(&L);
    return st;
}

static tj_status raw_scan(const ir_node *n, const ir_graph *g, rt_program *body, tj_tensor **ins,
                          tj_tensor **res) {
    uint32_t nc = (uint32_t)n->a.i[0], ninv = (uint32_t)n->a.i[1];
    uint32_t nx = n->n_in - nc - ninv, nr = ir_cf_n_results(g, n), ny = nr - nc;
    int64_t T = ins[nc]->dims[0];
    raw_loop L;
    tj_status st = raw_init(&L, g, n, body, 0, ins, nc, n->n_in, nr, raw_size(body));
    /* rows of a sequence or an output: in place when every row stays 64-byte aligned, else
     * through one aligned row buffer each (the kernels may assume aligned rows) */
    size_t *xrow = calloc(nx + 1, sizeof *xrow), *yrow = calloc(ny + 1, sizeof *yrow);
    void **tmp = calloc(nx + ny + 1, sizeof *tmp);
    size_t *tmp_bytes = calloc(nx + ny + 1, sizeof *tmp_bytes);
    if (!st && (!xrow || !yrow || !tmp || !tmp_bytes))
        st = ir_errorf(TJ_ERR_OOM, "scan: out of memory");
    for (uint32_t k = 0; k < nx && !st; k++) {
        const tj_tensor *x = ins[nc + k];
        xrow[k] = (size_t)(T ? x->numel / T : 0) * ir_dtype_size(x->dtype);
        if (xrow[k] % 64 && !(tmp[k] = rt_alloc(tmp_bytes[k] = xrow[k])))
            st = ir_errorf(TJ_ERR_OOM, "scan: out of memory");
    }
    for (uint32_t k = 0; k < ny && !st; k++) {
        ir_node d;
        if ((st = ir_cf_result(g, n, nc + k, &d)))
            break;
        d.dims[0] = T;
        if (!(res[nc + k] = rt_tensor_alloc_uninit(d.dtype, d.rank, d.dims))) {
            st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
            break;
        }
        yrow[k] = (size_t)(T ? res[nc + k]->numel / T : 0) * ir_dtype_size(d.dtype);
        if (yrow[k] % 64 && !(tmp[nx + k] = rt_alloc(tmp_bytes[nx + k] = yrow[k])))
            st = ir_errorf(TJ_ERR_OOM, "scan: out of memory");
    }
    if (!st)
        raw_start(&L, ins, 0);
    for (uint32_t k = nc + nx; k < n->n_in && !st; k++)
        L.in[k] = ins[k]->data; /* invariants */
    for (int64_t t = 0; t < T && !st; t++) {
        for (uint32_t k = 0; k < nx; k++) {
            const char *row = (const char *)ins[nc + k]->data + (size_t)t * xrow[k];
            if (tmp[k])
                memcpy(tmp[k], row, xrow[k]);
            L.in[nc + k] = tmp[k] ? tmp[k] : (void *)row;
        }
        raw_targets(&L);
        for (uint32_t k = 0; k < ny; k++)
            L.out[nc + k] =
                tmp[nx + k] ? tmp[nx + k] : (char *)res[nc + k]->data + (size_t)t * yrow[k];
        if ((st = body->vt->run_raw(body, L.in, L.out, L.scratch)))
            break;
        for (uint32_t k = 0; k < ny; k++)
            if (tmp[nx + k])
                memcpy((char *)res[nc + k]->data + (size_t)t * yrow[k], tmp[nx + k], yrow[k]);
        raw_advance(&L, 0);
    }
    if (!st) {
        raw_results(&L, ins, res);
    } else {
        for (uint32_t k = 0; k < ny; k++) {
            rt_release(res[nc + k]);
            res[nc + k] = NULL;
        }
    }
    for (uint32_t k = 0; tmp && k < nx + ny; k++)
        if (tmp[k])
            rt_free(tmp[k], tmp_bytes[k]);
    free(tmp);
    free(tmp_bytes);
    free(xrow);
    free(yrow);
    raw_free(&L);
    return st;
}

tj_status rt_loop_raw(const ir_graph *g, uint32_t i, rt_program *r0, rt_program *r1,
                      tj_tensor **ins, tj_tensor **res) {
    const ir_node *n = ir_node_get(g, i);
    /* raw loops check nothing: under check numerics the regions' programs run, step by step */
    if (RT_CHECKING_NUMERICS() || !plain(ins, n->n_in) || !raw_size(r0))
        return RT_RAW_REDO;
    tj_status st = RT_RAW_REDO;
    if (n->op == IR_OP_WHILE && raw_size(r1) && bool_out(r0))
        st = raw_while(n, g, r0, r1, ins, res);
    else if (n->op == IR_OP_FOR)
        st = raw_for(n, g, r0, ins, res);
    else if (n->op == IR_OP_SCAN)
        st = raw_scan(n, g, r0, ins, res);
    if (st == TJ_OK)
        atomic_fetch_add(&n_raw_runs, 1);
    return st;
}
