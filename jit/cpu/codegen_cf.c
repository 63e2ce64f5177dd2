/* codegen_cf.c — native control flow: a COND, WHILE or FOR node whose operands, results and
 * regions (nested ones included) hold only small values (at most CF_TINY elements of bool, i32,
 * i64, f32 or f64) and no side effect becomes one function of straight LLVM control flow: a
 * branch is a conditional jump with phis at the join, a loop a loop whose carried values are
 * phis, and every value lives in registers, one LLVM value per element. Elementwise ops (with
 * broadcasting) use ew_ops.c's lowering, the same as the fused kernels'; reductions accumulate
 * element by element as the reference kernel does (floats in double, in input order; integers
 * wrapping); reshapes, transposes, broadcasts and slices are index maps, free at run time. A
 * loop iteration then costs a few instructions instead of a region call (fizzbuzz over 10^5:
 * nanoseconds per iteration). What the lowering cannot decide alone it hands back: an integer
 * division by zero or a for_range step of 0 returns 1 and the executor redoes the node with its
 * region programs, which report the error with the iteration; a region is pure, so running it
 * again is safe. Semantics follow runtime/exec.c exactly: maximum_iterations is checked before
 * the condition, a for_range stops when i + delta overflows (keeping that iteration's values),
 * integer division is Python's (floor) with MIN / -1 wrapping. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"
#include "runtime/kernels/kernels.h"

#ifdef TJ_HAVE_LLVM

#define CF_MAX_DEPTH 16 /* nesting of regions lowered */
#define CF_TINY 16      /* elements per value */

static bool tiny_dt(int dt) {
    return dt == TJ_BOOL || dt == TJ_I32 || dt == TJ_I64 || dt == TJ_F32 || dt == TJ_F64;
}
static int64_t count(const ir_node *n) {
    return ir_numel(n->rank, n->dims);
}
static bool tiny(const ir_node *n) {
    int64_t c = count(n);
    return tiny_dt(n->dtype) && c >= 1 && c <= CF_TINY;
}
static bool one(const ir_node *n) {
    return tiny_dt(n->dtype) && count(n) == 1;
}
static bool is_cf(int op) {
    return op == IR_OP_COND || op == IR_OP_WHILE || op == IR_OP_FOR;
}
static bool is_flt(int dt) {
    return dt == TJ_F32 || dt == TJ_F64;
}
/* integer DIV / FLOORDIV / MOD: lowered here (a zero divisor hands back), not in ew_ops.c */
static bool int_division(const ir_graph *g, const ir_node *n) {
    if ((n->op != IR_OP_DIV && n->op != IR_OP_FLOORDIV && n->op != IR_OP_MOD) || n->n_in != 2 ||
        (n->dtype != TJ_I32 && n->dtype != TJ_I64))
        return false;
    const uint32_t *in = ir_inputs(g, n);
    return ir_node_get(g, in[0])->dtype == n->dtype && ir_node_get(g, in[1])->dtype == n->dtype;
}
static bool is_reduce(const ir_node *n, const ir_node *x) {
    return (n->op == IR_OP_SUM || n->op == IR_OP_MEAN || n->op == IR_OP_MAX || n->op == IR_OP_MIN ||
            n->op == IR_OP_PROD) &&
           n->dtype == x->dtype && ir_dtype_is_numeric(x->dtype) && x->dtype != TJ_BOOL;
}
static bool is_view(int op) {
    return op == IR_OP_RESHAPE || op == IR_OP_EXPAND_DIMS || op == IR_OP_SQUEEZE ||
           op == IR_OP_TRANSPOSE || op == IR_OP_BROADCAST_TO || op == IR_OP_SLICE;
}

static bool region_ok(const ir_graph *r, int depth);

