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

/* What one element's lowering sees: the emitter, the node, the operands' dtype t (input 0's, or
 * input 1's for where) and register type, whether t is f32/f64 (fl) or compares unsigned (bo),
 * its 0 and 1, and the operands' values (x, y: the first two of a). */
typedef struct ew_args {
    em *e;
    LLVMBuilderRef b;
    const ir_node *n;
    int t;
    LLVMTypeRef ty;
    bool fl, bo;
    LLVMValueRef zero, one, x, y, *a;
} ew_args;

/* broadcast_to: the loop reads its input with broadcast strides, so each element is the input's */
static LLVMValueRef lower_identity(ew_args *c) {
    return c->x;
}

static LLVMValueRef lower_neg(ew_args *c) {
    return c->fl ? LLVMBuildFNeg(c->b, c->x, "") : LLVMBuildSub(c->b, c->zero, c->x, "");
}

static LLVMValueRef lower_abs(ew_args *c) {
    if (c->fl)
        return intrin1(c->e, "llvm.fabs", c->x);
    if (c->bo)
        return c->x;
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, c->x, c->zero, ""),
                           LLVMBuildSub(c->b, c->zero, c->x, ""), c->x, "");
}

static LLVMValueRef lower_sign(ew_args *c) {
    if (c->fl)
        return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, c->x, c->zero, ""), c->one,
                               LLVMBuildSelect(c->b,
                                               LLVMBuildFCmp(c->b, LLVMRealOLT, c->x, c->zero, ""),
                                               fconst(c->ty, -1), c->x, ""),
                               "");
    if (c->bo)
        return LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntNE, c->x, c->zero, ""), c->ty, "");
    return LLVMBuildSub(
        c->b, LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, c->x, c->zero, ""), c->ty, ""),
        LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, c->x, c->zero, ""), c->ty, ""), "");
}

static LLVMValueRef lower_relu(ew_args *c) {
    if (c->fl)
        return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, c->x, c->zero, ""), c->x,
                               LLVMBuildSelect(c->b,
                                               LLVMBuildFCmp(c->b, LLVMRealUNO, c->x, c->x, ""),
                                               c->x, c->zero, ""),
                               "");
    return c->bo ? c->x
                 : LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, c->x, c->zero, ""), c->x,
                                   c->zero, "");
}

static LLVMValueRef lower_floor(ew_args *c) {
    return c->fl ? intrin1(c->e, "llvm.floor", c->x) : c->x;
}

static LLVMValueRef lower_ceil(ew_args *c) {
    return c->fl ? intrin1(c->e, "llvm.ceil", c->x) : c->x;
}

static LLVMValueRef lower_round(ew_args *c) {
    return c->fl ? intrin1(c->e, "llvm.rint", c->x) : c->x;
}

static LLVMValueRef lower_sqrt(ew_args *c) {
    return intrin1(c->e, "llvm.sqrt", c->x);
}

static LLVMValueRef lower_rsqrt(ew_args *c) {
    return LLVMBuildFDiv(c->b, c->one, intrin1(c->e, "llvm.sqrt", c->x), "");
}

static LLVMValueRef lower_exp(ew_args *c) {
    return jit_cpu_emit_exp(c->e, c->x, LLVMTypeOf(c->x));
}

static LLVMValueRef lower_log(ew_args *c) {
    return jit_cpu_emit_log(c->e, c->x, LLVMTypeOf(c->x));
}

static LLVMValueRef lower_tanh(ew_args *c) {
    return jit_cpu_emit_tanh(c->e, c->x, LLVMTypeOf(c->x));
}

/* sin, cos, atan, asin, acos, erf, pow: libm's function of the op's name, as the reference
 * kernel calls it */
static LLVMValueRef lower_libm(ew_args *c) {
    return libm(c->e, ir_ops[c->n->op].name, c->a, c->n->n_in);
}

static LLVMValueRef lower_sigmoid(ew_args *c) {
    return jit_cpu_emit_sigmoid(c->e, c->x, LLVMTypeOf(c->x));
}

static LLVMValueRef lower_logical_not(ew_args *c) {
    return LLVMBuildNot(c->b, c->x, "");
}

static LLVMValueRef lower_isnan(ew_args *c) {
    return c->fl ? LLVMBuildFCmp(c->b, LLVMRealUNO, c->x, c->x, "") : LLVMConstInt(c->e->i1, 0, 0);
}

static LLVMValueRef lower_isinf(ew_args *c) {
    return c->fl ? LLVMBuildFCmp(c->b, LLVMRealOEQ, intrin1(c->e, "llvm.fabs", c->x),
                                 fconst(c->ty, __builtin_inf()), "")
                 : LLVMConstInt(c->e->i1, 0, 0);
}

static LLVMValueRef lower_cast(ew_args *c) {
    return emit_cast(c->e, c->x, c->t, c->n->dtype);
}

