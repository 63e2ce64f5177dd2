/* approx.c — exp, log, tanh, sigmoid as straight-line LLVM IR (range reduction, polynomial,
 * exponent arithmetic on the bits; selects, no calls or branches) so loops using them vectorize:
 * LLVM does not vectorize calls into libm. Exact math (jit_cpu_em.exact_math, TJ_EXACT_MATH=1)
 * calls libm lane by lane instead, bit-identical to the reference kernels. Specials as libm (NaN,
 * +-inf, +-0, exp overflow/underflow, log(0) = -inf, log(<0) = NaN, tanh(-0) = -0); sigmoid stays
 * in [0, 1] and its tiny results are not flushed. Bounds in ULP vs the correctly rounded result,
 * asserted by tests/jit/test_cpu_approx.c (max measured on 3.4e7 f32 / 8.4e6 f64 points, FMA host):
 *   f32: exp 1.5 (1.01) log 1 (0.77) tanh 2.5 (1.87) sigmoid 2.5 (2.35)  [glibc: tanhf 2.16]
 *   f64: exp 1.5 (0.98) log 1 (0.74) tanh 2.5 (2.00) sigmoid 2.5 (2.02)
 * From Cephes (expf, logf polynomials) and fdlibm (log). */
#include <stdio.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"

/* The type being computed on: float or double, scalar or vector, and its integer twin. */
typedef struct fk {
    jit_cpu_em *e;
    LLVMBuilderRef b;
    LLVMTypeRef ty, ity;
    bool dbl;
    unsigned lanes; /* 0: scalar */
} fk;

static fk fk_make(jit_cpu_em *e, LLVMTypeRef ty) {
    fk k = {.e = e, .b = e->b, .ty = ty};
    LLVMTypeRef et = ty;
    if (LLVMGetTypeKind(ty) == LLVMVectorTypeKind) {
        k.lanes = LLVMGetVectorSize(ty);
        et = LLVMGetElementType(ty);
    }
    k.dbl = LLVMGetTypeKind(et) == LLVMDoubleTypeKind;
    k.ity = k.dbl ? e->i64 : e->i32;
    if (k.lanes)
        k.ity = LLVMVectorType(k.ity, k.lanes);
    return k;
}

static LLVMValueRef splat(fk *k, LLVMValueRef s) {
    if (!k->lanes)
        return s;
    LLVMValueRef v[1024]; /* far beyond any vector width the codegen picks */
    unsigned n = k->lanes < 1024 ? k->lanes : 1024;
    for (unsigned i = 0; i < n; i++)
        v[i] = s;
    return LLVMConstVector(v, n);
}
static LLVMValueRef K(fk *k, double v) {
    return splat(k, LLVMConstReal(k->dbl ? k->e->f64 : k->e->f32, v));
}
static LLVMValueRef KI(fk *k, long long v) {
    return splat(k, LLVMConstInt(k->dbl ? k->e->i64 : k->e->i32, (unsigned long long)v, 1));
}

static LLVMValueRef intr(fk *k, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(k->e->m, id, &k->ty, 1);
    LLVMTypeRef ft = LLVMIntrinsicGetType(k->e->c, id, &k->ty, 1);
    return LLVMBuildCall2(k->b, ft, f, args, n, "");
}
static LLVMValueRef fma3(fk *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMValueRef args[3] = {a, b, c};
    return intr(k, "llvm.fmuladd", args, 3);
}
static LLVMValueRef fabs1(fk *k, LLVMValueRef x) {
    return intr(k, "llvm.fabs", &x, 1);
}
static LLVMValueRef copysign2(fk *k, LLVMValueRef mag, LLVMValueRef sgn) {
    LLVMValueRef args[2] = {mag, sgn};
    return intr(k, "llvm.copysign", args, 2);
}
static LLVMValueRef add(fk *k, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFAdd(k->b, a, b, "");
}
static LLVMValueRef sub(fk *k, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFSub(k->b, a, b, "");
}
static LLVMValueRef mul(fk *k, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFMul(k->b, a, b, "");
}
static LLVMValueRef cmp(fk *k, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFCmp(k->b, p, a, b, "");
}
static LLVMValueRef sel(fk *k, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(k->b, c, a, b, "");
}
/* Horner: c[0] x^(n-1) + ... + c[n-1]. */
static LLVMValueRef poly(fk *k, LLVMValueRef x, const double *c, int n) {
    LLVMValueRef p = K(k, c[0]);
    for (int i = 1; i < n; i++)
        p = fma3(k, p, x, K(k, c[i]));
    return p;
}
/* 2^n for integer n within the normal exponent range. */
static LLVMValueRef pow2i(fk *k, LLVMValueRef n) {
    LLVMValueRef bits = LLVMBuildShl(k->b, LLVMBuildAdd(k->b, n, KI(k, k->dbl ? 1023 : 127), ""),
                                     KI(k, k->dbl ? 52 : 23), "");
    return LLVMBuildBitCast(k->b, bits, k->ty, "");
}

