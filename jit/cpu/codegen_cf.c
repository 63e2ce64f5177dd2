/* codegen_cf.c — native control flow: a COND, WHILE or FOR node whose operands, results and
 * regions (nested ones included) hold only one-element values of bool, i32, i64, f32 or f64 and
 * no side effect becomes one function of straight LLVM control flow: a branch is a conditional
 * jump with phis at the join, a loop a loop whose carried values are phis, every op an
 * instruction on registers (ew_ops.c's lowering, the same as the fused kernels'). A loop
 * iteration then costs a few instructions instead of a region call per iteration (fizzbuzz over
 * 10^5: nanoseconds per iteration). What the lowering cannot decide alone it hands back: an
 * integer division by zero or a for_range step of 0 returns 1 and the executor redoes the node
 * with its region programs, which report the error with the iteration; a region is pure, so
 * running it again is safe. Semantics follow runtime/exec.c exactly: maximum_iterations is checked
 * before the condition, a for_range stops when i + delta overflows (keeping that iteration's
 * values), integer division is Python's (floor) with MIN / -1 wrapping. */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"

#ifdef TJ_HAVE_LLVM

#define CF_MAX_DEPTH 16 /* nesting of regions lowered */

static bool scalar_dt(int dt) {
    return dt == TJ_BOOL || dt == TJ_I32 || dt == TJ_I64 || dt == TJ_F32 || dt == TJ_F64;
}
static bool scalar(const ir_node *n) {
    return scalar_dt(n->dtype) && ir_numel(n->rank, n->dims) == 1;
}
static bool is_cf(int op) {
    return op == IR_OP_COND || op == IR_OP_WHILE || op == IR_OP_FOR;
}
/* integer DIV / FLOORDIV / MOD: lowered here (a zero divisor hands back), not in ew_ops.c */
static bool int_division(const ir_graph *g, const ir_node *n) {
    if ((n->op != IR_OP_DIV && n->op != IR_OP_FLOORDIV && n->op != IR_OP_MOD) || n->n_in != 2 ||
        (n->dtype != TJ_I32 && n->dtype != TJ_I64))
        return false;
    const uint32_t *in = ir_inputs(g, n);
    return ir_node_get(g, in[0])->dtype == n->dtype && ir_node_get(g, in[1])->dtype == n->dtype;
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
            if (!scalar(ir_node_get(g, in[k])))
                return false;
        if (n->op == IR_OP_FOR)
            for (int k = 0; k < 3; k++)
                if (n->n_in < 3 || ir_node_get(g, in[k])->dtype != TJ_I64)
                    return false;
        uint32_t nr = ir_cf_n_results(g, n);
        for (uint32_t k = 0; k < nr; k++) {
            ir_node d;
            if (ir_cf_result(g, n, k, &d) != TJ_OK || !scalar(&d))
                return false;
        }
        for (int k = 0; k < 2; k++) {
            const ir_graph *r = n->a.sub[k] ? ir_region(g, n, k) : NULL;
            if ((k == 0 || n->op != IR_OP_FOR) && !r)
                return false;
            if (r && !region_ok(r, depth + 1))
                return false;
        }
        return true;
    }
    if (!scalar(n))
        return false;
    switch (n->op) {
    case IR_OP_PARAM:
    case IR_OP_GET:
        return true;
    case IR_OP_CONST:
        return true; /* one element of a scalar dtype: an immediate */
    default:
        break;
    }
    for (uint32_t k = 0; k < n->n_in; k++)
        if (!scalar(ir_node_get(g, in[k])))
            return false;
    return int_division(g, n) || jit_cpu_ew_supported(g, id);
}

static bool region_ok(const ir_graph *r, int depth) {
    for (uint32_t j = 0; j < r->n_nodes; j++)
        if (!node_ok(r, j, depth))
            return false;
    for (uint32_t k = 0; k < r->n_outputs; k++)
        if (!scalar(ir_node_get(r, r->outputs[k])))
            return false;
    return r->n_effects == 0;
}

bool jit_cpu_cf_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    return is_cf(n->op) && node_ok(g, id, 0);
}

/* ---- emission -------------------------------------------------------------------------------- */
typedef struct cfe {
    jit_cpu_em e;
    LLVMValueRef fn;
    LLVMBasicBlockRef bail; /* returns 1: the executor redoes the node */
} cfe;