static bool node_ok(const ir_graph *g, uint32_t id, int depth) {
    const ir_node *n = ir_node_get(g, id);
    const uint32_t *in = ir_inputs(g, n);
    if (ir_node_has_effect(g, n) || (ir_ops[n->op].flags & IR_F_RAND))
        return false;
    if (is_cf(n->op)) {
        if (depth >= CF_MAX_DEPTH)
            return false;
        for (uint32_t k = 0; k < n->n_in; k++)
            if (!tiny(ir_node_get(g, in[k])))
                return false;
        if (n->op == IR_OP_COND && (n->n_in < 1 || !one(ir_node_get(g, in[0]))))
            return false;
        if (n->op == IR_OP_FOR)
            for (int k = 0; k < 3; k++)
                if (n->n_in < 3 || ir_node_get(g, in[k])->dtype != TJ_I64 ||
                    !one(ir_node_get(g, in[k])))
                    return false;
        uint32_t nr = ir_cf_n_results(g, n);
        for (uint32_t k = 0; k < nr; k++) {
            ir_node d;
            if (ir_cf_result(g, n, k, &d) != TJ_OK || !tiny(&d))
                return false;
        }
        for (int k = 0; k < 2; k++) {
            const ir_graph *r = n->a.sub[k] ? ir_region(g, n, k) : NULL;
            if ((k == 0 || n->op != IR_OP_FOR) && !r)
                return false;
            if (r && !region_ok(r, depth + 1))
                return false;
        }
        if (n->op == IR_OP_WHILE) {
            const ir_graph *c = ir_region(g, n, 0);
            if (c->n_outputs != 1 || !one(ir_node_get(c, c->outputs[0])))
                return false;
        }
        return true;
    }
    if (!tiny(n))
        return false;
    switch (n->op) {
    case IR_OP_PARAM:
    case IR_OP_GET:
        return true;
    case IR_OP_CONST: {
        const ir_blob *b = ir_blob_get(g, n->a.blob);
        return b && b->size == (size_t)count(n) * ir_dtype_size(n->dtype);
    }
    default:
        break;
    }
    for (uint32_t k = 0; k < n->n_in; k++)
        if (!tiny(ir_node_get(g, in[k])))
            return false;
    if (n->n_in == 1 && is_reduce(n, ir_node_get(g, in[0]))) {
        for (uint32_t k = 0; k < n->a.n_list; k++)
            if (n->a.list[k] < 0 || n->a.list[k] >= ir_node_get(g, in[0])->rank)
                return false;
        return true;
    }
    if (n->n_in == 1 && is_view(n->op))
        return ir_node_get(g, in[0])->dtype == n->dtype;
    return int_division(g, n) || jit_cpu_ew_supported(g, id);
}

static bool region_ok(const ir_graph *r, int depth) {
    for (uint32_t j = 0; j < r->n_nodes; j++)
        if (!node_ok(r, j, depth))
            return false;
    for (uint32_t k = 0; k < r->n_outputs; k++)
        if (!tiny(ir_node_get(r, r->outputs[k])))
            return false;
    return r->n_effects == 0;
}

bool jit_cpu_cf_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    return is_cf(n->op) && node_ok(g, id, 0);
}

/* ---- index maps (shapes are static: computed while emitting) ------------------------------- */
/* The element of an input of dims (ir, idims) that output element o of (orank, odims) reads
 * under NumPy broadcasting. */
static int64_t bcast_index(int orank, const int64_t *odims, int ir, const int64_t *idims,
                           int64_t o) {
    int64_t c[IR_MAX_RANK], idx = 0;
    for (int d = orank - 1; d >= 0; d--) {
        c[d] = o % odims[d];
        o /= odims[d];
    }
    for (int d = 0; d < ir; d++) {
        int od = d + orank - ir;
        idx = idx * idims[d] + (idims[d] == 1 ? 0 : c[od]);
    }
    return idx;
}

/* ---- emission -------------------------------------------------------------------------------- */
typedef struct cfe {
    jit_cpu_em e;
    LLVMValueRef fn;
    LLVMBasicBlockRef bail; /* returns 1: the executor redoes the node */
} cfe;

/* A value: one LLVM value per element (n of them). */
typedef struct val {
    LLVMValueRef *e;
    uint32_t n;
} val;

static LLVMBasicBlockRef block(cfe *c, const char *name) {
    return LLVMAppendBasicBlockInContext(c->e.c, c->fn, name);
}

static bool val_new(val *v, int64_t n) {
    v->n = (uint32_t)n;
    v->e = calloc((size_t)n + 1, sizeof *v->e);
    return v->e != NULL;
}

