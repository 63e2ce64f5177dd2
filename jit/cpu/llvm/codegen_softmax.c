/* codegen_softmax.c — generated row softmax / log-softmax over the last axis of f32/f64. By
 * default, rows of 2 to 8192 f32 take the pipelined kernel below (a row shorter than a vector is
 * one masked vector: a [256, 10] softmax went from 16 to 2.2 us); single elements, longer rows and
 * exact math take three passes per row (max; exp and its sum; normalise),
 * in the input type with approx.c's exp by default, in double with libm and sequential sums (the
 * reference kernel's arithmetic, bit-identical) with exact_math. */
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
#define fast jit_cpu_fast
#define load_at jit_cpu_load_elem
#define intrin2 jit_cpu_intrin2

/* ---- pipelined softmax ------------------------------------------------------------------------
 * Rows of at least one vector (64 bytes) and at most SM_SCRATCH bytes of scratch, without exact
 * math: one loop per row i does three independent streams at once, in explicit 64-byte vectors:
 *   - the maximum of row i+1 (streaming from memory: the hardware prefetcher runs ahead),
 *   - exp(x_i - m_i) and its sum, from row i in cache (softmax keeps exp in a scratch row),
 *   - row i-1's result: exp * (1/sum), or (x - m) - log(sum), into the output with non-temporal
 *     stores when the output rows are 64-byte aligned (no read for ownership of output lines).
 * So the exp arithmetic overlaps the memory traffic instead of alternating with it, and the bytes
 * moved are one read of x and one write of y, like memcpy (bench softmax_4096: 0.5-0.66 of
 * memcpy with three passes per row, see bench/RESULTS.md). A stream with no row at the edges of
 * [begin, end) reads row `begin` and writes scratch instead: no branches in the vector loop. */
enum { SM_SCRATCH = 64 * 1024 }; /* on the stack of whatever thread runs the kernel */

typedef struct smv {
    em *e;
    LLVMValueRef fn;
    LLVMTypeRef t, vt;
    unsigned W, esz;
    int64_t len, nvec, pad;
    bool is_log;
    LLVMValueRef tmask; /* the last, partial vector's lanes; NULL when len % W == 0 */
} smv;

/* Per-row pointers and scalars of one pipeline step (see above). */
typedef struct sm_row {
    LLVMValueRef xn, xc, ec, xp, ep, yp; /* next row, current, its exp, previous, its exp, out */
    LLVMValueRef mc, mp, cp;             /* splats: max of row i, of row i-1; 1/sum or log(sum) */
} sm_row;

static LLVMValueRef sm_splat(smv *s, LLVMValueRef x) {
    LLVMBuilderRef b = s->e->b;
    LLVMValueRef v =
        LLVMBuildInsertElement(b, LLVMGetUndef(s->vt), x, LLVMConstInt(s->e->i32, 0, 0), "");
    return LLVMBuildShuffleVector(b, v, LLVMGetUndef(s->vt),
                                  LLVMConstNull(LLVMVectorType(s->e->i32, s->W)), "");
}

static LLVMValueRef sm_const(smv *s, double v) {
    LLVMValueRef a[16];
    for (unsigned i = 0; i < s->W; i++)
        a[i] = LLVMConstReal(s->t, v);
    return LLVMConstVector(a, s->W);
}

static LLVMValueRef sm_at(smv *s, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildInBoundsGEP2(s->e->b, s->t, base, &off, 1, "");
}

/* A vector load at p (masked: lanes off the mask read `pass`). */
static LLVMValueRef sm_load(smv *s, LLVMValueRef p, unsigned align, LLVMValueRef mask,
                            double pass) {
    if (mask) {
        LLVMTypeRef ov[2] = {s->vt, s->e->ptr};
        LLVMValueRef a[4] = {p, LLVMConstInt(s->e->i32, align, 0), mask, sm_const(s, pass)};
        return jit_cpu_intrinsic(s->e, "llvm.masked.load", ov, 2, a, 4);
    }
    LLVMValueRef l = LLVMBuildLoad2(s->e->b, s->vt, p, "");
    LLVMSetAlignment(l, align);
    return l;
}