/* t = n ln2 + r, |r| <= ln2/2: n as a float, as an integer (*ni), and r. Rounding by the shifter
 * (the low bits of tn hold n) instead of fptosi, which is poison on NaN; ln2 is split so that
 * n * hi is exact for |n| < 2^11. */
static LLVMValueRef reduce(fk *k, LLVMValueRef t, LLVMValueRef *ni) {
    bool d = k->dbl;
    double shifter = d ? 0x1.8p52 : 0x1.8p23;
    LLVMValueRef tn = fma3(k, t, K(k, 1.4426950408889634), K(k, shifter));
    LLVMValueRef n = sub(k, tn, K(k, shifter));
    double hi = d ? 6.93145751953125E-1 : 0.693359375;
    double lo = d ? 1.42860682030941723212E-6 : -2.12194440E-4;
    LLVMValueRef r = fma3(k, n, K(k, -hi), t);
    *ni = LLVMBuildSub(k->b, LLVMBuildBitCast(k->b, tn, k->ity, ""),
                       LLVMBuildBitCast(k->b, K(k, shifter), k->ity, ""), "");
    return fma3(k, n, K(k, -lo), r);
}

/* e^r - 1 for |r| <= ln2/2: r + r^2 P(r), Cephes' expf polynomial (f32), Taylor to r^13 (f64). */
static LLVMValueRef em1_poly(fk *k, LLVMValueRef r) {
    static const double pf[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                                4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
    static const double pd[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800,
                                1.0 / 362880,     1.0 / 40320,     1.0 / 5040,     1.0 / 720,
                                1.0 / 120,        1.0 / 24,        1.0 / 6,        0.5};
    LLVMValueRef p = k->dbl ? poly(k, r, pd, 12) : poly(k, r, pf, 6);
    return fma3(k, p, mul(k, r, r), r);
}

/* e^t for t already clamped to [-104, 88.8] (f32) / [-746, 709.8] (f64), NaN passing through as
 * NaN. 2^n is applied in two halves so that results overflow to inf and underflow through the
 * denormals with a single rounding. */
static LLVMValueRef exp_core(fk *k, LLVMValueRef t) {
    LLVMValueRef ni, r = reduce(k, t, &ni);
    LLVMValueRef p = add(k, K(k, 1), em1_poly(k, r)); /* one rounding near 1 */
    LLVMValueRef n1 = LLVMBuildAShr(k->b, ni, KI(k, 1), "");
    LLVMValueRef n2 = LLVMBuildSub(k->b, ni, n1, "");
    return mul(k, mul(k, p, pow2i(k, n1)), pow2i(k, n2));
}

/* Clamps t into exp_core's domain; NaN stays NaN (ordered compares are false on it). */
static LLVMValueRef exp_clamp(fk *k, LLVMValueRef t) {
    LLVMValueRef hi = K(k, k->dbl ? 709.8 : 88.8), lo = K(k, k->dbl ? -746.0 : -104.0);
    t = sel(k, cmp(k, LLVMRealOGT, t, hi), hi, t);
    return sel(k, cmp(k, LLVMRealOLT, t, lo), lo, t);
}

static LLVMValueRef approx_exp(fk *k, LLVMValueRef x) {
    LLVMValueRef y = exp_core(k, exp_clamp(k, x));
    return sel(k, cmp(k, LLVMRealUNO, x, x), x, y);
}

static LLVMValueRef approx_log(fk *k, LLVMValueRef x) {
    bool d = k->dbl;
    LLVMBuilderRef b = k->b;
    /* denormals: scale into the normal range first */
    LLVMValueRef tiny = cmp(k, LLVMRealOLT, x, K(k, d ? 0x1p-1022 : 0x1p-126));
    LLVMValueRef xs = sel(k, tiny, mul(k, x, K(k, d ? 0x1p52 : 0x1p23)), x);
    LLVMValueRef eadj = sel(k, tiny, KI(k, d ? -52 : -23), KI(k, 0));
    LLVMValueRef bits = LLVMBuildBitCast(b, xs, k->ity, "");
    int mb = d ? 52 : 23;
    LLVMValueRef ex =
        LLVMBuildSub(b, LLVMBuildLShr(b, bits, KI(k, mb), ""), KI(k, d ? 1023 : 127), "");
    long long mmask = d ? 0xfffffffffffffLL : 0x7fffff, one = d ? 0x3ff0000000000000LL : 0x3f800000;
    LLVMValueRef m = LLVMBuildBitCast(
        b, LLVMBuildOr(b, LLVMBuildAnd(b, bits, KI(k, mmask), ""), KI(k, one), ""), k->ty, "");
    /* m in [1, 2) -> [sqrt(1/2), sqrt(2)); both subtractions are exact */
    LLVMValueRef big = cmp(k, LLVMRealOGT, m, K(k, 1.4142135623730951));
    LLVMValueRef f = sel(k, big, sub(k, mul(k, m, K(k, 0.5)), K(k, 1)), sub(k, m, K(k, 1)));
    ex = LLVMBuildAdd(b, LLVMBuildAdd(b, ex, eadj, ""), LLVMBuildZExt(b, big, k->ity, ""), "");
    LLVMValueRef ef = LLVMBuildSIToFP(b, ex, k->ty, "");
    LLVMValueRef y;
    if (d) { /* fdlibm: log(1+f) = f - hfsq + s (hfsq + R(s^2)), s = f / (2 + f) */
        static const double lg[] = {1.479819860511658591e-01, 1.531383769920937332e-01,
                                    1.818357216161805012e-01, 2.222219843214978396e-01,
                                    2.857142874366239149e-01, 3.999999999940941908e-01,
                                    6.666666666666735130e-01, 0};
        LLVMValueRef s = LLVMBuildFDiv(b, f, add(k, f, K(k, 2)), "");
        LLVMValueRef z = mul(k, s, s);
        LLVMValueRef R = poly(k, z, lg, 8);
        LLVMValueRef hfsq = mul(k, mul(k, K(k, 0.5), f), f);
        LLVMValueRef t = fma3(k, s, add(k, hfsq, R), mul(k, ef, K(k, 1.90821492927058770002e-10)));
        y = sub(k, mul(k, ef, K(k, 6.93147180369123816490e-01)), sub(k, sub(k, hfsq, t), f));
    } else { /* Cephes logf */
        static const double lp[] = {7.0376836292E-2,  -1.1514610310E-1, 1.1676998740E-1,
                                    -1.2420140846E-1, 1.4249322787E-1,  -1.6668057665E-1,
                                    2.0000714765E-1,  -2.4999993993E-1, 3.3333331174E-1};
        LLVMValueRef z = mul(k, f, f);
        LLVMValueRef t = mul(k, mul(k, poly(k, f, lp, 9), f), z);
        t = fma3(k, ef, K(k, -2.12194440e-4), t);
        t = fma3(k, z, K(k, -0.5), t);
        y = fma3(k, ef, K(k, 0.693359375), add(k, f, t));
    }
    double inf = __builtin_inf();
    y = sel(k, cmp(k, LLVMRealOEQ, x, K(k, inf)), x, y);
    y = sel(k, cmp(k, LLVMRealOLT, x, K(k, 0)), K(k, __builtin_nan("")), y);
    y = sel(k, cmp(k, LLVMRealOEQ, x, K(k, 0)), K(k, -inf), y);
    return sel(k, cmp(k, LLVMRealUNO, x, x), x, y);
}

/* tanh(|x|) = -m / (2 + m), m = e^-2|x| - 1 = 2^n (e^r - 1) + 2^n - 1: numerator and denominator
 * each rounded once (1 - 2^n and 1 + 2^n are exact while they matter), accurate from 0 (m ~ -2|x|)
 * to saturation. |x| is clamped at 44 (f32) / 354 (f64), where e^-2|x| is far below an ulp of 1
 * and 2^n is normal; the sign is copied from x at the end (which also keeps -0). */
static LLVMValueRef approx_tanh(fk *k, LLVMValueRef x) {
    LLVMValueRef t = mul(k, fabs1(k, x), K(k, -2));
    LLVMValueRef tlo = K(k, k->dbl ? -708.0 : -88.0);
    t = sel(k, cmp(k, LLVMRealOLT, t, tlo), tlo, t);
    LLVMValueRef ni, r = reduce(k, t, &ni);
    LLVMValueRef s = pow2i(k, ni), pm = em1_poly(k, r);
    LLVMValueRef num = fma3(k, LLVMBuildFNeg(k->b, s, ""), pm, sub(k, K(k, 1), s));
    LLVMValueRef den = fma3(k, s, pm, add(k, K(k, 1), s));
    return copysign2(k, LLVMBuildFDiv(k->b, num, den, ""), x);
}

/* sigmoid: e = e^-|x| never overflows; 1 / (1 + e) for x >= 0, e / (1 + e) below. */
static LLVMValueRef approx_sigmoid(fk *k, LLVMValueRef x) {
    LLVMValueRef e = exp_core(k, exp_clamp(k, LLVMBuildFNeg(k->b, fabs1(k, x), "")));
    LLVMValueRef num = sel(k, cmp(k, LLVMRealOGE, x, K(k, 0)), K(k, 1), e);
    return LLVMBuildFDiv(k->b, num, add(k, K(k, 1), e), "");
}

/* ---- exact mode: libm, lane by lane ---------------------------------------------------------- */
static LLVMValueRef libm1(fk *k, const char *name, LLVMValueRef x) {
    jit_cpu_em *e = k->e;
    LLVMTypeRef st = k->dbl ? e->f64 : e->f32;
    char full[32];
    snprintf(full, sizeof full, "%s%s", name, k->dbl ? "" : "f");
    if (!k->lanes)
        return jit_cpu_libm(e, k->b, full, st, &x, 1);
    LLVMValueRef v = LLVMGetUndef(k->ty);
    for (unsigned i = 0; i < k->lanes; i++) {
        LLVMValueRef idx = LLVMConstInt(e->i32, i, 0);
        LLVMValueRef xi = LLVMBuildExtractElement(k->b, x, idx, "");
        v = LLVMBuildInsertElement(k->b, v, jit_cpu_libm(e, k->b, full, st, &xi, 1), idx, "");
    }
    return v;
}

static bool exact(jit_cpu_em *e) {
    return e->exact_math || rt_config_get()->exact_math;
}

LLVMValueRef jit_cpu_emit_exp(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty) {
    fk k = fk_make(e, ty);
    return exact(e) ? libm1(&k, "exp", x) : approx_exp(&k, x);
}

LLVMValueRef jit_cpu_emit_exp_nonpos(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty) {
    fk k = fk_make(e, ty);
    if (exact(e))
        return libm1(&k, "exp", x);
    /* no overflow clamp and no NaN select: a NaN flows through exp_core as a NaN */
    LLVMValueRef lo = K(&k, k.dbl ? -746.0 : -104.0);
    return exp_core(&k, sel(&k, cmp(&k, LLVMRealOLT, x, lo), lo, x));
}

LLVMValueRef jit_cpu_emit_log(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty) {
    fk k = fk_make(e, ty);
    return exact(e) ? libm1(&k, "log", x) : approx_log(&k, x);
}

LLVMValueRef jit_cpu_emit_tanh(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty) {
    fk k = fk_make(e, ty);
    return exact(e) ? libm1(&k, "tanh", x) : approx_tanh(&k, x);
}

LLVMValueRef jit_cpu_emit_sigmoid(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty) {
    fk k = fk_make(e, ty);
    if (!exact(e))
        return approx_sigmoid(&k, x);
    /* as the reference kernel: e = exp(-|x|), 1 / (1 + e) for x >= 0, e / (1 + e) below */
    LLVMValueRef ex = libm1(&k, "exp", LLVMBuildFNeg(e->b, fabs1(&k, x), ""));
    LLVMValueRef num = sel(&k, cmp(&k, LLVMRealOGE, x, K(&k, 0)), K(&k, 1), ex);
    return LLVMBuildFDiv(e->b, num, add(&k, K(&k, 1), ex), "");
}