static LLVMValueRef lower_where(ew_args *c) {
    return LLVMBuildSelect(c->b, c->a[0], c->a[1], c->a[2], "");
}

static LLVMValueRef lower_add(ew_args *c) {
    return c->fl ? fmf(c->e, LLVMBuildFAdd(c->b, c->x, c->y, ""))
                 : LLVMBuildAdd(c->b, c->x, c->y, "");
}

static LLVMValueRef lower_sub(ew_args *c) {
    return c->fl ? fmf(c->e, LLVMBuildFSub(c->b, c->x, c->y, ""))
                 : LLVMBuildSub(c->b, c->x, c->y, "");
}

static LLVMValueRef lower_mul(ew_args *c) {
    return c->fl ? fmf(c->e, LLVMBuildFMul(c->b, c->x, c->y, ""))
                 : LLVMBuildMul(c->b, c->x, c->y, "");
}

static LLVMValueRef lower_div(ew_args *c) {
    return LLVMBuildFDiv(c->b, c->x, c->y, "");
}

static LLVMValueRef lower_floordiv(ew_args *c) {
    return intrin1(c->e, "llvm.floor", LLVMBuildFDiv(c->b, c->x, c->y, ""));
}

static LLVMValueRef lower_mod(ew_args *c) {
    /* Python's floor mod on fmod, as fmod_py in binary.c */
    LLVMValueRef r = LLVMBuildFRem(c->b, c->x, c->y, "");
    LLVMValueRef flip = LLVMBuildXor(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, r, c->zero, ""),
                                     LLVMBuildFCmp(c->b, LLVMRealOLT, c->y, c->zero, ""), "");
    LLVMValueRef adj = LLVMBuildSelect(c->b, flip, LLVMBuildFAdd(c->b, r, c->y, ""), r, "");
    LLVMValueRef args[2] = {c->zero, c->y};
    LLVMValueRef z = intrin(c->e, "llvm.copysign", &c->ty, 1, args, 2);
    return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealUNE, r, c->zero, ""), adj, z, "");
}

static LLVMValueRef lower_maximum(ew_args *c) {
    bool mx = c->n->op == IR_OP_MAXIMUM;
    if (c->fl) {
        /* IEEE 754-2019: -0 < +0, as the reference kernel (operand order must not matter) */
        LLVMTypeRef xt = LLVMTypeOf(c->x);
        int is_vec = LLVMGetTypeKind(xt) == LLVMVectorTypeKind;
        LLVMTypeRef et = is_vec ? LLVMGetElementType(xt) : xt;
        LLVMTypeRef ity = LLVMIntTypeInContext(LLVMGetTypeContext(xt),
                                               LLVMGetTypeKind(et) == LLVMFloatTypeKind ? 32 : 64);
        if (is_vec)
            ity = LLVMVectorType(ity, LLVMGetVectorSize(xt));
        LLVMValueRef xneg = LLVMBuildICmp(c->b, LLVMIntSLT, LLVMBuildBitCast(c->b, c->x, ity, ""),
                                          LLVMConstNull(ity), "");
        LLVMValueRef eq = LLVMBuildFCmp(c->b, LLVMRealOEQ, c->x, c->y, "");
        LLVMValueRef tie = LLVMBuildAnd(c->b, eq, mx ? LLVMBuildNot(c->b, xneg, "") : xneg, "");
        LLVMValueRef pick = LLVMBuildOr(
            c->b, LLVMBuildFCmp(c->b, mx ? LLVMRealOGT : LLVMRealOLT, c->x, c->y, ""), tie, "");
        LLVMValueRef v = LLVMBuildSelect(c->b, pick, c->x, c->y, "");
        return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, c->x, c->y, ""),
                               LLVMBuildFAdd(c->b, c->x, c->y, ""), v, "");
    }
    LLVMIntPredicate p = mx ? (c->bo ? LLVMIntUGT : LLVMIntSGT) : (c->bo ? LLVMIntULT : LLVMIntSLT);
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, p, c->x, c->y, ""), c->x, c->y, "");
}