static void sm_store(smv *s, LLVMValueRef v, LLVMValueRef p, unsigned align, LLVMValueRef mask,
                     bool nt) {
    if (mask) {
        LLVMTypeRef ov[2] = {s->vt, s->e->ptr};
        LLVMValueRef a[4] = {v, p, LLVMConstInt(s->e->i32, align, 0), mask};
        jit_cpu_intrinsic(s->e, "llvm.masked.store", ov, 2, a, 4);
        return;
    }
    LLVMValueRef st = LLVMBuildStore(s->e->b, v, p);
    LLVMSetAlignment(st, align);
    if (nt) {
        LLVMContextRef c = s->e->c;
        LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(s->e->i32, 1, 0));
        LLVMSetMetadata(st, LLVMGetMDKindIDInContext(c, "nontemporal", 11),
                        LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, &one, 1)));
    }
}

/* The running row maximum skips NaNs (one vmaxps): a NaN in the row still makes its exp, the sum
 * and so every result NaN, as the reference's NaN maximum does; so do infinities (inf - inf). */
static LLVMValueRef sm_max(smv *s, LLVMValueRef acc, LLVMValueRef x) {
    LLVMBuilderRef b = s->e->b;
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, acc, ""), x, acc, "");
}

/* Lane maximum of a NaN-free vector. */
static LLVMValueRef sm_hmax(smv *s, LLVMValueRef v) {
    return fast(jit_cpu_intrinsic(s->e, "llvm.vector.reduce.fmax", &s->vt, 1, &v, 1),
                LLVMFastMathNoNaNs);
}

/* One vector of the three streams at element offset off (mask: the partial last vector). */
static void sm_step(smv *s, const sm_row *r, LLVMValueRef off, LLVMValueRef mask, bool nt,
                    LLVMValueRef *vmax, LLVMValueRef *vsum) {
    LLVMBuilderRef b = s->e->b;
    LLVMValueRef xn = sm_load(s, sm_at(s, r->xn, off), s->esz, mask, -INFINITY);
    *vmax = sm_max(s, *vmax, xn);
    LLVMValueRef xc = sm_load(s, sm_at(s, r->xc, off), s->esz, mask, 0);
    LLVMValueRef ex = jit_cpu_emit_exp_nonpos(s->e, LLVMBuildFSub(b, xc, r->mc, ""), s->vt);
    if (mask)
        ex = LLVMBuildSelect(b, mask, ex, sm_const(s, 0), "");
    *vsum = fast(LLVMBuildFAdd(b, *vsum, ex, ""), LLVMFastMathAllowReassoc);
    if (!s->is_log)
        sm_store(s, ex, sm_at(s, r->ec, off), 64, mask, false);
    LLVMValueRef y;
    if (s->is_log)
        y = LLVMBuildFSub(
            b, LLVMBuildFSub(b, sm_load(s, sm_at(s, r->xp, off), s->esz, mask, 0), r->mp, ""),
            r->cp, "");
    else
        y = LLVMBuildFMul(b, sm_load(s, sm_at(s, r->ep, off), 64, mask, 0), r->cp, "");
    sm_store(s, y, sm_at(s, r->yp, off), nt ? 64 : s->esz, mask, nt);
}

/* Row max of x + row*len into a scalar (vector loop, then the masked tail). */
static LLVMValueRef sm_rowmax(smv *s, LLVMValueRef xrow) {
    em *e = s->e;
    LLVMValueRef ninf = sm_const(s, -INFINITY), nacc = ninf;
    if (s->nvec > 0) { /* loops run at least once: none for a row shorter than a vector */
        LLVMBasicBlockRef bb = LLVMGetInsertBlock(e->b);
        loop l = loop_begin(e, s->fn, c64(e, 0));
        LLVMValueRef acc = LLVMBuildPhi(e->b, s->vt, "");
        LLVMAddIncoming(acc, &ninf, &bb, 1);
        LLVMValueRef off = LLVMBuildNSWMul(e->b, l.i, c64(e, s->W), "");
        nacc = sm_max(s, acc, sm_load(s, sm_at(s, xrow, off), s->esz, NULL, 0));
        bb = loop_end(e, s->fn, &l, c64(e, s->nvec));
        LLVMAddIncoming(acc, &nacc, &bb, 1);
    }
    if (s->tmask)
        nacc =
            sm_max(s, nacc,
                   sm_load(s, sm_at(s, xrow, c64(e, s->nvec * s->W)), s->esz, s->tmask, -INFINITY));
    return sm_hmax(s, nacc);
}

