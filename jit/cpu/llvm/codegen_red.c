/* codegen_red.c — generated reductions. A reduce group (passes/fusion.c) computes its
 * elementwise producers in registers inside the reduction loop, so no intermediate buffer
 * exists. Handled: SUM MEAN MAX MIN PROD of f32/f64/i32/i64 over adjacent axes (ignoring size-1
 * axes): a suffix (rows, or everything; units of work are output elements) or axes followed by
 * kept ones (units are blocks of output elements, accumulated row by row). Semantics are the
 * reference kernel's (runtime/kernels/reduce.c): floats accumulate in double, integers wrap in
 * their width (equal to the reference's uint64 sum truncated). With no_contract the float
 * accumulation is sequential, in input order (bit-identical); by default it may be reassociated
 * (vectorised partial sums, still in double), and MAX/MIN use llvm.maximum/minimum (NaN
 * propagates; only the sign of a zero maximum may differ). Softmax is in codegen_softmax.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"

typedef jit_cpu_em em;

#define c64 jit_cpu_c64
typedef jit_cpu_loop loop;
#define loop_begin jit_cpu_loop_begin
#define loop_end jit_cpu_loop_end

#define intrin2 jit_cpu_intrin2
#define fast jit_cpu_fast
#define load_at jit_cpu_load_elem

/* The value of the reduction's input at element `off` of the loop shape. */
static LLVMValueRef eval_group(em *e, const ir_graph *g, const pass_group *gr, LLVMValueRef *ptrs,
                               LLVMValueRef *pre, LLVMValueRef off, LLVMValueRef *vals) {
    const ir_node *root = ir_node_get(g, gr->nodes[gr->n_nodes - 1]);
    uint32_t want = ir_inputs(g, root)[0];
    LLVMValueRef *inv = vals + gr->n_nodes;
    for (uint32_t i = 0; i < gr->n_inputs; i++)
        inv[i] = pre[i] ? pre[i] : load_at(e, ptrs[i], ir_node_get(g, gr->inputs[i])->dtype, off);
    for (uint32_t k = 0; k + 1 < gr->n_nodes; k++) {
        const ir_node *n = ir_node_get(g, gr->nodes[k]);
        const uint32_t *in = ir_inputs(g, n);
        LLVMValueRef a[3] = {NULL, NULL, NULL};
        for (uint32_t j = 0; j < n->n_in && j < 3; j++) {
            for (uint32_t i = 0; i < gr->n_inputs; i++)
                if (gr->inputs[i] == in[j])
                    a[j] = inv[i];
            for (uint32_t q = 0; q < k && !a[j]; q++)
                if (gr->nodes[q] == in[j])
                    a[j] = vals[q];
        }
        int t = n->n_in ? ir_node_get(g, in[n->op == IR_OP_WHERE ? 1 : 0])->dtype : -1;
        if (!(vals[k] = jit_cpu_emit_op(e, n, t, a)))
            return NULL;
    }
    for (uint32_t i = 0; i < gr->n_inputs; i++)
        if (gr->inputs[i] == want)
            return inv[i];
    for (uint32_t k = 0; k + 1 < gr->n_nodes; k++)
        if (gr->nodes[k] == want)
            return vals[k];
    return NULL;
}

/* The reduction's parts: accumulator type and start, one step, the final value. */
typedef struct red_ops {
    int op;
    bool fl, strict, uns; /* uns: an unsigned integer dtype (compares and divides unsigned) */
    LLVMTypeRef t, at;    /* the result type; the accumulator's (double for float SUM/MEAN/PROD) */
    LLVMValueRef init;
    int64_t len;        /* the reduced length; -1: at run time, len_v */
    LLVMValueRef len_v; /* i64 */
} red_ops;