static LLVMValueRef lower_eq(ew_args *c) {
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    static const LLVMIntPredicate sp[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntSLT,
                                          LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    static const LLVMIntPredicate up[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntULT,
                                          LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
    int k = c->n->op - IR_OP_EQ;
    if (c->fl)
        return LLVMBuildFCmp(c->b, fp[k], c->x, c->y, "");
    return LLVMBuildICmp(c->b, c->bo ? up[k] : sp[k], c->x, c->y, "");
}

static LLVMValueRef lower_logical_and(ew_args *c) {
    return LLVMBuildAnd(c->b, c->x, c->y, "");
}

static LLVMValueRef lower_logical_or(ew_args *c) {
    return LLVMBuildOr(c->b, c->x, c->y, "");
}

static LLVMValueRef lower_shift_left(ew_args *c) {
    /* counts outside [0, bits) (unsigned compare) as binary.c */
    unsigned long long bits = 8 * ir_dtype_size(c->t);
    LLVMValueRef ok = LLVMBuildICmp(c->b, LLVMIntULT, c->y, LLVMConstInt(c->ty, bits, 0), "");
    LLVMValueRef k = LLVMBuildAnd(c->b, c->y, LLVMConstInt(c->ty, bits - 1, 0), "");
    if (c->n->op == IR_OP_SHIFT_LEFT)
        return LLVMBuildSelect(c->b, ok, LLVMBuildShl(c->b, c->x, k, ""), c->zero, "");
    if (c->bo)
        return LLVMBuildSelect(c->b, ok, LLVMBuildLShr(c->b, c->x, k, ""), c->zero, "");
    return LLVMBuildAShr(c->b, c->x,
                         LLVMBuildSelect(c->b, ok, k, LLVMConstInt(c->ty, bits - 1, 0), ""), "");
}

/* Each op's scalar lowering, indexed by op; NULL: not lowered (jit_cpu_ew_supported refuses it
 * first; tests/jit/test_op_table.c checks the two agree). */
static LLVMValueRef (*const lowerings[IR_N_OPS])(ew_args *c) = {
    [IR_OP_NEG] = lower_neg,
    [IR_OP_ABS] = lower_abs,
    [IR_OP_SIGN] = lower_sign,
    [IR_OP_RELU] = lower_relu,
    [IR_OP_BROADCAST_TO] = lower_identity,
    [IR_OP_FLOOR] = lower_floor,
    [IR_OP_CEIL] = lower_ceil,
    [IR_OP_ROUND] = lower_round,
    [IR_OP_SQRT] = lower_sqrt,
    [IR_OP_RSQRT] = lower_rsqrt,
    [IR_OP_EXP] = lower_exp,
    [IR_OP_LOG] = lower_log,
    [IR_OP_TANH] = lower_tanh,
    [IR_OP_SIN] = lower_libm,
    [IR_OP_COS] = lower_libm,
    [IR_OP_ATAN] = lower_libm,
    [IR_OP_ASIN] = lower_libm,
    [IR_OP_ACOS] = lower_libm,
    [IR_OP_ERF] = lower_libm,
    [IR_OP_SIGMOID] = lower_sigmoid,
    [IR_OP_LOGICAL_NOT] = lower_logical_not,
    [IR_OP_ISNAN] = lower_isnan,
    [IR_OP_ISINF] = lower_isinf,
    [IR_OP_CAST] = lower_cast,
    [IR_OP_WHERE] = lower_where,
    [IR_OP_ADD] = lower_add,
    [IR_OP_SUB] = lower_sub,
    [IR_OP_MUL] = lower_mul,
    [IR_OP_DIV] = lower_div,
    [IR_OP_FLOORDIV] = lower_floordiv,
    [IR_OP_POW] = lower_libm,
    [IR_OP_MOD] = lower_mod,
    [IR_OP_MAXIMUM] = lower_maximum,
    [IR_OP_MINIMUM] = lower_maximum,
    [IR_OP_EQ] = lower_eq,
    [IR_OP_NE] = lower_eq,
    [IR_OP_LT] = lower_eq,
    [IR_OP_LE] = lower_eq,
    [IR_OP_GT] = lower_eq,
    [IR_OP_GE] = lower_eq,
    [IR_OP_LOGICAL_AND] = lower_logical_and,
    [IR_OP_LOGICAL_OR] = lower_logical_or,
    [IR_OP_SHIFT_LEFT] = lower_shift_left,
    [IR_OP_SHIFT_RIGHT] = lower_shift_left,
};

bool jit_cpu_ew_lowered(int op) {
    return op >= 0 && op < IR_N_OPS && lowerings[op];
}

/* One node's value from its inputs' values. */
LLVMValueRef jit_cpu_emit_op(em *e, const ir_node *n, int t, LLVMValueRef *a) {
    LLVMValueRef (*lower)(ew_args *) = n->op < IR_N_OPS ? lowerings[n->op] : NULL;
    if (!lower)
        return NULL;
    LLVMTypeRef ty = t >= 0 ? jit_cpu_reg_ty(e, t) : NULL;
    bool fl = jit_cpu_flt(t);
    ew_args c = {.e = e,
                 .b = e->b,
                 .n = n,
                 .t = t,
                 .ty = ty,
                 .fl = fl,
                 .bo = t == TJ_BOOL || ir_dtype_is_unsigned(t), /* unsigned compares */
                 .zero = ty ? (fl ? fconst(ty, 0) : LLVMConstInt(ty, 0, 0)) : NULL,
                 .one = ty ? (fl ? fconst(ty, 1) : LLVMConstInt(ty, 1, 0)) : NULL,
                 .x = a[0],
                 .y = n->n_in > 1 ? a[1] : NULL,
                 .a = a};
    return lower(&c);
}