/* The rows loop for i in [begin, end] (one step more than rows: the last writes row end-1). */
static void sm_rows(smv *s, LLVMValueRef x, LLVMValueRef y, LLVMValueRef scr, bool nt) {
    em *e = s->e;
    LLVMBuilderRef b = e->b;
    LLVMValueRef begin = LLVMGetParam(s->fn, 1), end = LLVMGetParam(s->fn, 2);
    LLVMValueRef len = c64(e, s->len), pad = c64(e, s->pad), one = c64(e, 1);
#define ROW(base, i) sm_at(s, base, LLVMBuildNSWMul(b, i, len, ""))
    LLVMValueRef m0 = sm_rowmax(s, ROW(x, begin)), zero = LLVMConstReal(s->t, 0);
    LLVMBasicBlockRef bb = LLVMGetInsertBlock(b);
    loop u = loop_begin(e, s->fn, begin);
    LLVMValueRef mc = LLVMBuildPhi(b, s->t, "mc"), mp = LLVMBuildPhi(b, s->t, "mp");
    LLVMValueRef cp = LLVMBuildPhi(b, s->t, "cp");
    LLVMAddIncoming(mc, &m0, &bb, 1);
    LLVMAddIncoming(mp, &zero, &bb, 1);
    LLVMAddIncoming(cp, &zero, &bb, 1);
    LLVMValueRef nx = LLVMBuildNSWAdd(b, u.i, one, ""), pv = LLVMBuildNSWSub(b, u.i, one, "");
    LLVMValueRef has_n = LLVMBuildICmp(b, LLVMIntSLT, nx, end, "");
    LLVMValueRef has_c = LLVMBuildICmp(b, LLVMIntSLT, u.i, end, "");
    LLVMValueRef has_p = LLVMBuildICmp(b, LLVMIntSGT, u.i, begin, "");
    LLVMValueRef par = LLVMBuildAnd(b, u.i, one, ""), npar = LLVMBuildXor(b, par, one, "");
    LLVMValueRef ep = sm_at(s, scr, LLVMBuildNSWMul(b, npar, pad, ""));
    sm_row r = {
        .xn = ROW(x, LLVMBuildSelect(b, has_n, nx, begin, "")),
        .xc = ROW(x, LLVMBuildSelect(b, has_c, u.i, begin, "")),
        .ec = sm_at(s, scr, LLVMBuildNSWMul(b, par, pad, "")),
        .xp = ROW(x, LLVMBuildSelect(b, has_p, pv, begin, "")),
        .ep = ep,
        .yp = LLVMBuildSelect(b, has_p, ROW(y, LLVMBuildSelect(b, has_p, pv, begin, "")), ep, ""),
        .mc = sm_splat(s, mc),
        .mp = sm_splat(s, mp),
        .cp = sm_splat(s, cp),
    };
#undef ROW
    LLVMValueRef ninf = sm_const(s, -INFINITY), vzero = sm_const(s, 0);
    LLVMValueRef nmax = ninf, nsum = vzero;
    if (s->nvec > 0) {
        bb = LLVMGetInsertBlock(b);
        loop l = loop_begin(e, s->fn, c64(e, 0));
        LLVMValueRef vmax = LLVMBuildPhi(b, s->vt, ""), vsum = LLVMBuildPhi(b, s->vt, "");
        LLVMAddIncoming(vmax, &ninf, &bb, 1);
        LLVMAddIncoming(vsum, &vzero, &bb, 1);
        nmax = vmax, nsum = vsum;
        sm_step(s, &r, LLVMBuildNSWMul(b, l.i, c64(e, s->W), ""), NULL, nt, &nmax, &nsum);
        bb = loop_end(e, s->fn, &l, c64(e, s->nvec));
        LLVMAddIncoming(vmax, &nmax, &bb, 1);
        LLVMAddIncoming(vsum, &nsum, &bb, 1);
    }
    if (s->tmask)
        sm_step(s, &r, c64(e, s->nvec * s->W), s->tmask, false, &nmax, &nsum);
    LLVMValueRef red[2] = {LLVMConstReal(s->t, -0.0), nsum};
    LLVMValueRef sum = fast(jit_cpu_intrinsic(s->e, "llvm.vector.reduce.fadd", &s->vt, 1, red, 2),
                            LLVMFastMathAllowReassoc);
    LLVMValueRef c = s->is_log ? jit_cpu_emit_log(e, sum, s->t)
                               : LLVMBuildFDiv(b, LLVMConstReal(s->t, 1), sum, "");
    LLVMValueRef mn = sm_hmax(s, nmax);
    bb = loop_end(e, s->fn, &u, LLVMBuildNSWAdd(b, end, one, ""));
    LLVMAddIncoming(mc, &mn, &bb, 1);
    LLVMAddIncoming(mp, &mc, &bb, 1);
    LLVMAddIncoming(cp, &c, &bb, 1);
}