static LLVMBasicBlockRef block(cfe *c, const char *name) {
    return LLVMAppendBasicBlockInContext(c->e.c, c->fn, name);
}

/* x DIV / FLOORDIV / MOD y for i32/i64 as runtime/kernels/binary.c: y == 0 hands back; y == -1
 * gives 0 - x (wrapping) or 0; otherwise truncating division adjusted to the floor. */
static LLVMValueRef emit_int_division(cfe *c, const ir_node *n, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = c->e.b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0);
    LLVMValueRef m1 = LLVMConstAllOnes(t);
    LLVMBasicBlockRef ok = block(c, "div");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, y, zero, ""), c->bail, ok);
    LLVMPositionBuilderAtEnd(b, ok);
    LLVMValueRef is_m1 = LLVMBuildICmp(b, LLVMIntEQ, y, m1, "");
    LLVMValueRef ys = LLVMBuildSelect(b, is_m1, one, y, ""); /* no MIN / -1 trap */
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
    LLVMValueRef fq = LLVMBuildSelect(b, adjust, LLVMBuildSub(b, q, one, ""), q, "");
    return LLVMBuildSelect(b, is_m1, neg, fq, "");
}

/* A predicate value as i1: bools are already; numbers are true when nonzero (NaN is true). */
static LLVMValueRef truth(cfe *c, LLVMValueRef v, int dt) {
    LLVMBuilderRef b = c->e.b;
    if (dt == TJ_BOOL)
        return v;
    if (dt == TJ_F32 || dt == TJ_F64)
        return LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "");
    return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
}

static tj_status emit_cf(cfe *c, const ir_graph *g, const ir_node *n, LLVMValueRef *ops,
                         LLVMValueRef *res);

/* Emits region r at the builder's position with params bound to params[0..n_params); its
 * outputs' values go to outs. The builder ends in the block where the region's values are
 * available (nested control flow adds blocks). */
static tj_status emit_region(cfe *c, const ir_graph *r, LLVMValueRef *params, uint32_t n_params,
                             LLVMValueRef *outs) {
    LLVMValueRef *v = calloc((size_t)r->n_nodes + 1, sizeof *v);
    LLVMValueRef **multi = calloc((size_t)r->n_nodes + 1, sizeof *multi);
    tj_status st = v && multi ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t j = 0; j < r->n_nodes && !st; j++) {
        const ir_node *n = ir_node_get(r, j);
        const uint32_t *in = ir_inputs(r, n);
        LLVMValueRef a[3] = {NULL, NULL, NULL};
        for (uint32_t k = 0; k < n->n_in && k < 3; k++)
            a[k] = v[in[k]];
        switch (n->op) {
        case IR_OP_PARAM:
            if ((uint64_t)n->a.i[0] >= n_params)
                st = ir_errorf(TJ_ERR_INVALID, "cpu jit: region param %lld of %u",
                               (long long)n->a.i[0], n_params);
            else
                v[j] = params[n->a.i[0]];
            break;
        case IR_OP_CONST:
            if (!(v[j] = jit_cpu_const_scalar(&c->e, r, n)))
                st = ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: const %%%u is not a scalar", j);
            break;
        case IR_OP_GET:
            if (!multi[in[0]] || (uint64_t)n->a.i[0] >= ir_cf_n_results(r, ir_node_get(r, in[0])))
                st = ir_errorf(TJ_ERR_INVALID, "cpu jit: get %%%u of a value with no results", j);
            else
                v[j] = multi[in[0]][n->a.i[0]];
            break;
        case IR_OP_COND:
        case IR_OP_WHILE:
        case IR_OP_FOR: {
            LLVMValueRef *ops = calloc((size_t)n->n_in + 1, sizeof *ops);
            multi[j] = calloc((size_t)ir_cf_n_results(r, n) + 1, sizeof *multi[j]);
            if (!ops || !multi[j]) {
                free(ops);
                st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
                break;
            }
            for (uint32_t k = 0; k < n->n_in; k++)
                ops[k] = v[in[k]];
            st = emit_cf(c, r, n, ops, multi[j]);
            free(ops);
            break;
        }
        default:
            if (int_division(r, n)) {
                v[j] = emit_int_division(c, n, a[0], a[1]);
            } else {
                int t = n->n_in ? ir_node_get(r, in[n->op == IR_OP_WHERE ? 1 : 0])->dtype : -1;
                if (!(v[j] = jit_cpu_emit_op(&c->e, n, t, a)))
                    st = ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: no scalar lowering",
                                   ir_ops[n->op].name);
            }
        }
    }
    for (uint32_t k = 0; k < r->n_outputs && !st; k++)
        if (!(outs[k] = v[r->outputs[k]]))
            st = ir_errorf(TJ_ERR_INVALID, "cpu jit: region output %u has no value", k);
    for (uint32_t j = 0; multi && j < r->n_nodes; j++)
        free(multi[j]);
    free(multi);
    free(v);
    return st;
}