/* x DIV / FLOORDIV / MOD y for i32/i64 as runtime/kernels/binary.c: y == 0 hands back; y == -1
 * gives 0 - x (wrapping) or 0; otherwise truncating division adjusted to the floor. */
static LLVMValueRef emit_int_division(cfe *c, const ir_node *n, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = c->e.b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one_ = LLVMConstInt(t, 1, 0);
    LLVMValueRef m1 = LLVMConstAllOnes(t);
    LLVMBasicBlockRef ok = block(c, "div");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, y, zero, ""), c->bail, ok);
    LLVMPositionBuilderAtEnd(b, ok);
    LLVMValueRef is_m1 = LLVMBuildICmp(b, LLVMIntEQ, y, m1, "");
    LLVMValueRef ys = LLVMBuildSelect(b, is_m1, one_, y, ""); /* no MIN / -1 trap */
    LLVMValueRef q = LLVMBuildSDiv(b, x, ys, ""), r = LLVMBuildSRem(b, x, ys, "");
    LLVMValueRef neg = LLVMBuildNeg(b, x, "");
    if (n->op == IR_OP_DIV)
        return LLVMBuildSelect(b, is_m1, neg, q, "");
    LLVMValueRef adjust = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, zero, ""),
                                       LLVMBuildXor(b, LLVMBuildICmp(b, LLVMIntSLT, r, zero, ""),
                                                    LLVMBuildICmp(b, LLVMIntSLT, ys, zero, ""), ""),
                                       "");
    if (n->op == IR_OP_MOD)
        return LLVMBuildSelect(b, adjust, LLVMBuildAdd(b, r, ys, ""), r, "");
    LLVMValueRef fq = LLVMBuildSelect(b, adjust, LLVMBuildSub(b, q, one_, ""), q, "");
    return LLVMBuildSelect(b, is_m1, neg, fq, "");
}

/* A predicate value as i1: bools are already; numbers are true when nonzero (NaN is true). */
static LLVMValueRef truth(cfe *c, LLVMValueRef v, int dt) {
    LLVMBuilderRef b = c->e.b;
    if (dt == TJ_BOOL)
        return v;
    if (is_flt(dt))
        return LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "");
    return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
}

/* Element k of a CONST node as an immediate. */
static LLVMValueRef const_elem(cfe *c, const ir_graph *g, const ir_node *n, int64_t k) {
    jit_cpu_em *e = &c->e;
    const char *p = (const char *)ir_blob_get(g, n->a.blob)->data;
    switch (n->dtype) {
    case TJ_F32: {
        float v;
        memcpy(&v, p + k * 4, 4);
        return LLVMConstReal(e->f32, v);
    }
    case TJ_F64: {
        double v;
        memcpy(&v, p + k * 8, 8);
        return LLVMConstReal(e->f64, v);
    }
    case TJ_I32: {
        int32_t v;
        memcpy(&v, p + k * 4, 4);
        return LLVMConstInt(e->i32, (unsigned long long)(int64_t)v, 1);
    }
    case TJ_I64: {
        int64_t v;
        memcpy(&v, p + k * 8, 8);
        return LLVMConstInt(e->i64, (unsigned long long)v, 1);
    }
    default:
        return LLVMConstInt(e->i1, p[k] != 0, 0);
    }
}

