/* ew_ops.c — the scalar lowering of each elementwise op for the CPU codegen: which op/dtype
 * combinations may be fused (jit_cpu_ew_supported) and the LLVM IR computing one element of a
 * node from its inputs' values (jit_cpu_emit_op). Semantics mirror runtime/kernels/ exactly: NaN
 * propagation in maximum/minimum, relu and sign keeping NaN and -0, saturating float-to-int casts,
 * wrapping integers (unsigned widths compare, extend and convert unsigned), Python's floor mod.
 * exp, log, tanh and sigmoid are vectorizable approximations (approx.c, error bounds there) unless
 * exact math is asked for; sin, cos and pow (and all four in exact mode) call the same libm
 * functions as the reference kernels (sinf for f32, sin for f64), so those results are
 * bit-identical. */
#include <stdio.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"

typedef jit_cpu_em em;

LLVMTypeRef jit_cpu_reg_ty(em *e, int dt) {
    switch (dt) {
    case TJ_F32:
        return e->f32;
    case TJ_F64:
        return e->f64;
    case TJ_I32:
        return e->i32;
    case TJ_I64:
    case TJ_U64:
        return e->i64;
    case TJ_U32:
        return e->i32;
    case TJ_I16:
    case TJ_U16:
        return e->i16;
    case TJ_I8:
    case TJ_U8:
        return e->i8;
    default:
        return e->i1;
    }
}

static LLVMValueRef fmf(em *e, LLVMValueRef v) {
    if (e->contract && LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
        LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
    return v;
}

/* Calls an intrinsic overloaded on the types tys[0..n_tys). */
static LLVMValueRef intrin(em *e, const char *name, LLVMTypeRef *tys, size_t n_tys,
                           LLVMValueRef *args, unsigned n_args) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->m, id, tys, n_tys);
    LLVMTypeRef ft = LLVMIntrinsicGetType(e->c, id, tys, n_tys);
    return LLVMBuildCall2(e->b, ft, f, args, n_args, "");
}
static LLVMValueRef intrin1(em *e, const char *name, LLVMValueRef x) {
    LLVMTypeRef t = LLVMTypeOf(x);
    return intrin(e, name, &t, 1, &x, 1);
}

/* Calls libm's `name` (float variant gets the f suffix): the same function the reference uses. */
static LLVMValueRef libm(em *e, const char *name, LLVMValueRef *args, unsigned n) {
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    char full[32];
    snprintf(full, sizeof full, "%s%s", name, t == e->f32 ? "f" : "");
    return jit_cpu_libm(e, e->b, full, t, args, n);
}

static LLVMValueRef fconst(LLVMTypeRef t, double v) {
    return LLVMConstReal(t, v);
}

static LLVMValueRef emit_cast(em *e, LLVMValueRef x, int from, int to) {
    LLVMBuilderRef b = e->b;
    if (from == to)
        return x;
    LLVMTypeRef rt = jit_cpu_reg_ty(e, to);
    if (to == TJ_BOOL) {
        if (jit_cpu_flt(from))
            return LLVMBuildFCmp(b, LLVMRealUNE, x, fconst(LLVMTypeOf(x), 0), "");
        return LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstInt(LLVMTypeOf(x), 0, 0), "");
    }
    bool uns = ir_dtype_is_unsigned(from);
    if (from == TJ_BOOL)
        return jit_cpu_flt(to) ? LLVMBuildUIToFP(b, x, rt, "") : LLVMBuildZExt(b, x, rt, "");
    if (jit_cpu_flt(from) && jit_cpu_flt(to))
        return to == TJ_F64 ? LLVMBuildFPExt(b, x, rt, "") : LLVMBuildFPTrunc(b, x, rt, "");
    if (!jit_cpu_flt(from) && jit_cpu_flt(to))
        return uns ? LLVMBuildUIToFP(b, x, rt, "") : LLVMBuildSIToFP(b, x, rt, "");
    if (jit_cpu_flt(from)) { /* saturating at the target's range, NaN -> 0, as rt_k_f2int */
        LLVMTypeRef tys[2] = {rt, LLVMTypeOf(x)};
        return intrin(e, ir_dtype_is_unsigned(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat", tys, 2,
                      &x, 1);
    }
    /* int -> int: extended by the source's signedness, or wrapped (truncated) */
    size_t fs = ir_dtype_size(from), ts = ir_dtype_size(to);
    if (fs == ts)
        return x;
    if (ts < fs)
        return LLVMBuildTrunc(b, x, rt, "");
    return uns ? LLVMBuildZExt(b, x, rt, "") : LLVMBuildSExt(b, x, rt, "");
}