/* phis[k] in the current block, one per value type of vals */
static void make_phis(cfe *c, LLVMValueRef *phis, LLVMValueRef *vals, uint32_t n,
                      LLVMBasicBlockRef from) {
    for (uint32_t k = 0; k < n; k++) {
        phis[k] = LLVMBuildPhi(c->e.b, LLVMTypeOf(vals[k]), "");
        LLVMAddIncoming(phis[k], &vals[k], &from, 1);
    }
}
static void add_incoming(LLVMValueRef *phis, LLVMValueRef *vals, uint32_t n,
                         LLVMBasicBlockRef from) {
    for (uint32_t k = 0; k < n; k++)
        LLVMAddIncoming(phis[k], &vals[k], &from, 1);
}

static tj_status emit_cond(cfe *c, const ir_graph *g, const ir_node *n, LLVMValueRef *ops,
                           LLVMValueRef *res) {
    LLVMBuilderRef b = c->e.b;
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in - 1;
    int pdt = ir_node_get(g, ir_inputs(g, n)[0])->dtype;
    LLVMBasicBlockRef bt = block(c, "then"), be = block(c, "else"), join = block(c, "join");
    LLVMBuildCondBr(b, truth(c, ops[0], pdt), bt, be);
    LLVMValueRef *rv[2] = {calloc(nr + 1, sizeof(LLVMValueRef)),
                           calloc(nr + 1, sizeof(LLVMValueRef))};
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
        make_phis(c, res, rv[0], nr, ends[0]);
        add_incoming(res, rv[1], nr, ends[1]);
    }
    free(rv[0]);
    free(rv[1]);
    return st;
}

/* WHILE: operands are the carried values then the invariants; both regions take them all. */
static tj_status emit_while(cfe *c, const ir_graph *g, const ir_node *n, LLVMValueRef *ops,
                            LLVMValueRef *res) {
    LLVMBuilderRef b = c->e.b;
    jit_cpu_em *e = &c->e;
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in;
    int64_t max_it = n->a.i[0];
    LLVMValueRef *args = calloc(na + 1, sizeof *args), *next = calloc(nr + 1, sizeof *next);
    if (!args || !next) {
        free(args);
        free(next);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    memcpy(args, ops, na * sizeof *args);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b), head = block(c, "while"),
                      test = block(c, "test"), body = block(c, "body"), exit = block(c, "done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    make_phis(c, args, ops, nr, pre); /* the carried values; the invariants stay as they are */
    LLVMValueRef zero = jit_cpu_c64(e, 0), it = NULL;
    if (max_it > 0) { /* maximum_iterations: checked before the condition, as exec.c */
        it = LLVMBuildPhi(b, e->i64, "");
        LLVMAddIncoming(it, &zero, &pre, 1);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, it, jit_cpu_c64(e, max_it), ""), test,
                        exit);
    } else {
        LLVMBuildBr(b, test);
    }
    LLVMPositionBuilderAtEnd(b, test);
    LLVMValueRef go;
    tj_status st = emit_region(c, ir_region(g, n, 0), args, na, &go);
    if (!st) {
        const ir_graph *cr = ir_region(g, n, 0);
        LLVMBuildCondBr(b, truth(c, go, ir_node_get(cr, cr->outputs[0])->dtype), body, exit);
    }
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
        make_phis(c, res, args, nr, test_end);
        if (it)
            add_incoming(res, args, nr, head);
    }
    free(args);
    free(next);
    return st;
}

/* FOR: operands start, limit, delta (i64), the carried values, the invariants; the body takes
 * i, the carried values and the invariants. */
