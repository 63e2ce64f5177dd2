/* generate.c — the code generator's entry (cpu.h: jit_cpu_codegen): emits every kernel of a plan
 * plan_decide.c made (the steps, their work units, chains, names and which kernels are the same
 * code) into one LLVM module, one function per distinct kernel (a chain's members once each, then
 * the chain calling them) under symbols derived from the plan's key, and compiles it. The code
 * cache was asked first (compile.c): only a miss comes here. Native control flow the codegen turns
 * down after all runs on the executor (TJ_LOG=compile says so). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"
#include "jit/cpu/program.h"

/* Marks every loop of the functions after `last` in m (to the module's end) not to be unrolled:
 * each conditional branch back to its own block or an earlier one (the code generators lay a
 * loop's head out before its body) gets llvm.loop.unroll.disable. */
static void no_unroll_after(LLVMModuleRef m, LLVMValueRef last) {
    LLVMContextRef c = LLVMGetModuleContext(m);
    unsigned kind = LLVMGetMDKindIDInContext(c, "llvm.loop", 9);
    for (LLVMValueRef f = last ? LLVMGetNextFunction(last) : LLVMGetFirstFunction(m); f;
         f = LLVMGetNextFunction(f)) {
        uint32_t nb = LLVMCountBasicBlocks(f);
        LLVMBasicBlockRef *bbs = nb ? calloc(nb, sizeof *bbs) : NULL;
        if (!bbs)
            continue; /* none, or no memory: an optimisation of the compile only */
        LLVMGetBasicBlocks(f, bbs);
        for (uint32_t k = 0; k < nb; k++) {
            LLVMValueRef br = LLVMGetBasicBlockTerminator(bbs[k]);
            if (!br || LLVMGetInstructionOpcode(br) != LLVMBr || !LLVMIsConditional(br) ||
                LLVMGetMetadata(br, kind))
                continue;
            bool back = false;
            for (unsigned s = 0; s < LLVMGetNumSuccessors(br) && !back; s++)
                for (uint32_t j = 0; j <= k && !back; j++)
                    back = bbs[j] == LLVMGetSuccessor(br, s);
            if (back)
                jit_cpu_branch_no_unroll(c, br);
        }
        free(bbs);
    }
}

static tj_status emit_kernel(LLVMModuleRef m, cpu_prog *cp, step *sp, const jit_cpu_opts *o);

/* Emits step sp's kernel. Quick code (jit_cpu_opts.quick) leaves the loops of a small kernel as
 * loops: unrolled, their short constant trip counts made most of a module's code and about half
 * its compile time; a hot signature's recompile unrolls them (bench/RESULTS.md). A large
 * kernel's loops are unrolled as O3 decides: not unrolled, a broadcasting loop over rows of 1024
 * ran 1.35x slower, for little compile time. */
static tj_status emit_step(LLVMModuleRef m, cpu_prog *cp, step *sp, const jit_cpu_opts *o) {
    LLVMValueRef last = LLVMGetLastFunction(m);
    tj_status st = emit_kernel(m, cp, sp, o);
    if (!st && o->quick && jit_cpu_step_small(cp, sp))
        no_unroll_after(m, last);
    return st;
}

static tj_status emit_kernel(LLVMModuleRef m, cpu_prog *cp, step *sp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->rp.base.g;
    bool contract = !o->no_contract;
    if (sp->kind == STEP_CF)
        return jit_cpu_cf_emit(m, g, sp->id, sp->name, o);
    if (sp->kind == STEP_BLAS || sp->kind == STEP_CONV)
        return sp->epi ? jit_cpu_ew_emit(m, g, sp->epi, sp->name, contract, o->exact_math,
                                         sp->generic, &sp->plan)
                       : TJ_OK;
    switch (sp->sub) {
    case SUB_EW:
        return jit_cpu_ew_emit(m, g, &cp->part->groups[sp->id], sp->name, contract, o->exact_math,
                               sp->generic, &sp->plan);
    case SUB_RED:
        return jit_cpu_red_emit(m, g, &cp->part->groups[sp->id], sp->name, o,
                                sp->generic == RT_GENERIC_RED, &sp->plan);
    case SUB_MM:
        return jit_cpu_mm_emit(m, g, sp->id, sp->name, o, &sp->plan);
    case SUB_VIEW:
        return jit_cpu_view_emit(m, g, sp->id, sp->name, &sp->plan);
    default:
        return jit_cpu_softmax_emit(m, g, sp->id, sp->name, o, &sp->plan);
    }
}

