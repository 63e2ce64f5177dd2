/* codegen_mm.c — generated matrix products: the small ones (every dim <= 64, chained by
 * codegen_chain.c so that power(x, 100) is one native function), every integer one, and large
 * float ones when OpenBLAS is absent. One unit of work is one output row: its n outputs are held
 * in vector registers (<W x acc>, W <= 64) while p runs over k, each step adding a[i,p] times a
 * row segment of b, so loads are contiguous and shapes are constants. Semantics are the reference
 * kernel's (runtime/kernels/matmul.c): integers wrap (a sum in the dtype's width equals the
 * uint64 sum truncated); floats accumulate in their own dtype in p order, a multiply and an add per
 * step with no_contract (bit-identical), else one FMA per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"

bool jit_cpu_mm_shape(const ir_graph *g, uint32_t id, rt_mm *s) {
    const ir_node *n = ir_node_get(g, id);
    if (n->op != IR_OP_MATMUL || n->n_in != 2)
        return false;
    const uint32_t *in = ir_inputs(g, n);
    const ir_node *a = ir_node_get(g, in[0]), *b = ir_node_get(g, in[1]);
    int dt = n->dtype;
    if (a->dtype != dt || b->dtype != dt || !(ir_dtype_is_float(dt) || ir_dtype_is_index(dt)) ||
        a->rank < 1 || b->rank < 1 || ir_numel(n->rank, n->dims) < 0 ||
        ir_numel(a->rank, a->dims) < 0 || ir_numel(b->rank, b->dims) < 0)
        return false;
    memset(s, 0, sizeof *s);
    s->dt = dt;
    s->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    s->k = a->dims[a->rank - 1];
    s->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if ((b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0]) != s->k)
        return false;
    int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank >= 2 ? b->rank - 2 : 0;
    s->rank = ra > rb ? ra : rb;
    s->batches = 1;
    for (int d = 0; d < s->rank; d++) {
        int da = d - (s->rank - ra), db = d - (s->rank - rb);
        int64_t xa = da >= 0 ? a->dims[da] : 1, xb = db >= 0 ? b->dims[db] : 1;
        if (xa != xb && xa != 1 && xb != 1)
            return false;
        s->dims[d] = xa == 1 ? xb : xa;
        s->batches *= s->dims[d];
    }
    int64_t ma = 1, mb = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int da = d - (s->rank - ra), db = d - (s->rank - rb);
        int64_t xa = da >= 0 ? a->dims[da] : 1, xb = db >= 0 ? b->dims[db] : 1;
        s->sa[d] = xa == 1 ? 0 : ma;
        s->sb[d] = xb == 1 ? 0 : mb;
        ma *= xa;
        mb *= xb;
    }
    return s->batches * s->m * s->n == ir_numel(n->rank, n->dims);
}

bool jit_cpu_mm_small(const rt_mm *s) {
    return s->m <= 64 && s->k <= 64 && s->n <= 64;
}

/* Units of the generated product of matmul node id: rows of the output (batches x m). */
tj_status jit_cpu_mm_units(const ir_graph *g, uint32_t id, rt_units *plan) {
    rt_mm s;
    if (!jit_cpu_mm_shape(g, id, &s))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: matmul %%%u: no generated lowering", id);
    plan->n_units = s.n == 0 ? 0 : s.batches * s.m;
    plan->unit_len = s.n * (s.k > 0 ? s.k : 1);
    return TJ_OK;
}

#ifdef TJ_HAVE_LLVM

typedef jit_cpu_em em;

#define c64 jit_cpu_c64
typedef jit_cpu_loop loop;
#define loop_begin jit_cpu_loop_begin
#define loop_end jit_cpu_loop_end

