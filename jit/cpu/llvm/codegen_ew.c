/* codegen_ew.c — LLVM IR for one fused elementwise group: a loop over the group's loop shape that
 * computes every node in registers and stores only the group's outputs. Shapes are concrete, so
 * broadcast strides are constants: dims are collapsed first; when every input is full-size or a
 * scalar the kernel is one flat loop over elements (the case that must vectorize, and whose code
 * serves every size), else it loops over rows of the collapsed shape with an inner loop whose
 * strides are 0 or 1. A shape-generic kernel (rt_step.geom) takes that shape's outer extents and
 * strides from a geometry block after its buffers instead; its row length stays a constant.
 * One-element constants become immediates. The entry `name(bufs, begin, end)` loads the buffer
 * pointers and calls an always-inlined body whose pointer parameters are noalias, so the vectorizer
 * needs no runtime alias checks. Each op's scalar lowering lives in ew_ops.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"

typedef jit_cpu_em em;

static LLVMTypeRef mem_ty(em *e, int dt) {
    return dt == TJ_BOOL ? e->i8 : jit_cpu_reg_ty(e, dt);
}

static LLVMValueRef load_elem(em *e, LLVMValueRef base, int dt, LLVMValueRef off) {
    LLVMTypeRef mt = mem_ty(e, dt);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(e->b, mt, base, &off, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(e->b, mt, p, "");
    if (dt == TJ_BOOL)
        v = LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(e->i8, 0, 0), "");
    return v;
}

static void store_elem(em *e, LLVMValueRef base, int dt, LLVMValueRef off, LLVMValueRef v) {
    LLVMTypeRef mt = mem_ty(e, dt);
    if (dt == TJ_BOOL)
        v = LLVMBuildZExt(e->b, v, e->i8, "");
    LLVMValueRef p = LLVMBuildInBoundsGEP2(e->b, mt, base, &off, 1, "");
    LLVMBuildStore(e->b, v, p);
}

LLVMValueRef jit_cpu_const_scalar(em *e, const ir_graph *g, const ir_node *n) {
    const ir_blob *bl = ir_blob_get(g, n->a.blob);
    if (n->op != IR_OP_CONST || ir_numel(n->rank, n->dims) != 1 || !bl ||
        bl->size != ir_dtype_size(n->dtype))
        return NULL;
    switch (n->dtype) {
    case TJ_F32: {
        float v;
        memcpy(&v, bl->data, sizeof v);
        return LLVMConstReal(e->f32, v);
    }
    case TJ_F64: {
        double v;
        memcpy(&v, bl->data, sizeof v);
        return LLVMConstReal(e->f64, v);
    }
    case TJ_I32: {
        int32_t v;
        memcpy(&v, bl->data, sizeof v);
        return LLVMConstInt(e->i32, (unsigned long long)(int64_t)v, 1);
    }
    case TJ_I64: {
        int64_t v;
        memcpy(&v, bl->data, sizeof v);
        return LLVMConstInt(e->i64, (unsigned long long)v, 1);
    }
    case TJ_BOOL:
        return LLVMConstInt(e->i1, *(const uint8_t *)bl->data != 0, 0);
    default:
        if (!ir_dtype_is_int(n->dtype))
            return NULL;
        return LLVMConstInt(jit_cpu_reg_ty(e, n->dtype),
                            (unsigned long long)ir_int_get(n->dtype, bl->data), 1);
    }
}

static uint32_t find_input(const pass_group *gr, uint32_t id) {
    uint32_t lo = 0, hi = gr->n_inputs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (gr->inputs[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < gr->n_inputs && gr->inputs[lo] == id ? lo : IR_NONE;
}

/* The loop body for one element: input offsets off[i] (NULL entries: scalars, preloaded in
 * pre[i]), output offset ooff. vals: scratch per group node. */
static tj_status emit_body(em *e, const ir_graph *g, const pass_group *gr, LLVMValueRef *ptrs,
                           LLVMValueRef *pre, LLVMValueRef *off, LLVMValueRef ooff,
                           LLVMValueRef *vals, LLVMValueRef *inv) {
    for (uint32_t i = 0; i < gr->n_inputs; i++)
        inv[i] =
            pre[i] ? pre[i] : load_elem(e, ptrs[i], ir_node_get(g, gr->inputs[i])->dtype, off[i]);
    uint32_t oi = 0;
    for (uint32_t k = 0; k < gr->n_nodes; k++) {
        const ir_node *n = ir_node_get(g, gr->nodes[k]);
        const uint32_t *in = ir_inputs(g, n);
        LLVMValueRef args[3] = {NULL, NULL, NULL};
        for (uint32_t j = 0; j < n->n_in && j < 3; j++) {
            uint32_t ii = find_input(gr, in[j]);
            if (ii != IR_NONE) {
                args[j] = inv[ii];
            } else {
                uint32_t lo = 0;
                while (gr->nodes[lo] != in[j])
                    lo++;
                args[j] = vals[lo];
            }
        }
        int t = n->n_in ? ir_node_get(g, in[n->op == IR_OP_WHERE ? 1 : 0])->dtype : -1;
        vals[k] = jit_cpu_emit_op(e, n, t, args);
        if (!vals[k])
            return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: no elementwise lowering",
                             ir_ops[n->op].name);
        if (oi < gr->n_outputs && gr->outputs[oi] == gr->nodes[k])
            store_elem(e, ptrs[gr->n_inputs + oi++], n->dtype, ooff, vals[k]);
    }
    return TJ_OK;
}