/* A reduction of x (elements xv) into out elements, as runtime/kernels/reduce.c. */
static void emit_reduce(cfe *c, const ir_node *n, const ir_node *x, const val *xv, val *out) {
    jit_cpu_em *e = &c->e;
    LLVMBuilderRef b = e->b;
    bool red[IR_MAX_RANK] = {false};
    for (uint32_t k = 0; k < n->a.n_list; k++)
        red[n->a.list[k]] = true;
    if (n->a.n_list == 0 && count(x) != count(n))
        for (int d = 0; d < x->rank; d++)
            red[d] = true;
    int64_t ostr[IR_MAX_RANK], s = 1, cnt = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostr[d] = red[d] ? 0 : s;
        s *= red[d] ? 1 : x->dims[d];
        cnt *= red[d] ? x->dims[d] : 1;
    }
    bool fl = is_flt(x->dtype);
    int op = n->op;
    LLVMTypeRef at = fl ? e->f64 : e->i64;
    LLVMValueRef init = fl ? LLVMConstReal(at, op == IR_OP_PROD  ? 1
                                               : op == IR_OP_MAX ? -INFINITY
                                               : op == IR_OP_MIN ? INFINITY
                                                                 : 0)
                           : LLVMConstInt(at,
                                          op == IR_OP_MAX   ? (unsigned long long)INT64_MIN
                                          : op == IR_OP_MIN ? (unsigned long long)INT64_MAX
                                                            : op == IR_OP_PROD,
                                          1);
    for (uint32_t k = 0; k < out->n; k++)
        out->e[k] = init;
    for (int64_t i = 0; i < count(x); i++) {
        int64_t o = 0, rem = i;
        for (int d = x->rank - 1; d >= 0; d--) {
            o += (rem % x->dims[d]) * ostr[d];
            rem /= x->dims[d];
        }
        LLVMValueRef a = out->e[o], v = xv->e[i];
        v = fl ? (x->dtype == TJ_F32 ? LLVMBuildFPExt(b, v, at, "") : v)
               : (x->dtype == TJ_I32 ? LLVMBuildSExt(b, v, at, "") : v);
        switch (op) {
        case IR_OP_PROD:
            a = fl ? LLVMBuildFMul(b, a, v, "") : LLVMBuildMul(b, a, v, "");
            break;
        case IR_OP_MAX:
        case IR_OP_MIN: {
            bool mx = op == IR_OP_MAX;
            LLVMValueRef take =
                fl ? LLVMBuildOr(b, LLVMBuildFCmp(b, mx ? LLVMRealOGT : LLVMRealOLT, v, a, ""),
                                 LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "")
                   : LLVMBuildICmp(b, mx ? LLVMIntSGT : LLVMIntSLT, v, a, "");
            a = LLVMBuildSelect(b, take, v, a, "");
            break;
        }
        default:
            a = fl ? LLVMBuildFAdd(b, a, v, "") : LLVMBuildAdd(b, a, v, "");
        }
        out->e[o] = a;
    }
    LLVMTypeRef rt = jit_cpu_reg_ty(e, n->dtype);
    for (uint32_t k = 0; k < out->n; k++) {
        LLVMValueRef v = out->e[k];
        if (fl) {
            if (op == IR_OP_MEAN)
                v = LLVMBuildFDiv(b, v, LLVMConstReal(at, (double)cnt), "");
            out->e[k] = n->dtype == TJ_F32 ? LLVMBuildFPTrunc(b, v, rt, "") : v;
        } else {
            if (n->dtype == TJ_I32) /* wrap to the width first, as the reference */
                v = LLVMBuildSExt(b, LLVMBuildTrunc(b, v, e->i32, ""), at, "");
            if (op == IR_OP_MEAN)
                v = LLVMBuildSDiv(b, v, LLVMConstInt(at, (unsigned long long)cnt, 1), "");
            out->e[k] = n->dtype == TJ_I32 ? LLVMBuildTrunc(b, v, rt, "") : v;
        }
    }
}

/* A view op (reshape family: same order; transpose, broadcast_to, slice: rt_k_view's map). */
static tj_status emit_view(const ir_node *n, const ir_node *x, const val *xv, val *out) {
    if (n->op == IR_OP_RESHAPE || n->op == IR_OP_EXPAND_DIMS || n->op == IR_OP_SQUEEZE) {
        for (uint32_t k = 0; k < out->n; k++)
            out->e[k] = xv->e[k];
        return TJ_OK;
    }
    int64_t base, s[TJ_MAX_RANK];
    tj_status st = rt_k_view(n, x->rank, x->dims, n->rank, n->dims, &base, s);
    for (uint32_t k = 0; k < out->n && !st; k++) {
        int64_t o = k, idx = base;
        for (int d = n->rank - 1; d >= 0; d--) {
            idx += (o % n->dims[d]) * s[d];
            o /= n->dims[d];
        }
        if (idx < 0 || idx >= (int64_t)xv->n)
            return ir_errorf(TJ_ERR_INVALID, "cpu jit: %s reads element %lld of %u",
                             ir_ops[n->op].name, (long long)idx, xv->n);
        out->e[k] = xv->e[idx];
    }
    return st;
}