static red_ops red_ops_make(em *e, int op, int dt, bool strict, int64_t len, LLVMValueRef len_v) {
    red_ops r = {.op = op,
                 .fl = ir_dtype_is_float(dt),
                 .strict = strict,
                 .uns = ir_dtype_is_unsigned(dt),
                 .len = len,
                 .len_v = len_v};
    r.t = jit_cpu_reg_ty(e, dt);
    r.at = r.fl && (op == IR_OP_SUM || op == IR_OP_MEAN || op == IR_OP_PROD) ? e->f64 : r.t;
    if (op == IR_OP_MAX || op == IR_OP_MIN) {
        /* the width's smallest / largest value: unsigned 0 / all ones, signed 10..0 / 01..1 */
        unsigned long long top = 1ull << (8 * ir_dtype_size(dt) - 1);
        unsigned long long lo = r.uns ? 0 : top, hi = r.uns ? ~0ull : top - 1;
        r.init = r.fl ? LLVMConstReal(r.at, op == IR_OP_MAX ? -INFINITY : INFINITY)
                      : LLVMConstInt(r.at, op == IR_OP_MAX ? lo : hi, 0);
    } else
        r.init =
            r.fl ? LLVMConstReal(r.at, op == IR_OP_PROD) : LLVMConstInt(r.at, op == IR_OP_PROD, 0);
    return r;
}

/* acc combined with input value v (of type t). */
static LLVMValueRef red_step(em *e, const red_ops *r, LLVMValueRef acc, LLVMValueRef v) {
    LLVMBuilderRef b = e->b;
    LLVMFastMathFlags ff = r->strict ? 0 : LLVMFastMathAllowReassoc;
    if (r->at != r->t)
        v = LLVMBuildFPExt(b, v, r->at, "");
    switch (r->op) {
    case IR_OP_PROD: /* never reassociated: lanes of partial products can turn a 0 or an inf
                        that input order keeps into 0 * inf = NaN */
        return r->fl ? LLVMBuildFMul(b, acc, v, "") : LLVMBuildMul(b, acc, v, "");
    case IR_OP_MAX:
    case IR_OP_MIN: {
        bool mx = r->op == IR_OP_MAX;
        if (r->fl && !r->strict)
            return intrin2(e, mx ? "llvm.maximum" : "llvm.minimum", acc, v);
        if (r->fl) { /* (v > a || v != v) ? v : a, as the reference */
            LLVMValueRef c =
                LLVMBuildOr(b, LLVMBuildFCmp(b, mx ? LLVMRealOGT : LLVMRealOLT, v, acc, ""),
                            LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "");
            return LLVMBuildSelect(b, c, v, acc, "");
        }
        LLVMIntPredicate p =
            mx ? (r->uns ? LLVMIntUGT : LLVMIntSGT) : (r->uns ? LLVMIntULT : LLVMIntSLT);
        return LLVMBuildSelect(b, LLVMBuildICmp(b, p, v, acc, ""), v, acc, "");
    }
    default:
        return r->fl ? fast(LLVMBuildFAdd(b, acc, v, ""), ff) : LLVMBuildAdd(b, acc, v, "");
    }
}

/* The output value (type t) of a finished accumulator. */
static LLVMValueRef red_finish(em *e, const red_ops *r, LLVMValueRef acc) {
    LLVMBuilderRef b = e->b;
    if (r->op == IR_OP_MEAN && r->len < 0) { /* the length at run time; 0: NaN, or the sum */
        LLVMValueRef zero = LLVMBuildICmp(b, LLVMIntEQ, r->len_v, c64(e, 0), "");
        if (r->fl) /* 0 / 0 */
            acc = LLVMBuildFDiv(b, acc, LLVMBuildSIToFP(b, r->len_v, r->at, ""), "");
        else {
            LLVMValueRef d = LLVMBuildSelect(b, zero, c64(e, 1), r->len_v, "");
            LLVMValueRef w =
                r->uns ? LLVMBuildZExt(b, acc, e->i64, "") : LLVMBuildSExt(b, acc, e->i64, "");
            w = r->uns ? LLVMBuildUDiv(b, w, d, "") : LLVMBuildSDiv(b, w, d, "");
            acc = LLVMBuildTrunc(b, w, r->t, "");
        }
    } else if (r->op == IR_OP_MEAN) {
        if (r->fl)
            acc = r->len ? LLVMBuildFDiv(b, acc, LLVMConstReal(r->at, (double)r->len), "")
                         : LLVMConstReal(r->at, NAN);
        else if (r->len && r->uns) /* the wrapped sum divided, truncating */
            acc = LLVMBuildTrunc(
                b, LLVMBuildUDiv(b, LLVMBuildZExt(b, acc, e->i64, ""), c64(e, r->len), ""), r->t,
                "");
        else if (r->len)
            acc = LLVMBuildTrunc(
                b, LLVMBuildSDiv(b, LLVMBuildSExt(b, acc, e->i64, ""), c64(e, r->len), ""), r->t,
                "");
    }
    return r->at != r->t ? LLVMBuildFPTrunc(b, acc, r->t, "") : acc;
}