static tj_status emit_for(cfe *c, const ir_graph *g, const ir_node *n, LLVMValueRef *ops,
                          LLVMValueRef *res) {
    LLVMBuilderRef b = c->e.b;
    jit_cpu_em *e = &c->e;
    uint32_t nr = ir_cf_n_results(g, n), na = n->n_in - 2; /* i, carried..., invariants... */
    LLVMValueRef start = ops[0], limit = ops[1], delta = ops[2], zero = jit_cpu_c64(e, 0);
    LLVMValueRef *args = calloc(na + 1, sizeof *args), *next = calloc(nr + 1, sizeof *next);
    if (!args || !next) {
        free(args);
        free(next);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    memcpy(args + 1, ops + 3, (na - 1) * sizeof *args);
    LLVMBasicBlockRef ok = block(c, "for");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, delta, zero, ""), c->bail, ok);
    LLVMPositionBuilderAtEnd(b, ok);
    LLVMValueRef up = LLVMBuildICmp(b, LLVMIntSGT, delta, zero, "");
    LLVMBasicBlockRef head = block(c, "head"), body = block(c, "body"), exit = block(c, "done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef i = LLVMBuildPhi(b, e->i64, "");
    LLVMAddIncoming(i, &start, &ok, 1);
    make_phis(c, args + 1, ops + 3, nr, ok);
    args[0] = i;
    LLVMValueRef more = LLVMBuildSelect(b, up, LLVMBuildICmp(b, LLVMIntSLT, i, limit, ""),
                                        LLVMBuildICmp(b, LLVMIntSGT, i, limit, ""), "");
    LLVMBuildCondBr(b, more, body, exit);
    LLVMPositionBuilderAtEnd(b, body);
    tj_status st = emit_region(c, ir_region(g, n, 0), args, na, next);
    if (!st) {
        LLVMValueRef pair[2] = {i, delta};
        LLVMTypeRef t = e->i64;
        LLVMValueRef s = jit_cpu_intrinsic(e, "llvm.sadd.with.overflow", &t, 1, pair, 2);
        LLVMValueRef i1 = LLVMBuildExtractValue(b, s, 0, ""),
                     ovf = LLVMBuildExtractValue(b, s, 1, "");
        LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
        LLVMAddIncoming(i, &i1, &latch, 1);
        add_incoming(args + 1, next, nr, latch);
        LLVMBuildCondBr(b, ovf, exit, head); /* i + delta overflowed: stop after this one */
        LLVMPositionBuilderAtEnd(b, exit);
        make_phis(c, res, args + 1, nr, head);
        add_incoming(res, next, nr, latch);
    }
    free(args);
    free(next);
    return st;
}

static tj_status emit_cf(cfe *c, const ir_graph *g, const ir_node *n, LLVMValueRef *ops,
                         LLVMValueRef *res) {
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
    LLVMValueRef *ops = calloc((size_t)n->n_in + 1, sizeof *ops);
    LLVMValueRef *res = calloc((size_t)nr + 1, sizeof *res);
    LLVMValueRef *ptrs = calloc((size_t)n->n_in + nr + 1, sizeof *ptrs);
    tj_status st = ops && res && ptrs ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t k = 0; k < n->n_in + nr && !st; k++) {
        LLVMValueRef idx = LLVMConstInt(e->i64, k, 0);
        ptrs[k] = LLVMBuildLoad2(
            b, e->ptr, LLVMBuildInBoundsGEP2(b, e->ptr, LLVMGetParam(c.fn, 0), &idx, 1, ""), "");
    }
    for (uint32_t k = 0; k < n->n_in && !st; k++)
        ops[k] = jit_cpu_load_elem(e, ptrs[k], ir_node_get(g, in[k])->dtype, jit_cpu_c64(e, 0));
    if (!st)
        st = emit_cf(&c, g, n, ops, res);
    for (uint32_t k = 0; k < nr && !st; k++) {
        ir_node d;
        ir_cf_result(g, n, k, &d);
        LLVMValueRef v = res[k];
        if (d.dtype == TJ_BOOL)
            v = LLVMBuildZExt(b, v, e->i8, "");
        LLVMBuildStore(b, v, ptrs[n->n_in + k]);
    }
    if (!st)
        LLVMBuildRet(b, LLVMConstInt(e->i32, 0, 0));
    else /* half-built: the caller runs the node in the executor instead */
        LLVMDeleteFunction(c.fn);
    free(ops);
    free(res);
    free(ptrs);
    LLVMDisposeBuilder(b);
    return st;
}

#endif /* TJ_HAVE_LLVM */
