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

#include "jit/cpu/llvm/codegen_cf.h"
#include "runtime/kernels/kernels.h"

static bool val_new(val *v, int64_t n) {
    v->n = (uint32_t)n;
    v->e = calloc((size_t)n + 1, sizeof *v->e);
    return v->e != NULL;
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
                v[j].e[k] = jit_cf_const_elem(c, r, n, k);
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
                jit_cf_reduce(c, n, x, &v[in[0]], &v[j]);
                break;
            }
            if (n->n_in == 1 && is_view(n->op)) {
                st = jit_cf_view(n, x, &v[in[0]], &v[j]);
                break;
            }
            int t = n->n_in ? ir_node_get(r, in[n->op == IR_OP_WHERE ? 1 : 0])->dtype : -1;
            for (uint32_t o = 0; o < v[j].n && !st; o++) {
                LLVMValueRef a[3] = {NULL, NULL, NULL};
                for (uint32_t k = 0; k < n->n_in && k < 3; k++) {
                    const ir_node *ik = ir_node_get(r, in[k]);
                    a[k] = v[in[k]].e[jit_cf_bcast_index(n->rank, n->dims, ik->rank, ik->dims, o)];
                }
                if (int_division(r, n))
                    v[j].e[o] = jit_cf_int_division(c, n, a[0], a[1]);
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
    LLVMBasicBlockRef bt = jit_cf_block(c, "then"), be = jit_cf_block(c, "else"),
                      join = jit_cf_block(c, "join");
    LLVMBuildCondBr(b, jit_cf_truth(c, ops[0].e[0], pdt), bt, be);
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
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b), head = jit_cf_block(c, "while"),
                      test = jit_cf_block(c, "test"), body = jit_cf_block(c, "body"),
                      exit = jit_cf_block(c, "done");
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
        LLVMBuildCondBr(b, jit_cf_truth(c, go.e[0], ir_node_get(cr, cr->outputs[0])->dtype), body,
                        exit);
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
    LLVMBasicBlockRef ok = jit_cf_block(c, "for");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, delta, zero, ""), c->bail, ok);
    LLVMPositionBuilderAtEnd(b, ok);
    LLVMValueRef up = LLVMBuildICmp(b, LLVMIntSGT, delta, zero, "");
    LLVMBasicBlockRef head = jit_cf_block(c, "head"), body = jit_cf_block(c, "body"),
                      exit = jit_cf_block(c, "done");
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
    LLVMBasicBlockRef entry = jit_cf_block(&c, "entry");
    c.bail = jit_cf_block(&c, "bail");
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
