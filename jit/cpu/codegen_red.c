/* codegen_red.c — generated reductions and softmax. A reduce group (passes/fusion.c) computes its
 * elementwise producers in registers inside the reduction loop, so no intermediate buffer
 * exists. Handled: SUM MEAN MAX MIN PROD of f32/f64/i32/i64 over adjacent axes (ignoring size-1
 * axes): a suffix (rows, or everything; units of work are output elements) or axes followed by
 * kept ones (units are blocks of output elements, accumulated row by row). Semantics are the
 * reference kernel's (runtime/kernels/reduce.c): floats accumulate in double, integers wrap in
 * their width (equal to the reference's uint64 sum truncated). With no_contract the float
 * accumulation is sequential, in input order (bit-identical); by default it may be reassociated
 * (vectorised partial sums, still in double), and MAX/MIN use llvm.maximum/minimum (NaN
 * propagates; only the sign of a zero maximum may differ). Softmax / log-softmax over the last
 * axis: max, exp-sum, normalise per row; in the input type with approx.c's exp by default, in
 * double with libm and sequential sums (the reference's arithmetic) with exact_math. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"

/* Reduced-axes geometry, size-1 axes ignored: outer kept elements, then len reduced ones (the
 * reduced axes must be adjacent), then inner kept ones; out[o, i] reduces x[o, 0..len, i]. */
static bool red_geometry(const ir_graph *g, const ir_node *n, int64_t *outer, int64_t *len,
                         int64_t *inner) {
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    int64_t xn = ir_numel(x->rank, x->dims), on = ir_numel(n->rank, n->dims);
    if (xn < 0 || on < 0 || n->a.n_list > (uint32_t)x->rank)
        return false;
    bool red[IR_MAX_RANK] = {false};
    for (uint32_t k = 0; k < n->a.n_list; k++) {
        if (n->a.list[k] < 0 || n->a.list[k] >= x->rank)
            return false;
        red[n->a.list[k]] = true;
    }
    if (n->a.n_list == 0 && xn != on)
        for (int d = 0; d < x->rank; d++)
            red[d] = true;
    *outer = *len = *inner = 1;
    int phase = 0; /* 0: outer, 1: reduced, 2: inner */
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] == 1)
            continue;
        if (red[d] && phase == 2)
            return false; /* reduced axes on both sides of a kept one */
        phase = red[d] ? 1 : phase == 1 ? 2 : phase;
        *(phase == 0 ? outer : phase == 1 ? len : inner) *= x->dims[d];
    }
    return *outer * *inner == on;
}

bool jit_cpu_red_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    if (n->n_in != 1 || n->op < IR_OP_SUM || n->op > IR_OP_PROD)
        return false;
    int dt = n->dtype;
    if (!ir_dtype_is_numeric(dt) || ir_node_get(g, ir_inputs(g, n)[0])->dtype != dt)
        return false;
    int64_t outer, len, inner;
    if (!red_geometry(g, n, &outer, &len, &inner))
        return false;
    bool no_identity =
        n->op == IR_OP_MAX || n->op == IR_OP_MIN || (n->op == IR_OP_MEAN && ir_dtype_is_int(dt));
    return !(len == 0 && outer * inner > 0 && no_identity); /* the reference reports that error */
}

bool jit_cpu_softmax_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    if ((n->op != IR_OP_SOFTMAX && n->op != IR_OP_LOG_SOFTMAX) || n->n_in != 1)
        return false;
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    return ir_dtype_is_float(n->dtype) && x->dtype == n->dtype && x->rank >= 1 &&
           n->a.i[0] == x->rank - 1 && ir_numel(x->rank, x->dims) >= 0;
}

#ifdef TJ_HAVE_LLVM

typedef jit_cpu_em em;

#define c64 jit_cpu_c64
typedef jit_cpu_loop loop;
#define loop_begin jit_cpu_loop_begin
#define loop_end jit_cpu_loop_end

static LLVMValueRef intrin2(em *e, const char *name, LLVMValueRef x, LLVMValueRef y) {
    LLVMTypeRef t = LLVMTypeOf(x);
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->m, id, &t, 1);
    LLVMValueRef a[2] = {x, y};
    return LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->c, id, &t, 1), f, a, 2, "");
}