static void sm_emit_pipelined(em *e, LLVMValueRef fn, LLVMValueRef *p, int dt, int64_t len,
                              bool is_log) {
    LLVMBuilderRef b = e->b;
    smv s = {.e = e,
             .fn = fn,
             .t = jit_cpu_reg_ty(e, dt),
             .esz = (unsigned)ir_dtype_size(dt),
             .len = len,
             .is_log = is_log};
    s.W = 64 / s.esz;
    s.vt = LLVMVectorType(s.t, s.W);
    s.nvec = len / s.W;
    s.pad = (len + s.W - 1) / s.W * s.W;
    if (len % s.W) {
        LLVMValueRef lanes[16];
        for (unsigned i = 0; i < s.W; i++)
            lanes[i] = LLVMConstInt(e->i1, i < (unsigned)(len % s.W), 0);
        s.tmask = LLVMConstVector(lanes, s.W);
    }
    LLVMValueRef scr = LLVMBuildAlloca(b, LLVMArrayType2(s.t, (uint64_t)(2 * s.pad)), "scr");
    LLVMSetAlignment(scr, 64);
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->c, fn, "rows");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    if ((len * s.esz) % 64 == 0) { /* rows stay 64-byte aligned when the output is */
        LLVMBasicBlockRef ntb = LLVMAppendBasicBlockInContext(e->c, fn, "nt");
        LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(e->c, fn, "plain");
        LLVMValueRef low = LLVMBuildAnd(b, LLVMBuildPtrToInt(b, p[1], e->i64, ""), c64(e, 63), "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, low, c64(e, 0), ""), ntb, plain);
        LLVMPositionBuilderAtEnd(b, ntb);
        sm_rows(&s, p[0], p[1], scr, true);
        LLVMBuildFence(b, LLVMAtomicOrderingSequentiallyConsistent, 0, ""); /* orders NT stores */
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, plain);
    }
    sm_rows(&s, p[0], p[1], scr, false);
    jit_cpu_kernel_end(e, done);
}

tj_status jit_cpu_softmax_emit(LLVMModuleRef m, const ir_graph *g, uint32_t id, const char *name,
                               const jit_cpu_opts *o, rt_units *plan) {
    if (!jit_cpu_softmax_supported(g, id))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: softmax %%%u not generated", id);
    const ir_node *n = ir_node_get(g, id);
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    int64_t len = x->dims[x->rank - 1];
    if (jit_cpu_softmax_units(g, id, plan))
        return ir_last_code();
    bool is_log = n->op == IR_OP_LOG_SOFTMAX, exact = o->exact_math;
    int64_t esz = (int64_t)ir_dtype_size(n->dtype), w = 64 / esz;
    if (!exact && len >= 2 && 2 * ((len + w - 1) / w * w) * esz <= SM_SCRATCH) {
        em E;
        jit_cpu_em_init(&E, m, !o->no_contract, false);
        LLVMValueRef p[2];
        LLVMValueRef fn = jit_cpu_kernel_begin(&E, name, 2, p);
        sm_emit_pipelined(&E, fn, p, n->dtype, len, is_log);
        return TJ_OK;
    }
    em E;
    jit_cpu_em_init(&E, m, !o->no_contract, exact);
    em *e = &E;
    LLVMBuilderRef b = e->b;
    LLVMValueRef p[2];
    LLVMValueRef fn = jit_cpu_kernel_begin(e, name, 2, p);
    LLVMTypeRef t = jit_cpu_reg_ty(e, n->dtype), ct = exact ? e->f64 : t; /* computed in ct */
    LLVMFastMathFlags ff = exact ? 0 : LLVMFastMathAllowReassoc;
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->c, fn, "rows");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    loop u = loop_begin(e, fn, begin);
    LLVMValueRef base = LLVMBuildNSWMul(b, u.i, c64(e, len), "");