tj_status jit_cpu_red_emit(LLVMModuleRef m, const ir_graph *g, const pass_group *gr,
                           const char *name, const jit_cpu_opts *o, bool generic, rt_units *plan) {
    const ir_node *root = ir_node_get(g, gr->nodes[gr->n_nodes - 1]);
    int64_t outer, len, inner;
    if (!gr->reduce || !jit_cpu_red_geometry(g, root, &outer, &len, &inner))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: reduction not generated",
                         ir_ops[root->op].name);
    if (jit_cpu_red_units(g, gr, plan))
        return ir_last_code();
    int64_t n_blocks = (inner + JIT_CPU_RED_BLOCK - 1) / JIT_CPU_RED_BLOCK;
    em E;
    jit_cpu_em_init(&E, m, !o->no_contract, o->exact_math);
    em *e = &E;
    LLVMBuilderRef b = e->b;
    uint32_t ni = gr->n_inputs;
    LLVMValueRef *ptrs = calloc(ni + 2, sizeof *ptrs), *pre = calloc(ni + 1, sizeof *pre);
    LLVMValueRef *vals = calloc(gr->n_nodes + ni + 1, sizeof *vals);
    if (!ptrs || !pre || !vals) {
        free(ptrs);
        free(pre);
        free(vals);
        LLVMDisposeBuilder(b);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    /* shape-generic: the reduced length from the block after the output */
    LLVMValueRef fn = jit_cpu_kernel_begin(e, name, ni + 1 + generic, ptrs);
    LLVMValueRef len_v = generic ? LLVMBuildLoad2(b, e->i64, ptrs[ni + 1], "len") : c64(e, len);
    for (uint32_t i = 0; i < ni; i++) {
        const ir_node *x = ir_node_get(g, gr->inputs[i]);
        if (ir_numel(x->rank, x->dims) == 1 && len * outer * inner != 1)
            pre[i] = load_at(e, ptrs[i], x->dtype, c64(e, 0));
    }
    red_ops r = red_ops_make(e, root->op, root->dtype, o->no_contract, generic ? -1 : len, len_v);
    LLVMValueRef accs = NULL;
    if (inner > 1) {
        accs = LLVMBuildAlloca(b, LLVMArrayType2(r.at, JIT_CPU_RED_BLOCK), "acc");
        LLVMSetAlignment(accs, 64);
    }
    tj_status st = TJ_OK;
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->c, fn, "rows");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    loop u = loop_begin(e, fn, begin);
#define VALUE_AT(off)                                                                              \
    do {                                                                                           \
        if (!(v = eval_group(e, g, gr, ptrs, pre, (off), vals))) {                                 \
            st = ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: a producer has no lowering",          \
                           ir_ops[r.op].name);                                                     \
            v = LLVMConstNull(r.t);                                                                \
        }                                                                                          \
    } while (0)
    LLVMValueRef v;
    if (inner == 1) { /* out[o] = R_k x[o, k]: the accumulator in a register */
        LLVMValueRef acc = r.init;
        LLVMBasicBlockRef from = NULL, after = NULL; /* generic: the loop only when len > 0 */
        if (generic) {
            LLVMBasicBlockRef krow = LLVMAppendBasicBlockInContext(e->c, fn, "krow");
            after = LLVMAppendBasicBlockInContext(e->c, fn, "kend");
            from = LLVMGetInsertBlock(b);
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, len_v, c64(e, 0), ""), krow, after);
            LLVMPositionBuilderAtEnd(b, krow);
        }
        if (len > 0 || generic) {
            LLVMValueRef base = LLVMBuildNSWMul(b, u.i, len_v, "");
            LLVMBasicBlockRef pre_bb = LLVMGetInsertBlock(b);
            loop l = loop_begin(e, fn, c64(e, 0));
            LLVMValueRef phi = LLVMBuildPhi(b, r.at, "acc");
            LLVMAddIncoming(phi, &r.init, &pre_bb, 1);
            VALUE_AT(LLVMBuildNSWAdd(b, base, l.i, ""));
            LLVMValueRef nacc = red_step(e, &r, phi, v);
            LLVMBasicBlockRef latch = loop_end(e, fn, &l, len_v);
            LLVMAddIncoming(phi, &nacc, &latch, 1);
            acc = nacc;
        }
        if (generic) { /* the accumulator: its start when the loop did not run */
            LLVMBasicBlockRef last = LLVMGetInsertBlock(b);
            LLVMBuildBr(b, after);
            LLVMPositionBuilderAtEnd(b, after);
            LLVMValueRef phi = LLVMBuildPhi(b, r.at, "accr");
            LLVMAddIncoming(phi, &r.init, &from, 1);
            LLVMAddIncoming(phi, &acc, &last, 1);
            acc = phi;
        }
        LLVMBuildStore(b, red_finish(e, &r, acc),
                       LLVMBuildInBoundsGEP2(b, r.t, ptrs[ni], &u.i, 1, ""));
    } else { /* out[o, i0 + i] = R_k x[o, k, i0 + i] for i < cnt, accumulators in accs */
        LLVMValueRef nb = c64(e, n_blocks);
        LLVMValueRef oi = LLVMBuildSDiv(b, u.i, nb, ""), bi = LLVMBuildSRem(b, u.i, nb, "");
        LLVMValueRef i0 = LLVMBuildNSWMul(b, bi, c64(e, JIT_CPU_RED_BLOCK), "");
        LLVMValueRef left = LLVMBuildNSWSub(b, c64(e, inner), i0, "");
        LLVMValueRef cnt =
            LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, c64(e, JIT_CPU_RED_BLOCK), ""),
                            left, c64(e, JIT_CPU_RED_BLOCK), "");