static LLVMValueRef fast(LLVMValueRef v, LLVMFastMathFlags f) {
    if (f && LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
        LLVMSetFastMathFlags(v, f);
    return v;
}

static LLVMValueRef load_at(em *e, LLVMValueRef base, int dt, LLVMValueRef off) {
    LLVMTypeRef mt = dt == TJ_BOOL ? e->i8 : jit_cpu_reg_ty(e, dt);
    LLVMValueRef v =
        LLVMBuildLoad2(e->b, mt, LLVMBuildInBoundsGEP2(e->b, mt, base, &off, 1, ""), "");
    return dt == TJ_BOOL ? LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(e->i8, 0, 0), "") : v;
}

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
    int op, dt;
    bool fl, strict;
    LLVMTypeRef t, at; /* the result type; the accumulator's (double for float SUM/MEAN/PROD) */
    LLVMValueRef init;
    int64_t len;
} red_ops;

static red_ops red_ops_make(em *e, int op, int dt, bool strict, int64_t len) {
    red_ops r = {.op = op, .dt = dt, .fl = ir_dtype_is_float(dt), .strict = strict, .len = len};
    r.t = jit_cpu_reg_ty(e, dt);
    r.at = r.fl && (op == IR_OP_SUM || op == IR_OP_MEAN || op == IR_OP_PROD) ? e->f64 : r.t;
    if (op == IR_OP_MAX || op == IR_OP_MIN)
        r.init = r.fl ? LLVMConstReal(r.at, op == IR_OP_MAX ? -INFINITY : INFINITY)
                      : LLVMConstInt(r.at,
                                     op == IR_OP_MAX
                                         ? (dt == TJ_I32 ? 0x80000000ull : 1ull << 63)
                                         : (dt == TJ_I32 ? 0x7fffffffull : (1ull << 63) - 1),
                                     0);
    else
        r.init = r.fl ? LLVMConstReal(r.at, op == IR_OP_PROD) : LLVMConstInt(r.at, op == IR_OP_PROD, 0);
    return r;
}

/* acc combined with input value v (of type t). */
static LLVMValueRef red_step(em *e, const red_ops *r, LLVMValueRef acc, LLVMValueRef v) {
    LLVMBuilderRef b = e->b;
    LLVMFastMathFlags ff = r->strict ? 0 : LLVMFastMathAllowReassoc;
    if (r->at != r->t)
        v = LLVMBuildFPExt(b, v, r->at, "");
    switch (r->op) {
    case IR_OP_PROD:
        return r->fl ? fast(LLVMBuildFMul(b, acc, v, ""), ff) : LLVMBuildMul(b, acc, v, "");
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
        return LLVMBuildSelect(b, LLVMBuildICmp(b, mx ? LLVMIntSGT : LLVMIntSLT, v, acc, ""), v,
                               acc, "");
    }
    default:
        return r->fl ? fast(LLVMBuildFAdd(b, acc, v, ""), ff) : LLVMBuildAdd(b, acc, v, "");
    }
}

/* The output value (type t) of a finished accumulator. */
static LLVMValueRef red_finish(em *e, const red_ops *r, LLVMValueRef acc) {
    LLVMBuilderRef b = e->b;
    if (r->op == IR_OP_MEAN) {
        if (r->fl)
            acc = r->len ? LLVMBuildFDiv(b, acc, LLVMConstReal(r->at, (double)r->len), "")
                         : LLVMConstReal(r->at, NAN);
        else if (r->len) /* the wrapped sum divided, truncating */
            acc = LLVMBuildTrunc(
                b, LLVMBuildSDiv(b, LLVMBuildSExt(b, acc, e->i64, ""), c64(e, r->len), ""), r->t,
                "");
    }
    return r->at != r->t ? LLVMBuildFPTrunc(b, acc, r->t, "") : acc;
}

/* Kept axes after the reduced ones: a unit is a block of up to RED_BLOCK consecutive i of one o,
 * whose accumulators live in a stack array updated row by row over k, so the i loop is
 * contiguous (it vectorizes) and every output element still accumulates in input order, as the
 * reference kernel does. */
enum { RED_BLOCK = 256 };