/* One node's value from its inputs' values. */
LLVMValueRef jit_cpu_emit_op(em *e, const ir_node *n, int t, LLVMValueRef *a) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef ty = t >= 0 ? jit_cpu_reg_ty(e, t) : NULL;
    bool fl = jit_cpu_flt(t), bo = t == TJ_BOOL || ir_dtype_is_unsigned(t); /* unsigned compares */
    LLVMValueRef zero = ty ? (fl ? fconst(ty, 0) : LLVMConstInt(ty, 0, 0)) : NULL;
    LLVMValueRef one = ty ? (fl ? fconst(ty, 1) : LLVMConstInt(ty, 1, 0)) : NULL;
    LLVMValueRef x = a[0], y = n->n_in > 1 ? a[1] : NULL;
    switch (n->op) {
    case IR_OP_NEG:
        return fl ? LLVMBuildFNeg(b, x, "") : LLVMBuildSub(b, zero, x, "");
    case IR_OP_ABS:
        if (fl)
            return intrin1(e, "llvm.fabs", x);
        if (bo)
            return x;
        return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""),
                               LLVMBuildSub(b, zero, x, ""), x, "");
    case IR_OP_SIGN:
        if (fl)
            return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, zero, ""), one,
                                   LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, zero, ""),
                                                   fconst(ty, -1), x, ""),
                                   "");
        if (bo)
            return LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, x, zero, ""), ty, "");
        return LLVMBuildSub(b, LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSGT, x, zero, ""), ty, ""),
                            LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), ty, ""),
                            "");
    case IR_OP_RELU:
        if (fl)
            return LLVMBuildSelect(
                b, LLVMBuildFCmp(b, LLVMRealOGT, x, zero, ""), x,
                LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), x, zero, ""), "");
        return bo ? x : LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, x, zero, ""), x, zero, "");
    case IR_OP_FLOOR:
        return fl ? intrin1(e, "llvm.floor", x) : x;
    case IR_OP_CEIL:
        return fl ? intrin1(e, "llvm.ceil", x) : x;
    case IR_OP_ROUND:
        return fl ? intrin1(e, "llvm.rint", x) : x;
    case IR_OP_SQRT:
        return intrin1(e, "llvm.sqrt", x);
    case IR_OP_RSQRT:
        return LLVMBuildFDiv(b, one, intrin1(e, "llvm.sqrt", x), "");
    case IR_OP_EXP:
        return jit_cpu_emit_exp(e, x, LLVMTypeOf(x));
    case IR_OP_LOG:
        return jit_cpu_emit_log(e, x, LLVMTypeOf(x));
    case IR_OP_TANH:
        return jit_cpu_emit_tanh(e, x, LLVMTypeOf(x));
    case IR_OP_SIN:
        return libm(e, "sin", a, 1);
    case IR_OP_COS:
        return libm(e, "cos", a, 1);
    case IR_OP_ATAN:
        return libm(e, "atan", a, 1);
    case IR_OP_ASIN:
        return libm(e, "asin", a, 1);
    case IR_OP_ACOS:
        return libm(e, "acos", a, 1);
    case IR_OP_ERF:
        return libm(e, "erf", a, 1);
    case IR_OP_SIGMOID:
        return jit_cpu_emit_sigmoid(e, x, LLVMTypeOf(x));
    case IR_OP_LOGICAL_NOT:
        return LLVMBuildNot(b, x, "");
    case IR_OP_ISNAN:
        return fl ? LLVMBuildFCmp(b, LLVMRealUNO, x, x, "") : LLVMConstInt(e->i1, 0, 0);
    case IR_OP_ISINF:
        return fl ? LLVMBuildFCmp(b, LLVMRealOEQ, intrin1(e, "llvm.fabs", x),
                                  fconst(ty, __builtin_inf()), "")
                  : LLVMConstInt(e->i1, 0, 0);
    case IR_OP_CAST:
        return emit_cast(e, x, t, n->dtype);
    case IR_OP_WHERE:
        return LLVMBuildSelect(b, a[0], a[1], a[2], "");
    case IR_OP_ADD:
        return fl ? fmf(e, LLVMBuildFAdd(b, x, y, "")) : LLVMBuildAdd(b, x, y, "");
    case IR_OP_SUB:
        return fl ? fmf(e, LLVMBuildFSub(b, x, y, "")) : LLVMBuildSub(b, x, y, "");
    case IR_OP_MUL:
        return fl ? fmf(e, LLVMBuildFMul(b, x, y, "")) : LLVMBuildMul(b, x, y, "");
    case IR_OP_DIV:
        return LLVMBuildFDiv(b, x, y, "");
    case IR_OP_FLOORDIV:
        return intrin1(e, "llvm.floor", LLVMBuildFDiv(b, x, y, ""));
    case IR_OP_POW:
        return libm(e, "pow", a, 2);
    case IR_OP_MOD: { /* Python's floor mod on fmod, as fmod_py in binary.c */
        LLVMValueRef r = LLVMBuildFRem(b, x, y, "");
        LLVMValueRef flip = LLVMBuildXor(b, LLVMBuildFCmp(b, LLVMRealOLT, r, zero, ""),
                                         LLVMBuildFCmp(b, LLVMRealOLT, y, zero, ""), "");
        LLVMValueRef adj = LLVMBuildSelect(b, flip, LLVMBuildFAdd(b, r, y, ""), r, "");
        LLVMValueRef args[2] = {zero, y};
        LLVMValueRef z = intrin(e, "llvm.copysign", &ty, 1, args, 2);
        return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNE, r, zero, ""), adj, z, "");
    }
    case IR_OP_MAXIMUM:
    case IR_OP_MINIMUM: {
        bool mx = n->op == IR_OP_MAXIMUM;
        if (fl) {
            /* IEEE 754-2019: -0 < +0, as the reference kernel (operand order must not matter) */
            LLVMTypeRef xt = LLVMTypeOf(x);
            int is_vec = LLVMGetTypeKind(xt) == LLVMVectorTypeKind;
            LLVMTypeRef et = is_vec ? LLVMGetElementType(xt) : xt;
            LLVMTypeRef ity = LLVMIntTypeInContext(
                LLVMGetTypeContext(xt), LLVMGetTypeKind(et) == LLVMFloatTypeKind ? 32 : 64);
            if (is_vec)
                ity = LLVMVectorType(ity, LLVMGetVectorSize(xt));
            LLVMValueRef xneg = LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildBitCast(b, x, ity, ""),
                                              LLVMConstNull(ity), "");
            LLVMValueRef eq = LLVMBuildFCmp(b, LLVMRealOEQ, x, y, "");
            LLVMValueRef tie = LLVMBuildAnd(b, eq, mx ? LLVMBuildNot(b, xneg, "") : xneg, "");
            LLVMValueRef pick =
                LLVMBuildOr(b, LLVMBuildFCmp(b, mx ? LLVMRealOGT : LLVMRealOLT, x, y, ""), tie, "");
            LLVMValueRef v = LLVMBuildSelect(b, pick, x, y, "");
            return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, y, ""),
                                   LLVMBuildFAdd(b, x, y, ""), v, "");
        }
        LLVMIntPredicate p = mx ? (bo ? LLVMIntUGT : LLVMIntSGT) : (bo ? LLVMIntULT : LLVMIntSLT);
        return LLVMBuildSelect(b, LLVMBuildICmp(b, p, x, y, ""), x, y, "");
    }
    case IR_OP_EQ:
    case IR_OP_NE:
    case IR_OP_LT:
    case IR_OP_LE:
    case IR_OP_GT:
    case IR_OP_GE: {
        static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                               LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
        static const LLVMIntPredicate sp[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntSLT,
                                              LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
        static const LLVMIntPredicate up[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntULT,
                                              LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
        int k = n->op - IR_OP_EQ;
        if (fl)
            return LLVMBuildFCmp(b, fp[k], x, y, "");
        return LLVMBuildICmp(b, bo ? up[k] : sp[k], x, y, "");
    }
    case IR_OP_LOGICAL_AND:
        return LLVMBuildAnd(b, x, y, "");
    case IR_OP_LOGICAL_OR:
        return LLVMBuildOr(b, x, y, "");
    case IR_OP_SHIFT_LEFT:
    case IR_OP_SHIFT_RIGHT: { /* counts outside [0, bits) (unsigned compare) as binary.c */
        unsigned long long bits = 8 * ir_dtype_size(t);
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, y, LLVMConstInt(ty, bits, 0), "");
        LLVMValueRef c = LLVMBuildAnd(b, y, LLVMConstInt(ty, bits - 1, 0), "");
        if (n->op == IR_OP_SHIFT_LEFT)
            return LLVMBuildSelect(b, ok, LLVMBuildShl(b, x, c, ""), zero, "");
        if (bo)
            return LLVMBuildSelect(b, ok, LLVMBuildLShr(b, x, c, ""), zero, "");
        return LLVMBuildAShr(b, x, LLVMBuildSelect(b, ok, c, LLVMConstInt(ty, bits - 1, 0), ""),
                             "");
    }
    default:
        return NULL;
    }
}
