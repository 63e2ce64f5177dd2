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

static tj_status emit_step(LLVMModuleRef m, cpu_prog *cp, step *sp, const jit_cpu_opts *o) {
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

/* Emits every kernel the plan names into a new module and compiles it; cp->shared holds it. */
static tj_status generate(cpu_prog *cp, const jit_cpu_opts *o, const char **names, void **addrs,
                          uint32_t *nk) {
    tj_status st0 = jit_cpu_llvm_init(); /* the target machines: a cache hit never needs them */
    if (st0)
        return st0;
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("tracejit", ctx);
    jit_cpu_prepare_module(m);
    uint32_t n_members = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++)
        n_members += cp->steps[s].n_members;
    const step **done = calloc(n_members + 1, sizeof *done);
    uint32_t n_done = 0;
    tj_status st = done ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        step *sp = &cp->steps[s];
        if (!sp->name[0] || sp->alias)
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
    *nk =
        jit_cpu_symbol_names(cp, names); /* a control-flow step the codegen turned down has none */
    if (st || !*nk) {
        LLVMDisposeModule(m);
        LLVMContextDispose(ctx);
        return st;
    }
    jit_cpu_code *code = jit_cpu_code_compile(m, ctx, names, *nk, addrs);
    if (!code || !(cp->shared = jit_cpu_shared_add(cp->key, code, names, *nk, addrs, true)))
        return ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
    return TJ_OK;
}

/* The code generator this library links (cpu.h): LLVM's. */
const jit_cpu_codegen jit_cpu_codegen_linked = {
    .unavailable = jit_cpu_llvm_unavailable,
    .target_id = jit_cpu_llvm_target_id,
    .generate = generate,
    .lowers = jit_cpu_ew_lowered,
};