tj_status jit_cpu_red_emit(LLVMModuleRef m, const ir_graph *g, const pass_group *gr,
                           const char *name, const jit_cpu_opts *o, jit_cpu_ew_plan *plan) {
    const ir_node *root = ir_node_get(g, gr->nodes[gr->n_nodes - 1]);
    int64_t outer, len, inner;
    if (!gr->reduce || !red_geometry(g, root, &outer, &len, &inner))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: reduction not generated",
                         ir_ops[root->op].name);
    int64_t n_blocks = (inner + RED_BLOCK - 1) / RED_BLOCK, blk = inner < RED_BLOCK ? inner : RED_BLOCK;
    plan->n_units = inner == 1 ? outer : outer * n_blocks;
    plan->unit_len = (len ? len : 1) * blk;
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
    LLVMValueRef fn = jit_cpu_kernel_begin(e, name, ni + 1, ptrs);
    for (uint32_t i = 0; i < ni; i++) {
        const ir_node *x = ir_node_get(g, gr->inputs[i]);
        if (ir_numel(x->rank, x->dims) == 1 && len * outer * inner != 1)
            pre[i] = load_at(e, ptrs[i], x->dtype, c64(e, 0));
    }
    red_ops r = red_ops_make(e, root->op, root->dtype, o->no_contract, len);
    LLVMValueRef accs = NULL;
    if (inner > 1) {
        accs = LLVMBuildAlloca(b, LLVMArrayType2(r.at, RED_BLOCK), "acc");
        LLVMSetAlignment(accs, 64);
    }
    tj_status st = TJ_OK;
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->c, fn, "rows");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    loop u = loop_begin(e, fn, begin);
#define VALUE_AT(off)                                                                                  do {                                                                                                   if (!(v = eval_group(e, g, gr, ptrs, pre, (off), vals))) {                                             st = ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: a producer has no lowering",                                     ir_ops[r.op].name);                                                                 v = LLVMConstNull(r.t);                                                                        }                                                                                              } while (0)
    LLVMValueRef v;
    if (inner == 1) { /* out[o] = R_k x[o, k]: the accumulator in a register */
        LLVMValueRef acc = r.init;
        if (len > 0) {
            LLVMValueRef base = LLVMBuildNSWMul(b, u.i, c64(e, len), "");
            LLVMBasicBlockRef pre_bb = LLVMGetInsertBlock(b);
            loop l = loop_begin(e, fn, c64(e, 0));
            LLVMValueRef phi = LLVMBuildPhi(b, r.at, "acc");
            LLVMAddIncoming(phi, &r.init, &pre_bb, 1);
            VALUE_AT(LLVMBuildNSWAdd(b, base, l.i, ""));
            LLVMValueRef nacc = red_step(e, &r, phi, v);
            LLVMBasicBlockRef latch = loop_end(e, fn, &l, c64(e, len));
            LLVMAddIncoming(phi, &nacc, &latch, 1);
            acc = nacc;
        }
        LLVMBuildStore(b, red_finish(e, &r, acc), LLVMBuildInBoundsGEP2(b, r.t, ptrs[ni], &u.i, 1, ""));
    } else { /* out[o, i0 + i] = R_k x[o, k, i0 + i] for i < cnt, accumulators in accs */
        LLVMValueRef nb = c64(e, n_blocks);
        LLVMValueRef oi = LLVMBuildSDiv(b, u.i, nb, ""), bi = LLVMBuildSRem(b, u.i, nb, "");
        LLVMValueRef i0 = LLVMBuildNSWMul(b, bi, c64(e, RED_BLOCK), "");
        LLVMValueRef left = LLVMBuildNSWSub(b, c64(e, inner), i0, "");
        LLVMValueRef cnt = LLVMBuildSelect(
            b, LLVMBuildICmp(b, LLVMIntSLT, left, c64(e, RED_BLOCK), ""), left, c64(e, RED_BLOCK), "");
#define ACC_AT(i) LLVMBuildInBoundsGEP2(b, r.at, accs, (LLVMValueRef[]){i}, 1, "")
        loop li = loop_begin(e, fn, c64(e, 0));
        LLVMBuildStore(b, r.init, ACC_AT(li.i));
        loop_end(e, fn, &li, cnt);
        if (len > 0) {
            loop lk = loop_begin(e, fn, c64(e, 0));
            LLVMValueRef row = LLVMBuildNSWAdd(
                b, LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oi, c64(e, len), ""), lk.i, ""),
                                   c64(e, inner), ""),
                i0, "");
            loop l2 = loop_begin(e, fn, c64(e, 0));
            VALUE_AT(LLVMBuildNSWAdd(b, row, l2.i, ""));
            LLVMValueRef ap = ACC_AT(l2.i);
            LLVMBuildStore(b, red_step(e, &r, LLVMBuildLoad2(b, r.at, ap, ""), v), ap);
            loop_end(e, fn, &l2, cnt);
            loop_end(e, fn, &lk, c64(e, len));
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
    LLVMValueRef v = LLVMBuildInsertElement(b, LLVMGetUndef(s->vt), x, LLVMConstInt(s->e->i32, 0, 0),
                                            "");
    return LLVMBuildShuffleVector(b, v, LLVMGetUndef(s->vt),
                                  LLVMConstNull(LLVMVectorType(s->e->i32, s->W)), "");
}

static LLVMValueRef sm_const(smv *s, double v) {
    LLVMValueRef a[16];
    for (unsigned i = 0; i < s->W; i++)
        a[i] = LLVMConstReal(s->t, v);
    return LLVMConstVector(a, s->W);
}

