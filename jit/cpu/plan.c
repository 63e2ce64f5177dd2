/* plan.c — compiles the plan plan_decide.c made (the steps, their work units, chains, names and
 * which kernels are the same code): the code cache is asked first, by the plan's key, and only
 * when it holds nothing does LLVM run, emitting one function per distinct kernel (a chain's
 * members once each, then the chain calling them) into one module whose symbols derive from the
 * key. A cache hit builds no LLVM IR at all. Native control flow the codegen turns down after all
 * runs on the executor (TJ_LOG=compile says so). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/cpu/program.h"

#ifdef TJ_HAVE_LLVM

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static tj_status emit_step(LLVMModuleRef m, cpu_prog *cp, step *sp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->rp.base.g;
    bool contract = !o->no_contract;
    if (sp->kind == STEP_CF)
        return jit_cpu_cf_emit(m, g, sp->id, sp->name, o);
    if (sp->kind == STEP_BLAS || sp->kind == STEP_CONV)
        return sp->epi
                   ? jit_cpu_ew_emit(m, g, sp->epi, sp->name, contract, o->exact_math, &sp->plan)
                   : TJ_OK;
    switch (sp->sub) {
    case SUB_EW:
        return jit_cpu_ew_emit(m, g, &cp->part->groups[sp->id], sp->name, contract, o->exact_math,
                               &sp->plan);
    case SUB_RED:
        return jit_cpu_red_emit(m, g, &cp->part->groups[sp->id], sp->name, o, &sp->plan);
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

/* The symbols to look up: the steps with a kernel of their own (not an alias). */
static uint32_t symbol_names(const cpu_prog *cp, const char **names) {
    uint32_t nk = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++)
        if (cp->steps[s].name[0] && !cp->steps[s].alias)
            names[nk++] = cp->steps[s].name;
    return nk;
}

/* Emits every kernel the plan names into a new module and compiles it; cp->shared holds it. */
static tj_status build(cpu_prog *cp, const jit_cpu_opts *o, const char **names, void **addrs,
                       uint32_t *nk) {
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
    *nk = symbol_names(cp, names); /* a control-flow step the codegen turned down has none */
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

tj_status jit_cpu_plan(cpu_prog *cp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->rp.base.g;
    double t0 = now_ms();
    tj_status st = jit_cpu_plan_decide(cp, o);
    if (st)
        return st;
    /* the key names everything that changes the code; symbols derive from it */
    char base[1536], key[1700], prefix[40];
    jit_cpu_code_key(g, !o->no_contract, base, sizeof base, prefix, sizeof prefix);
    jit_cpu_plan_key(cp, o, base, key, sizeof key);
    jit_cpu_plan_names(cp, key);
    const char **names = calloc(cp->n_steps + 1, sizeof *names);
    void **addrs = calloc(cp->n_steps + 1, sizeof *addrs);
    if (!names || !addrs || !(cp->key = strdup(key))) {
        free(names);
        free(addrs);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    uint32_t nk = symbol_names(cp, names), n_alias = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++) /* what the plan lowers whole (build may decline) */
        if (cp->steps[s].kind == STEP_CF)
            rt_log(RT_LOG_COMPILE, "cpu: %%%u %s: native control flow", cp->steps[s].id,
                   ir_ops[ir_node_get(g, cp->steps[s].id)->op].name);
    for (uint32_t s = 0; s < cp->n_steps; s++)
        n_alias += cp->steps[s].alias != 0;
    int from = 0;
    jit_cpu_stats stats = {0};
    if (nk) /* the cache first: a hit builds no IR */
        cp->shared = jit_cpu_shared_find(key, names, nk, addrs, &from);
    if (nk && !cp->shared) {
        double t1 = now_ms();
        st = build(cp, o, names, addrs, &nk);
        stats = jit_cpu_last_stats();
        stats.build_ms = t1 - t0;
    } else {
        stats.from_cache = from;
        stats.build_ms = now_ms() - t0;
    }
    stats.n_kernels = nk;
    jit_cpu_stats_set(&stats);
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++)
        if (cp->steps[s].name[0] && !cp->steps[s].alias)
            cp->steps[s].fn = (rt_kernel_fn)addrs[k++];
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) /* aliases point at earlier steps */
        if (cp->steps[s].alias)
            cp->steps[s].fn = cp->steps[cp->steps[s].alias - 1].fn;
    free(names);
    free(addrs);
    if (st)
        return st;
    if (from)
        rt_log(RT_LOG_COMPILE,
               "cpu: %u kernels %s in %.2f ms (no compile; +%u the same as one of them)", nk,
               from == 1 ? "shared with a loaded program" : "loaded from the disk cache",
               stats.build_ms, n_alias);
    else if (nk)
        rt_log(RT_LOG_COMPILE,
               "cpu: %u kernels, build %.2f ms, O3 %.2f ms, emit %.2f ms, link %.2f ms, "
               "%zu-byte object%s (+%u the same as one of them)",
               nk, stats.build_ms, stats.opt_ms, stats.emit_ms, stats.link_ms, stats.obj_bytes,
               stats.halves == 2 ? " in two halves on two threads" : "", n_alias);
    return TJ_OK;
}

#endif /* TJ_HAVE_LLVM */