static tj_status emit_cf(cfe *c, const ir_graph *g, const ir_node *n, val *ops, val *res);

/* Emits region r at the builder's position with params bound to params[0..n_params); its
 * outputs' values go to outs (element arrays owned by outs from then on). The builder ends in the
 * block where the region's values are available (nested control flow adds blocks). */
static tj_status emit_region(cfe *c, const ir_graph *r, const val *params, uint32_t n_params,
                             val *outs) {
    val *v = calloc((size_t)r->n_nodes + 1, sizeof *v);
    val **multi = calloc((size_t)r->n_nodes + 1, sizeof *multi);
    tj_status st = v && multi ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t j = 0; j < r->n_nodes && !st; j++) {
        const ir_node *n = ir_node_get(r, j);
        const uint32_t *in = ir_inputs(r, n);
        if (is_cf(n->op)) {
            uint32_t nr = ir_cf_n_results(r, n);
            val *ops = calloc((size_t)n->n_in + 1, sizeof *ops);
            multi[j] = calloc((size_t)nr + 1, sizeof *multi[j]);
            if (!ops || !multi[j]) {
                free(ops);
                st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
                break;
            }
            for (uint32_t k = 0; k < n->n_in; k++)
                ops[k] = v[in[k]];
            st = emit_cf(c, r, n, ops, multi[j]);
            free(ops);
            continue;
        }
        if (!val_new(&v[j], count(n))) {
            st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
            break;
        }
        switch (n->op) {
        case IR_OP_PARAM:
            if ((uint64_t)n->a.i[0] >= n_params || params[n->a.i[0]].n != v[j].n)
                st = ir_errorf(TJ_ERR_INVALID, "cpu jit: region param %lld of %u",
                               (long long)n->a.i[0], n_params);
            else
                memcpy(v[j].e, params[n->a.i[0]].e, v[j].n * sizeof *v[j].e);
            break;
        case IR_OP_CONST:
            for (uint32_t k = 0; k < v[j].n; k++)
                v[j].e[k] = const_elem(c, r, n, k);
            break;
        case IR_OP_GET: {
            const val *src = multi[in[0]];
            uint64_t k = (uint64_t)n->a.i[0];
            if (!src || k >= ir_cf_n_results(r, ir_node_get(r, in[0])) || src[k].n != v[j].n)
                st = ir_errorf(TJ_ERR_INVALID, "cpu jit: get %%%u of a value with no results", j);
            else
                memcpy(v[j].e, src[k].e, v[j].n * sizeof *v[j].e);
            break;
        }
        default: {
            const ir_node *x = n->n_in ? ir_node_get(r, in[0]) : NULL;
            if (n->n_in == 1 && is_reduce(n, x)) {
                emit_reduce(c, n, x, &v[in[0]], &v[j]);
                break;
            }
            if (n->n_in == 1 && is_view(n->op)) {
                st = emit_view(n, x, &v[in[0]], &v[j]);
                break;
            }
            int t = n->n_in ? ir_node_get(r, in[n->op == IR_OP_WHERE ? 1 : 0])->dtype : -1;
            for (uint32_t o = 0; o < v[j].n && !st; o++) {
                LLVMValueRef a[3] = {NULL, NULL, NULL};
                for (uint32_t k = 0; k < n->n_in && k < 3; k++) {
                    const ir_node *ik = ir_node_get(r, in[k]);
                    a[k] = v[in[k]].e[bcast_index(n->rank, n->dims, ik->rank, ik->dims, o)];
                }
                if (int_division(r, n))
                    v[j].e[o] = emit_int_division(c, n, a[0], a[1]);
                else if (!(v[j].e[o] = jit_cpu_emit_op(&c->e, n, t, a)))
                    st = ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: no scalar lowering",
                                   ir_ops[n->op].name);
            }
        }
        }
    }
    for (uint32_t k = 0; k < r->n_outputs && !st; k++) {
        const val *o = &v[r->outputs[k]];
        if (!o->e || !val_new(&outs[k], o->n))
            st = ir_errorf(TJ_ERR_INVALID, "cpu jit: region output %u has no value", k);
        else
            memcpy(outs[k].e, o->e, o->n * sizeof *o->e);
    }
    for (uint32_t j = 0; j < r->n_nodes; j++) {
        if (v)
            free(v[j].e);
        if (multi && multi[j]) {
            for (uint32_t k = 0; k < ir_cf_n_results(r, ir_node_get(r, j)); k++)
                free(multi[j][k].e);
            free(multi[j]);
        }
    }
    free(multi);
    free(v);
    return st;
}