static LLVMValueRef sm_call(smv *s, const char *name, LLVMTypeRef *ov, unsigned n_ov,
                            LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(s->e->m, id, ov, n_ov);
    return LLVMBuildCall2(s->e->b, LLVMIntrinsicGetType(s->e->c, id, ov, n_ov), f, args, n, "");
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
        return sm_call(s, "llvm.masked.load", ov, 2, a, 4);
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
        sm_call(s, "llvm.masked.store", ov, 2, a, 4);
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
    return fast(sm_call(s, "llvm.vector.reduce.fmax", &s->vt, 1, &v, 1), LLVMFastMathNoNaNs);
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
            b,
            LLVMBuildFSub(b, sm_load(s, sm_at(s, r->xp, off), s->esz, mask, 0), r->mp, ""),
            r->cp, "");
    else
        y = LLVMBuildFMul(b, sm_load(s, sm_at(s, r->ep, off), 64, mask, 0), r->cp, "");
    sm_store(s, y, sm_at(s, r->yp, off), nt ? 64 : s->esz, mask, nt);
}

/* Row max of x + row*len into a scalar (vector loop, then the masked tail). */
static LLVMValueRef sm_rowmax(smv *s, LLVMValueRef xrow) {
    em *e = s->e;
    LLVMBasicBlockRef bb = LLVMGetInsertBlock(e->b);
    loop l = loop_begin(e, s->fn, c64(e, 0));
    LLVMValueRef ninf = sm_const(s, -INFINITY), acc = LLVMBuildPhi(e->b, s->vt, "");
    LLVMAddIncoming(acc, &ninf, &bb, 1);
    LLVMValueRef off = LLVMBuildNSWMul(e->b, l.i, c64(e, s->W), "");
    LLVMValueRef nacc = sm_max(s, acc, sm_load(s, sm_at(s, xrow, off), s->esz, NULL, 0));
    bb = loop_end(e, s->fn, &l, c64(e, s->nvec));
    LLVMAddIncoming(acc, &nacc, &bb, 1);
    if (s->tmask)
        nacc = sm_max(s, nacc,
                      sm_load(s, sm_at(s, xrow, c64(e, s->nvec * s->W)), s->esz, s->tmask,
                              -INFINITY));
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
    bb = LLVMGetInsertBlock(b);
    loop l = loop_begin(e, s->fn, c64(e, 0));
    LLVMValueRef vmax = LLVMBuildPhi(b, s->vt, ""), vsum = LLVMBuildPhi(b, s->vt, "");
    LLVMValueRef ninf = sm_const(s, -INFINITY), vzero = sm_const(s, 0);
    LLVMAddIncoming(vmax, &ninf, &bb, 1);
    LLVMAddIncoming(vsum, &vzero, &bb, 1);
    LLVMValueRef nmax = vmax, nsum = vsum;
    sm_step(s, &r, LLVMBuildNSWMul(b, l.i, c64(e, s->W), ""), NULL, nt, &nmax, &nsum);
    bb = loop_end(e, s->fn, &l, c64(e, s->nvec));
    LLVMAddIncoming(vmax, &nmax, &bb, 1);
    LLVMAddIncoming(vsum, &nsum, &bb, 1);
    if (s->tmask)
        sm_step(s, &r, c64(e, s->nvec * s->W), s->tmask, false, &nmax, &nsum);
    LLVMValueRef red[2] = {LLVMConstReal(s->t, -0.0), nsum};
    LLVMValueRef sum = fast(sm_call(s, "llvm.vector.reduce.fadd", &s->vt, 1, red, 2),
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
    smv s = {.e = e, .fn = fn, .t = jit_cpu_reg_ty(e, dt), .esz = (unsigned)ir_dtype_size(dt),
             .len = len, .is_log = is_log};
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
                               const jit_cpu_opts *o, jit_cpu_ew_plan *plan) {
    if (!jit_cpu_softmax_supported(g, id))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: softmax %%%u not generated", id);
    const ir_node *n = ir_node_get(g, id);
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    int64_t len = x->dims[x->rank - 1], numel = ir_numel(x->rank, x->dims);
    plan->n_units = len ? numel / len : 0;
    plan->unit_len = len ? len : 1;
    bool is_log = n->op == IR_OP_LOG_SOFTMAX, exact = o->exact_math;
    int64_t esz = (int64_t)ir_dtype_size(n->dtype), w = 64 / esz;
    if (!exact && len >= w && 2 * ((len + w - 1) / w * w) * esz <= SM_SCRATCH) {
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

#endif /* TJ_HAVE_LLVM */