#define ACC_AT(i) LLVMBuildInBoundsGEP2(b, r.at, accs, (LLVMValueRef[]){i}, 1, "")
        loop li = loop_begin(e, fn, c64(e, 0));
        LLVMBuildStore(b, r.init, ACC_AT(li.i));
        loop_end(e, fn, &li, cnt);
        LLVMBasicBlockRef rows = NULL, after = NULL; /* generic: rows only when len > 0 */
        if (generic) {
            rows = LLVMAppendBasicBlockInContext(e->c, fn, "krows");
            after = LLVMAppendBasicBlockInContext(e->c, fn, "kdone");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, len_v, c64(e, 0), ""), rows, after);
            LLVMPositionBuilderAtEnd(b, rows);
        }
        if (len > 0 || generic) {
            loop lk = loop_begin(e, fn, c64(e, 0));
            LLVMValueRef row = LLVMBuildNSWAdd(
                b,
                LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oi, len_v, ""), lk.i, ""),
                                c64(e, inner), ""),
                i0, "");
            loop l2 = loop_begin(e, fn, c64(e, 0));
            VALUE_AT(LLVMBuildNSWAdd(b, row, l2.i, ""));
            LLVMValueRef ap = ACC_AT(l2.i);
            LLVMBuildStore(b, red_step(e, &r, LLVMBuildLoad2(b, r.at, ap, ""), v), ap);
            loop_end(e, fn, &l2, cnt);
            /* unrolled (a block of 32 is a constant 32 iterations), the k loop around it became
             * the innermost and was vectorized with reassociated sums over gathers 128 bytes
             * apart: the seed CNN's first bias gradient, 39200 x 32, took 4 ms on one thread */
            jit_cpu_loop_no_unroll(e, &l2);
            loop_end(e, fn, &lk, len_v);
        }
        if (generic) {
            LLVMBuildBr(b, after);
            LLVMPositionBuilderAtEnd(b, after);
        }
        LLVMValueRef obase = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oi, c64(e, inner), ""), i0, "");
        loop lo = loop_begin(e, fn, c64(e, 0));
        LLVMValueRef off = LLVMBuildNSWAdd(b, obase, lo.i, "");
        LLVMBuildStore(b, red_finish(e, &r, LLVMBuildLoad2(b, r.at, ACC_AT(lo.i), "")),
                       LLVMBuildInBoundsGEP2(b, r.t, ptrs[ni], &off, 1, ""));
        loop_end(e, fn, &lo, cnt);
#undef ACC_AT
    }
#undef VALUE_AT
    loop_end(e, fn, &u, end);
    jit_cpu_kernel_end(e, done);
    free(ptrs);
    free(pre);
    free(vals);
    return st;
}