/* phis in the current block, one per element of each value of vals (typed like it) */
static tj_status make_phis(val *phis, const val *vals, uint32_t n, LLVMBasicBlockRef from,
                           LLVMBuilderRef b) {
    for (uint32_t k = 0; k < n; k++) {
        if (!val_new(&phis[k], vals[k].n))
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        for (uint32_t i = 0; i < vals[k].n; i++) {
            phis[k].e[i] = LLVMBuildPhi(b, LLVMTypeOf(vals[k].e[i]), "");
            LLVMAddIncoming(phis[k].e[i], &vals[k].e[i], &from, 1);
        }
    }
    return TJ_OK;
}
static void add_incoming(val *phis, const val *vals, uint32_t n, LLVMBasicBlockRef from) {
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 0; i < phis[k].n; i++)
            LLVMAddIncoming(phis[k].e[i], &vals[k].e[i], &from, 1);
}
static void vals_free(val *v, uint32_t n) {
    for (uint32_t k = 0; v && k < n; k++)
        free(v[k].e);
    free(v);
}

static tj_status emit_cond(cfe *c, const ir_graph *g, const ir_node *n, val *ops, val *res) {
    LLVMBuilderRef b = c->e.b;
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in - 1;
    int pdt = ir_node_get(g, ir_inputs(g, n)[0])->dtype;
    LLVMBasicBlockRef bt = block(c, "then"), be = block(c, "else"), join = block(c, "join");
    LLVMBuildCondBr(b, truth(c, ops[0].e[0], pdt), bt, be);
    val *rv[2] = {calloc(nr + 1, sizeof(val)), calloc(nr + 1, sizeof(val))};
    LLVMBasicBlockRef ends[2];
    tj_status st = rv[0] && rv[1] ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (int k = 0; k < 2 && !st; k++) {
        LLVMPositionBuilderAtEnd(b, k ? be : bt);
        st = emit_region(c, ir_region(g, n, k), ops + 1, na, rv[k]);
        ends[k] = LLVMGetInsertBlock(b);
        if (!st)
            LLVMBuildBr(b, join);
    }
    if (!st) {
        LLVMPositionBuilderAtEnd(b, join);
        if (!(st = make_phis(res, rv[0], nr, ends[0], b)))
            add_incoming(res, rv[1], nr, ends[1]);
    }
    vals_free(rv[0], nr);
    vals_free(rv[1], nr);
    return st;
}