#define LOAD_X(i)                                                                                  \
    (ct != t ? LLVMBuildFPExt(b, load_at(e, p[0], n->dtype, LLVMBuildNSWAdd(b, base, (i), "")),    \
                              ct, "")                                                              \
             : load_at(e, p[0], n->dtype, LLVMBuildNSWAdd(b, base, (i), "")))
    /* pass 1: the row's maximum (NaN propagates) */
    LLVMValueRef ninf = LLVMConstReal(ct, -INFINITY), zero = LLVMConstReal(ct, 0);
    LLVMBasicBlockRef bb = LLVMGetInsertBlock(b);
    loop l1 = loop_begin(e, fn, c64(e, 0));
    LLVMValueRef mx = LLVMBuildPhi(b, ct, "m");
    LLVMAddIncoming(mx, &ninf, &bb, 1);
    LLVMValueRef v = LOAD_X(l1.i), nm;
    if (exact) /* (v > m || v != v) ? v : m */
        nm = LLVMBuildSelect(b,
                             LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOGT, v, mx, ""),
                                         LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), ""),
                             v, mx, "");
    else
        nm = intrin2(e, "llvm.maximum", mx, v);
    bb = loop_end(e, fn, &l1, c64(e, len));
    LLVMAddIncoming(mx, &nm, &bb, 1);
    /* pass 2: sum of exp(x - m); softmax keeps exp(x - m) in the output */
    bb = LLVMGetInsertBlock(b);
    loop l2 = loop_begin(e, fn, c64(e, 0));
    LLVMValueRef sum = LLVMBuildPhi(b, ct, "s");
    LLVMAddIncoming(sum, &zero, &bb, 1);
    LLVMValueRef ex = jit_cpu_emit_exp(e, LLVMBuildFSub(b, LOAD_X(l2.i), nm, ""), ct);
    if (!is_log && !exact) {
        LLVMValueRef off = LLVMBuildNSWAdd(b, base, l2.i, "");
        LLVMBuildStore(b, ex, LLVMBuildInBoundsGEP2(b, t, p[1], &off, 1, ""));
    }
    LLVMValueRef ns = fast(LLVMBuildFAdd(b, sum, ex, ""), ff);
    bb = loop_end(e, fn, &l2, c64(e, len));
    LLVMAddIncoming(sum, &ns, &bb, 1);
    /* pass 3: normalise */
    LLVMValueRef lsum = is_log ? jit_cpu_emit_log(e, ns, ct) : NULL;
    /* a multiply by the reciprocal (one more rounding) instead of a divide per element */
    LLVMValueRef rcp = !is_log && !exact ? LLVMBuildFDiv(b, LLVMConstReal(ct, 1), ns, "") : NULL;
    loop l3 = loop_begin(e, fn, c64(e, 0));
    LLVMValueRef off = LLVMBuildNSWAdd(b, base, l3.i, ""), r;
    if (is_log)
        r = LLVMBuildFSub(b, LLVMBuildFSub(b, LOAD_X(l3.i), nm, ""), lsum, "");
    else if (exact)
        r = LLVMBuildFDiv(b, jit_cpu_emit_exp(e, LLVMBuildFSub(b, LOAD_X(l3.i), nm, ""), ct), ns,
                          "");
    else
        r = LLVMBuildFMul(
            b, LLVMBuildLoad2(b, t, LLVMBuildInBoundsGEP2(b, t, p[1], &off, 1, ""), ""), rcp, "");
#undef LOAD_X
    if (ct != t)
        r = LLVMBuildFPTrunc(b, r, t, "");
    LLVMBuildStore(b, r, LLVMBuildInBoundsGEP2(b, t, p[1], &off, 1, ""));
    loop_end(e, fn, &l3, c64(e, len));
    loop_end(e, fn, &u, end);
    jit_cpu_kernel_end(e, done);
    return TJ_OK;
}
