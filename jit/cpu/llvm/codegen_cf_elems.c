/* codegen_cf_elems.c — the element-level pieces of the native control-flow lowering
 * (codegen_cf.c): values are tiny tensors held as one LLVM value per element, so broadcasting,
 * reductions and views are index maps computed while emitting, and integer division is Python's
 * with a hand-back to the executor on a zero divisor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/llvm/codegen_cf.h"
#include "runtime/kernels/kernels.h"

/* The element of an input of dims (ir, idims) that output element o of (orank, odims) reads
 * under NumPy broadcasting. */
int64_t jit_cf_bcast_index(int orank, const int64_t *odims, int ir, const int64_t *idims,
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

/* x DIV / FLOORDIV / MOD y for i32/i64 as runtime/kernels/binary.c: y == 0 hands back; y == -1
 * gives 0 - x (wrapping) or 0; otherwise truncating division adjusted to the floor. */
LLVMValueRef jit_cf_int_division(cfe *c, const ir_node *n, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = c->e.b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one_ = LLVMConstInt(t, 1, 0);
    LLVMValueRef m1 = LLVMConstAllOnes(t);
    LLVMBasicBlockRef ok = jit_cf_block(c, "div");
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
LLVMValueRef jit_cf_truth(cfe *c, LLVMValueRef v, int dt) {
    LLVMBuilderRef b = c->e.b;
    if (dt == TJ_BOOL)
        return v;
    if (ir_dtype_is_float(dt))
        return LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "");
    return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
}

/* Element k of a CONST node as an immediate. */
LLVMValueRef jit_cf_const_elem(cfe *c, const ir_graph *g, const ir_node *n, int64_t k) {
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
void jit_cf_reduce(cfe *c, const ir_node *n, const ir_node *x, const val *xv, val *out) {
    jit_cpu_em *e = &c->e;
    LLVMBuilderRef b = e->b;
    bool red[IR_MAX_RANK] = {false};
    for (uint32_t k = 0; k < n->a.n_list; k++)
        red[n->a.list[k]] = true;
    if (n->a.n_list == 0 && ir_numel(x->rank, x->dims) != ir_numel(n->rank, n->dims))
        for (int d = 0; d < x->rank; d++)
            red[d] = true;
    int64_t ostr[IR_MAX_RANK], s = 1, cnt = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostr[d] = red[d] ? 0 : s;
        s *= red[d] ? 1 : x->dims[d];
        cnt *= red[d] ? x->dims[d] : 1;
    }
    bool fl = ir_dtype_is_float(x->dtype);
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
    for (int64_t i = 0; i < ir_numel(x->rank, x->dims); i++) {
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
tj_status jit_cf_view(const ir_node *n, const ir_node *x, const val *xv, val *out) {
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