tj_status jit_cpu_ew_emit(LLVMModuleRef m, const ir_graph *g, const pass_group *gr,
                          const char *name, bool contract, bool exact_math, bool generic,
                          rt_units *plan) {
    rt_ew_layout L = {0};
    tj_status st = jit_cpu_ew_layout(g, gr, &L);
    uint32_t ni = gr->n_inputs, nb = gr->n_inputs + gr->n_outputs;
    LLVMValueRef *ptrs = calloc(nb + 1, sizeof *ptrs), *pre = calloc(ni + 1, sizeof *pre);
    LLVMValueRef *off = calloc(ni + 1, sizeof *off), *base = calloc(ni + 1, sizeof *base);
    LLVMValueRef *vals = calloc(gr->n_nodes + 1, sizeof *vals), *inv = calloc(ni + 1, sizeof *inv);
    if (!st && (!ptrs || !pre || !off || !base || !vals || !inv))
        st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    if (st)
        goto done;
    if ((st = jit_cpu_ew_units(g, gr, plan)) != TJ_OK)
        goto done;
    /* shape-generic: the outer extents and strides come from the geometry block after the
     * buffers (rt_ew_geom: dims, then per input its strides); the collapsed rank, which strides
     * are 0 (the innermost: 0 or 1) and the row length are the code's */
    generic = generic && !L.flat;
    uint32_t np = nb + (generic ? 1 : 0); /* pointer parameters of the body */

    em E;
    jit_cpu_em_init(&E, m, contract, exact_math);
    em *e = &E;
    LLVMBuilderRef b = e->b;

    /* the body: void name.body(ptr noalias p0, ..., [ptr geom,] i64 begin, i64 end), inlined
     * into the entry */
    LLVMTypeRef *pt = calloc(np + 2, sizeof *pt);
    if (!pt) {
        LLVMDisposeBuilder(b);
        st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < np; i++)
        pt[i] = e->ptr;
    pt[np] = pt[np + 1] = e->i64;
    LLVMTypeRef body_ty = LLVMFunctionType(LLVMVoidTypeInContext(e->c), pt, np + 2, 0);
    char bname[256];
    snprintf(bname, sizeof bname, "%s.body", name);
    LLVMValueRef body = LLVMAddFunction(m, bname, body_ty);
    LLVMSetLinkage(body, LLVMInternalLinkage);
    unsigned k_noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    unsigned k_nocapture = LLVMGetEnumAttributeKindForName("nocapture", 9);
    unsigned k_inline = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    unsigned k_nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    for (uint32_t i = 0; i < np; i++) {
        LLVMAddAttributeAtIndex(body, i + 1, LLVMCreateEnumAttribute(e->c, k_noalias, 0));
        LLVMAddAttributeAtIndex(body, i + 1, LLVMCreateEnumAttribute(e->c, k_nocapture, 0));
    }
    LLVMAddAttributeAtIndex(body, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(e->c, k_inline, 0));
    LLVMAddAttributeAtIndex(body, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(e->c, k_nounwind, 0));
    for (uint32_t i = 0; i < nb; i++)
        ptrs[i] = LLVMGetParam(body, i);
    LLVMValueRef begin = LLVMGetParam(body, np), end = LLVMGetParam(body, np + 1);

    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->c, body, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->c, body, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->c, body, "exit");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef z64 = LLVMConstInt(e->i64, 0, 0), one64 = LLVMConstInt(e->i64, 1, 0);
    /* one-element inputs loaded once, before the loop, or immediates (jit_cpu_const_immediate) */
    for (uint32_t i = 0; i < ni; i++) {
        const ir_node *x = ir_node_get(g, gr->inputs[i]);
        if (L.scalar[i] &&
            !(jit_cpu_const_immediate(g, x) && (pre[i] = jit_cpu_const_scalar(e, g, x))))
            pre[i] = load_elem(e, ptrs[i], x->dtype, z64);
    }
    /* the extents and strides the loops use: constants, or the geometry block's (loaded once) */
    LLVMValueRef dim_v[IR_MAX_RANK], (*st_v)[IR_MAX_RANK] = calloc(ni + 1, sizeof *st_v);
    if (!st_v) {
        free(pt);
        LLVMDisposeBuilder(b);
        st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        goto done;
    }
    LLVMValueRef geom = generic ? LLVMGetParam(body, nb) : NULL;
    for (int d = 0; d < L.rank; d++) {
        bool outer = generic && d < L.rank - 1; /* the row length stays in the code */
        dim_v[d] = outer ? load_elem(e, geom, TJ_I64, LLVMConstInt(e->i64, d, 0))
                         : LLVMConstInt(e->i64, (unsigned long long)L.dims[d], 0);
        for (uint32_t i = 0; i < ni; i++)
            st_v[i][d] = outer && L.st[i][d] != 0
                             ? load_elem(e, geom, TJ_I64,
                                         LLVMConstInt(e->i64, (1 + i) * (uint32_t)L.rank + d, 0))
                             : LLVMConstInt(e->i64, (unsigned long long)L.st[i][d], 0);
    }
    LLVMValueRef len_v = L.flat ? NULL : dim_v[L.rank - 1];
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), loop, exit);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef u = LLVMBuildPhi(b, e->i64, "u");
    LLVMBasicBlockRef latch_from;
    if (L.flat) {
        for (uint32_t i = 0; i < ni; i++)
            off[i] = u;
        st = emit_body(e, g, gr, ptrs, pre, off, u, vals, inv);
        latch_from = LLVMGetInsertBlock(b);
    } else {
        /* row u: base offsets from its multi-index over the outer collapsed dims */
        LLVMValueRef rem = u;
        for (uint32_t i = 0; i < ni; i++)
            base[i] = z64;
        for (int d = L.rank - 2; d >= 0; d--) {
            LLVMValueRef dd = dim_v[d];
            LLVMValueRef idx = d > 0 ? LLVMBuildURem(b, rem, dd, "") : rem;
            if (d > 0)
                rem = LLVMBuildUDiv(b, rem, dd, "");
            for (uint32_t i = 0; i < ni; i++) {
                if (L.scalar[i] || L.st[i][d] == 0)
                    continue;
                LLVMValueRef s = st_v[i][d];
                base[i] = LLVMBuildNSWAdd(b, base[i], LLVMBuildNSWMul(b, idx, s, ""), "");
            }
        }
        LLVMValueRef obase = LLVMBuildNSWMul(b, u, len_v, "");
        LLVMBasicBlockRef row = LLVMGetInsertBlock(b);
        LLVMBasicBlockRef inner = LLVMAppendBasicBlockInContext(e->c, body, "inner");
        LLVMBasicBlockRef latch = LLVMAppendBasicBlockInContext(e->c, body, "latch");
        LLVMBuildBr(b, inner);
        LLVMPositionBuilderAtEnd(b, inner);
        LLVMValueRef j = LLVMBuildPhi(b, e->i64, "j");
        for (uint32_t i = 0; i < ni; i++)
            if (!L.scalar[i])
                off[i] = L.st[i][L.rank - 1] ? LLVMBuildNSWAdd(b, base[i], j, "") : base[i];
        st = emit_body(e, g, gr, ptrs, pre, off, LLVMBuildNSWAdd(b, obase, j, ""), vals, inv);
        LLVMValueRef j1 = LLVMBuildNSWAdd(b, j, one64, "");
        LLVMBasicBlockRef inner_end = LLVMGetInsertBlock(b);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j1, len_v, ""), inner, latch);
        LLVMAddIncoming(j, &z64, &row, 1);
        LLVMAddIncoming(j, &j1, &inner_end, 1);
        LLVMPositionBuilderAtEnd(b, latch);
        latch_from = latch;
    }
    LLVMValueRef u1 = LLVMBuildNSWAdd(b, u, one64, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, u1, end, ""), loop, exit);
    LLVMAddIncoming(u, &begin, &entry, 1);
    LLVMAddIncoming(u, &u1, &latch_from, 1);
    LLVMPositionBuilderAtEnd(b, exit);
    LLVMBuildRetVoid(b);

    /* the entry: void name(ptr bufs, i64 begin, i64 end) */
    LLVMTypeRef kp[3] = {e->ptr, e->i64, e->i64};
    LLVMTypeRef k_ty = LLVMFunctionType(LLVMVoidTypeInContext(e->c), kp, 3, 0);
    LLVMValueRef kf = LLVMAddFunction(m, name, k_ty);
    LLVMAddAttributeAtIndex(kf, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(e->c, k_nounwind, 0));
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(e->c, kf, "entry"));
    LLVMValueRef *cargs = calloc(np + 2, sizeof *cargs);
    if (!cargs) {
        free(st_v);
        free(pt);
        LLVMDisposeBuilder(b);
        st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < np; i++) { /* the buffers, and the geometry block after them */
        LLVMValueRef idx = LLVMConstInt(e->i64, i, 0);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, e->ptr, LLVMGetParam(kf, 0), &idx, 1, "");
        cargs[i] = LLVMBuildLoad2(b, e->ptr, slot, "");
    }
    cargs[np] = LLVMGetParam(kf, 1);
    cargs[np + 1] = LLVMGetParam(kf, 2);
    LLVMBuildCall2(b, body_ty, body, cargs, np + 2, "");
    LLVMBuildRetVoid(b);
    free(cargs);
    free(st_v);
    free(pt);
    LLVMDisposeBuilder(b);
done:
    rt_ew_layout_free(&L);
    free(ptrs);
    free(pre);
    free(off);
    free(base);
    free(vals);
    free(inv);
    return st;
}