/* WHILE: operands are the carried values then the invariants; both regions take them all. */
static tj_status emit_while(cfe *c, const ir_graph *g, const ir_node *n, val *ops, val *res) {
    LLVMBuilderRef b = c->e.b;
    jit_cpu_em *e = &c->e;
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in;
    int64_t max_it = n->a.i[0];
    val *args = calloc(na + 1, sizeof *args), *next = calloc(nr + 1, sizeof *next);
    if (!args || !next) {
        free(args);
        free(next);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b), head = block(c, "while"),
                      test = block(c, "test"), body = block(c, "body"), exit = block(c, "done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    /* the carried values become phis; the invariants stay as they are (borrowed) */
    tj_status st = make_phis(args, ops, nr, pre, b);
    for (uint32_t k = nr; k < na && !st; k++)
        if (!val_new(&args[k], ops[k].n))
            st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        else
            memcpy(args[k].e, ops[k].e, ops[k].n * sizeof *ops[k].e);
    LLVMValueRef zero = jit_cpu_c64(e, 0), it = NULL;
    if (!st && max_it > 0) { /* maximum_iterations: checked before the condition, as exec.c */
        it = LLVMBuildPhi(b, e->i64, "");
        LLVMAddIncoming(it, &zero, &pre, 1);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, it, jit_cpu_c64(e, max_it), ""), test,
                        exit);
    } else if (!st) {
        LLVMBuildBr(b, test);
    }
    val go = {0};
    if (!st) {
        LLVMPositionBuilderAtEnd(b, test);
        st = emit_region(c, ir_region(g, n, 0), args, na, &go);
    }
    if (!st) {
        const ir_graph *cr = ir_region(g, n, 0);
        LLVMBuildCondBr(b, truth(c, go.e[0], ir_node_get(cr, cr->outputs[0])->dtype), body, exit);
    }
    free(go.e);
    LLVMBasicBlockRef test_end = LLVMGetInsertBlock(b);
    if (!st) {
        LLVMPositionBuilderAtEnd(b, body);
        st = emit_region(c, ir_region(g, n, 1), args, na, next);
    }
    if (!st) {
        LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
        add_incoming(args, next, nr, latch);
        if (it) {
            LLVMValueRef it1 = LLVMBuildAdd(b, it, jit_cpu_c64(e, 1), "");
            LLVMAddIncoming(it, &it1, &latch, 1);
        }
        LLVMBuildBr(b, head);
        LLVMPositionBuilderAtEnd(b, exit);
        /* from the head (maximum reached) or from the test (condition false): the phis */
        st = make_phis(res, args, nr, test_end, b);
        if (!st && it)
            add_incoming(res, args, nr, head);
    }
    vals_free(args, na);
    vals_free(next, nr);
    return st;
}

/* FOR: operands start, limit, delta (i64), the carried values, the invariants; the body takes
 * i, the carried values and the invariants. */
static tj_status emit_for(cfe *c, const ir_graph *g, const ir_node *n, val *ops, val *res) {
    LLVMBuilderRef b = c->e.b;
    jit_cpu_em *e = &c->e;
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in - 2; /* i, carried..., invariants... */
    LLVMValueRef start = ops[0].e[0], limit = ops[1].e[0], delta = ops[2].e[0];
    LLVMValueRef zero = jit_cpu_c64(e, 0);
    val *args = calloc(na + 1, sizeof *args), *next = calloc(nr + 1, sizeof *next);
    if (!args || !next || !val_new(&args[0], 1)) {
        vals_free(args, na);
        free(next);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    LLVMBasicBlockRef ok = block(c, "for");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, delta, zero, ""), c->bail, ok);
    LLVMPositionBuilderAtEnd(b, ok);
    LLVMValueRef up = LLVMBuildICmp(b, LLVMIntSGT, delta, zero, "");
    LLVMBasicBlockRef head = block(c, "head"), body = block(c, "body"), exit = block(c, "done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef i = LLVMBuildPhi(b, e->i64, "");
    LLVMAddIncoming(i, &start, &ok, 1);
    args[0].e[0] = i;
    tj_status st = make_phis(args + 1, ops + 3, nr, ok, b);
    for (uint32_t k = 1 + nr; k < na && !st; k++)
        if (!val_new(&args[k], ops[k + 2].n))
            st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        else
            memcpy(args[k].e, ops[k + 2].e, ops[k + 2].n * sizeof *args[k].e);
    if (!st) {
        LLVMValueRef more = LLVMBuildSelect(b, up, LLVMBuildICmp(b, LLVMIntSLT, i, limit, ""),
                                            LLVMBuildICmp(b, LLVMIntSGT, i, limit, ""), "");
        LLVMBuildCondBr(b, more, body, exit);
        LLVMPositionBuilderAtEnd(b, body);
        st = emit_region(c, ir_region(g, n, 0), args, na, next);
    }
    if (!st) {
        LLVMValueRef pair[2] = {i, delta};
        LLVMTypeRef t = e->i64;
        LLVMValueRef s = jit_cpu_intrinsic(e, "llvm.sadd.with.overflow", &t, 1, pair, 2);
        LLVMValueRef i1 = LLVMBuildExtractValue(b, s, 0, "");
        LLVMValueRef ovf = LLVMBuildExtractValue(b, s, 1, "");
        LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
        LLVMAddIncoming(i, &i1, &latch, 1);
        add_incoming(args + 1, next, nr, latch);
        LLVMBuildCondBr(b, ovf, exit, head); /* i + delta overflowed: stop after this one */
        LLVMPositionBuilderAtEnd(b, exit);
        if (!(st = make_phis(res, args + 1, nr, head, b)))
            add_incoming(res, next, nr, latch);
    }
    vals_free(args, na);
    vals_free(next, nr);
    return st;
}