/* One segment of W outputs of row `arow` (element offset of a's row) starting at column j0. */
static void emit_segment(em *e, LLVMValueRef fn, const rt_mm *s, LLVMValueRef A, LLVMValueRef B,
                         LLVMValueRef O, LLVMValueRef arow, LLVMValueRef bbase, LLVMValueRef orow,
                         LLVMValueRef j0, unsigned W, bool strict) {
    LLVMBuilderRef b = e->b;
    bool fl = ir_dtype_is_float(s->dt);
    LLVMTypeRef et = jit_cpu_reg_ty(e, s->dt);
    LLVMTypeRef vt = LLVMVectorType(et, W); /* accumulators: the dtype itself, as the reference */
    unsigned align = (unsigned)ir_dtype_size(s->dt);
    LLVMValueRef acc0 = LLVMConstNull(vt), acc = acc0;
    if (s->k > 0) {
        LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
        loop l = loop_begin(e, fn, c64(e, 0));
        LLVMValueRef phi = LLVMBuildPhi(b, vt, "acc");
        LLVMAddIncoming(phi, &acc0, &pre, 1);
        LLVMValueRef ai = LLVMBuildNSWAdd(b, arow, l.i, "");
        LLVMValueRef av = LLVMBuildLoad2(b, et, LLVMBuildInBoundsGEP2(b, et, A, &ai, 1, ""), "");
        LLVMValueRef bi = LLVMBuildNSWAdd(
            b, LLVMBuildNSWAdd(b, bbase, LLVMBuildNSWMul(b, l.i, c64(e, s->n), ""), ""), j0, "");
        LLVMValueRef bv = LLVMBuildLoad2(b, vt, LLVMBuildInBoundsGEP2(b, et, B, &bi, 1, ""), "");
        LLVMSetAlignment(bv, align);
        LLVMValueRef sp = LLVMBuildInsertElement(b, LLVMGetUndef(vt), av, c64(e, 0), "");
        LLVMValueRef zmask = LLVMConstNull(LLVMVectorType(e->i32, W));
        sp = LLVMBuildShuffleVector(b, sp, LLVMGetUndef(vt), zmask, "");
        LLVMValueRef nacc;
        if (fl) {
            LLVMValueRef pr = LLVMBuildFMul(b, sp, bv, "");
            nacc = LLVMBuildFAdd(b, phi, pr, "");
            if (e->contract && !strict) {
                LLVMSetFastMathFlags(pr, LLVMFastMathAllowContract);
                LLVMSetFastMathFlags(nacc, LLVMFastMathAllowContract);
            }
        } else {
            nacc = LLVMBuildAdd(b, phi, LLVMBuildMul(b, sp, bv, ""), "");
        }
        LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
        loop_end(e, fn, &l, c64(e, s->k));
        LLVMAddIncoming(phi, &nacc, &latch, 1);
        acc = nacc; /* the value leaving the loop is the last update */
    }
    LLVMValueRef oi = LLVMBuildNSWAdd(b, orow, j0, "");
    LLVMValueRef st = LLVMBuildStore(b, acc, LLVMBuildInBoundsGEP2(b, et, O, &oi, 1, ""));
    LLVMSetAlignment(st, align);
}

tj_status jit_cpu_mm_emit(LLVMModuleRef mod, const ir_graph *g, uint32_t id, const char *name,
                          const jit_cpu_opts *o, rt_units *plan) {
    rt_mm s;
    if (!jit_cpu_mm_shape(g, id, &s))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: matmul %%%u: no generated lowering", id);
    bool strict = o->no_contract;
    em E;
    jit_cpu_em_init(&E, mod, !o->no_contract, o->exact_math);
    em *e = &E;
    LLVMBuilderRef b = e->b;
    LLVMValueRef p[3];
    LLVMValueRef fn = jit_cpu_kernel_begin(e, name, 3, p);
    if (jit_cpu_mm_units(g, id, plan))
        return ir_last_code();
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->c, fn, "rows");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    loop u = loop_begin(e, fn, begin);
    /* row u: batch bi = u / m, row i = u % m; batch offsets from the broadcast strides */
    LLVMValueRef bi = s.m == 1 ? u.i : LLVMBuildUDiv(b, u.i, c64(e, s.m), "");
    LLVMValueRef i = s.m == 1 ? c64(e, 0) : LLVMBuildURem(b, u.i, c64(e, s.m), "");
    LLVMValueRef oa = c64(e, 0), ob = c64(e, 0), rem = bi;
    for (int d = s.rank - 1; d >= 0; d--) {
        if (s.dims[d] == 1)
            continue;
        LLVMValueRef idx = d > 0 ? LLVMBuildURem(b, rem, c64(e, s.dims[d]), "") : rem;
        if (d > 0)
            rem = LLVMBuildUDiv(b, rem, c64(e, s.dims[d]), "");
        if (s.sa[d])
            oa = LLVMBuildNSWAdd(b, oa, LLVMBuildNSWMul(b, idx, c64(e, s.sa[d]), ""), "");
        if (s.sb[d])
            ob = LLVMBuildNSWAdd(b, ob, LLVMBuildNSWMul(b, idx, c64(e, s.sb[d]), ""), "");
    }
    LLVMValueRef arow = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oa, c64(e, s.m * s.k), ""),
                                        LLVMBuildNSWMul(b, i, c64(e, s.k), ""), "");
    LLVMValueRef bbase = LLVMBuildNSWMul(b, ob, c64(e, s.k * s.n), "");
    LLVMValueRef orow = LLVMBuildNSWMul(b, u.i, c64(e, s.n), "");
    /* segments: full ones of W columns in a loop, then one tail of n % W */
    unsigned W = ir_dtype_size(s.dt) == 8 || (s.dt == TJ_F32 && strict) ? 32 : 64;
    int64_t full = s.n / W, tail = s.n % W;
    if (full == 1) {
        emit_segment(e, fn, &s, p[0], p[1], p[2], arow, bbase, orow, c64(e, 0), W, strict);
    } else if (full > 1) {
        loop jl = loop_begin(e, fn, c64(e, 0));
        LLVMValueRef j0 = LLVMBuildNSWMul(b, jl.i, c64(e, W), "");
        emit_segment(e, fn, &s, p[0], p[1], p[2], arow, bbase, orow, j0, W, strict);
        loop_end(e, fn, &jl, c64(e, full));
    }
    if (tail)
        emit_segment(e, fn, &s, p[0], p[1], p[2], arow, bbase, orow, c64(e, full * W),
                     (unsigned)tail, strict);
    loop_end(e, fn, &u, end);
    jit_cpu_kernel_end(e, done);
    return TJ_OK;
}

#endif /* TJ_HAVE_LLVM */