/* Emits chain step sp: its members (each distinct member once in the module: equal[m] the member
 * whose function member m calls), then the chain function calling them. */
static tj_status emit_chain(LLVMModuleRef m, cpu_prog *cp, step *sp, const jit_cpu_opts *o,
                            const step **done, uint32_t *n_done) {
    jit_cpu_member *mem = calloc(sp->n_members + 1, sizeof *mem);
    tj_status st = mem ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t k = 0; k < sp->n_members && !st; k++) {
        step *ms = &sp->members[k];
        const step *same = NULL;
        for (uint32_t j = 0; j < *n_done && !same; j++)
            if (jit_cpu_same_kernel(cp, done[j], ms))
                same = done[j];
        if (!same) {
            st = emit_step(m, cp, ms, o);
            done[(*n_done)++] = same = ms;
        }
        mem[k] =
            (jit_cpu_member){same->name, ms->plan.n_units, ms->n_in, ms->n_out, ms->in, ms->out};
    }
    if (!st)
        st = jit_cpu_chain_emit(m, cp->rp.base.g, mem, sp->n_members, sp->in, sp->n_in, sp->out,
                                sp->n_out, sp->name);
    free(mem);
    return st;
}

/* Emits the kernels the plan names that were not found in loaded code (draft holds those) into
 * a new module and compiles it; cp->shared holds the program's code, draft completed. */
static tj_status generate(cpu_prog *cp, const jit_cpu_opts *o, const char **names, void **addrs,
                          uint32_t *nk, jit_cpu_shared *draft) {
    tj_status st0 = jit_cpu_llvm_init(); /* the target machines: a cache hit never needs them */
    if (st0) {
        jit_cpu_shared_release(draft);
        return st0;
    }
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("tracejit", ctx);
    jit_cpu_prepare_module(m);
    uint32_t n_members = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++)
        n_members += cp->steps[s].n_members;
    const step **done = calloc(n_members + 1, sizeof *done);
    const char **fresh = calloc(cp->n_steps + 1, sizeof *fresh);
    void **fresh_addrs = calloc(cp->n_steps + 1, sizeof *fresh_addrs);
    uint32_t n_done = 0, n_fresh = 0;
    tj_status st =
        done && fresh && fresh_addrs ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        step *sp = &cp->steps[s];
        if (!sp->name[0] || sp->alias || sp->found)
            continue;
        if (sp->kind == STEP_GEN && sp->sub == SUB_CHAIN) {
            st = emit_chain(m, cp, sp, o, done, &n_done);
            continue;
        }
        st = emit_step(m, cp, sp, o);
        if (st && sp->kind == STEP_CF) { /* not lowered after all: the executor runs it */
            rt_log(RT_LOG_COMPILE, "cpu: %%%u %s: executor (%s)", sp->id,
                   ir_ops[ir_node_get(cp->rp.base.g, sp->id)->op].name, ir_last_error());
            ir_clear_error();
            sp->kind = STEP_NODE;
            sp->name[0] = 0;
            st = TJ_OK;
        }
    }
    free(done);
    /* a control-flow step the codegen turned down has no name now */
    *nk = jit_cpu_symbol_names(cp, names);
    for (uint32_t s = 0; s < cp->n_steps; s++)
        if (cp->steps[s].name[0] && !cp->steps[s].alias && !cp->steps[s].found)
            fresh[n_fresh++] = cp->steps[s].name;
    jit_cpu_code *code = NULL;
    if (!st && n_fresh) {
        /* disposes m and ctx */
        code = jit_cpu_code_compile(m, ctx, fresh, n_fresh, fresh_addrs);
        if (!code)
            st = ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
    } else {
        LLVMDisposeModule(m);
        LLVMContextDispose(ctx);
    }
    if (!st && *nk &&
        !(cp->shared = jit_cpu_shared_finish(draft, cp->key, code, fresh, fresh_addrs, n_fresh,
                                             names, *nk, addrs, true)))
        st = ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
    else if (st || !*nk)
        jit_cpu_shared_release(draft), jit_cpu_code_free(code);
    free(fresh);
    free(fresh_addrs);
    return st;
}

/* The code generator this library links (cpu.h): LLVM's. */
const jit_cpu_codegen jit_cpu_codegen_linked = {
    .unavailable = jit_cpu_llvm_unavailable,
    .target_id = jit_cpu_llvm_target_id,
    .generate = generate,
    .lowers = jit_cpu_ew_lowered,
};