static tj_status emit_cf(cfe *c, const ir_graph *g, const ir_node *n, val *ops, val *res) {
    switch (n->op) {
    case IR_OP_COND:
        return emit_cond(c, g, n, ops, res);
    case IR_OP_WHILE:
        return emit_while(c, g, n, ops, res);
    case IR_OP_FOR:
        return emit_for(c, g, n, ops, res);
    default:
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s is not lowered natively",
                         ir_ops[n->op].name);
    }
}

tj_status jit_cpu_cf_emit(LLVMModuleRef m, const ir_graph *g, uint32_t id, const char *name,
                          const jit_cpu_opts *o) {
    cfe c;
    jit_cpu_em_init(&c.e, m, !o->no_contract, o->exact_math);
    jit_cpu_em *e = &c.e;
    LLVMBuilderRef b = e->b;
    const ir_node *n = ir_node_get(g, id);
    const uint32_t *in = ir_inputs(g, n);
    uint32_t nr = ir_cf_n_results(g, n);
    LLVMTypeRef ft = LLVMFunctionType(e->i32, &e->ptr, 1, 0);
    c.fn = LLVMAddFunction(m, name, ft);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(c.fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(e->c, nounwind, 0));
    LLVMBasicBlockRef entry = block(&c, "entry");
    c.bail = block(&c, "bail");
    LLVMPositionBuilderAtEnd(b, c.bail);
    LLVMBuildRet(b, LLVMConstInt(e->i32, 1, 0));
    LLVMPositionBuilderAtEnd(b, entry);
    val *ops = calloc((size_t)n->n_in + 1, sizeof *ops);
    val *res = calloc((size_t)nr + 1, sizeof *res);
    LLVMValueRef *ptrs = calloc((size_t)n->n_in + nr + 1, sizeof *ptrs);
    tj_status st = ops && res && ptrs ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t k = 0; k < n->n_in + nr && !st; k++) {
        LLVMValueRef idx = LLVMConstInt(e->i64, k, 0);
        ptrs[k] = LLVMBuildLoad2(
            b, e->ptr, LLVMBuildInBoundsGEP2(b, e->ptr, LLVMGetParam(c.fn, 0), &idx, 1, ""), "");
    }
    for (uint32_t k = 0; k < n->n_in && !st; k++) {
        const ir_node *x = ir_node_get(g, in[k]);
        if (!val_new(&ops[k], count(x))) {
            st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
            break;
        }
        for (uint32_t i = 0; i < ops[k].n; i++)
            ops[k].e[i] = jit_cpu_load_elem(e, ptrs[k], x->dtype, jit_cpu_c64(e, i));
    }
    if (!st)
        st = emit_cf(&c, g, n, ops, res);
    for (uint32_t k = 0; k < nr && !st; k++) {
        ir_node d;
        ir_cf_result(g, n, k, &d);
        LLVMTypeRef mt = d.dtype == TJ_BOOL ? e->i8 : jit_cpu_reg_ty(e, d.dtype);
        for (uint32_t i = 0; i < res[k].n; i++) {
            LLVMValueRef v = res[k].e[i], off = jit_cpu_c64(e, i);
            if (d.dtype == TJ_BOOL)
                v = LLVMBuildZExt(b, v, e->i8, "");
            LLVMBuildStore(b, v, LLVMBuildInBoundsGEP2(b, mt, ptrs[n->n_in + k], &off, 1, ""));
        }
    }
    if (!st)
        LLVMBuildRet(b, LLVMConstInt(e->i32, 0, 0));
    else /* half-built: the caller runs the node in the executor instead */
        LLVMDeleteFunction(c.fn);
    vals_free(ops, n->n_in);
    vals_free(res, nr);
    free(ptrs);
    LLVMDisposeBuilder(b);
    return st;
}

#endif /* TJ_HAVE_LLVM */
