/* image.c — a compiled CPU program as bytes, and back, without LLVM: what a saved module stores
 * per function (S27) so that a runtime-only build runs the code compiled where it was saved. The
 * container is the runtime's (runtime/image.h: the envelope, checked against this build, target,
 * CPU and graph; one code blob; the regions' nested images); this file writes and reads the CPU
 * plan section: the cache key and options, everything the plan decided (the fusion groups, the
 * steps with their work units, chains and aliases, the OpenBLAS products) and the kernels' symbols,
 * whose code is the container's object; the container adds the steps as the runtime runs them
 * (symbol_of names their kernels), for a library without this backend. Reading checks every index
 * and count, then decides the plan again for the graph (plan_decide.c) and refuses an image whose
 * plan differs, and last checks the runtime's plan as any image's steps are checked
 * (rt_plan_check), before anything runs: plan section = str key | i64 par_min |
 * u8 exact, no_contract, shape_generic, quick | groups | steps. */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/program.h"
#include "runtime/image.h"
#include "runtime/objload.h"
#include "tj_codegen_id.h"

/* ---- writing --------------------------------------------------------------------------------- */
/* The plan section of CPU program p. */
static tj_status write_plan(rt_wbuf *w, const rt_program *p) {
    const cpu_prog *cp = (const cpu_prog *)p;
    rt_put_str(w, cp->key ? cp->key : "");
    rt_put_i64(w, cp->rp.par_min);
    rt_put_u8(w, cp->opts.exact_math);
    rt_put_u8(w, cp->opts.no_contract);
    rt_put_u8(w, cp->opts.shape_generic);
    rt_put_u8(w, cp->opts.quick);
    rt_put_u32(w, cp->part->n_groups);
    for (uint32_t i = 0; i < cp->part->n_groups; i++) {
        const pass_group *gr = &cp->part->groups[i];
        rt_put_u8(w, gr->fused);
        rt_put_u8(w, gr->reduce);
        rt_put_u32(w, (uint32_t)gr->rank);
        rt_put(w, gr->dims, sizeof gr->dims);
        rt_put_ids(w, gr->nodes, gr->n_nodes);
        rt_put_ids(w, gr->inputs, gr->n_inputs);
        rt_put_ids(w, gr->outputs, gr->n_outputs);
    }
    rt_put_u32(w, cp->n_steps);
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        const step *sp = &cp->steps[s];
        rt_put_u8(w, (uint8_t)sp->kind);
        rt_put_u8(w, (uint8_t)sp->sub);
        rt_put_u32(w, sp->id);
        rt_put_ids(w, sp->in, sp->n_in);
        rt_put_ids(w, sp->out, sp->n_out);
        rt_put_i64(w, sp->plan.n_units);
        rt_put_i64(w, sp->plan.unit_len);
        rt_put_str(w, sp->name);
        rt_put_u32(w, sp->alias);
        rt_put(w, &sp->mm, sizeof sp->mm);
        rt_put_u32(w, sp->epi ? (uint32_t)(sp->epi - cp->part->groups) : IR_NONE);
        rt_put(w, sp->src, sizeof sp->src);
        rt_put(w, sp->trans, sizeof sp->trans);
        rt_put_ids(w, sp->chain_nodes, sp->chain_nodes ? sp->n_chain_nodes : 0);
        rt_put_u32(w, sp->pool);
        rt_put_u8(w, sp->generic);
    }
    return TJ_OK;
}

static const void *code_of(const rt_program *p, size_t *size) {
    const cpu_prog *cp = (const cpu_prog *)p;
    *size = 0;
    return cp->shared ? jit_cpu_shared_object(cp->shared, size) : NULL;
}

static const rt_image_ops cpu_image_ops;

unsigned char *jit_cpu_program_image(const rt_program *p, size_t *size) {
    *size = 0;
    if (!jit_cpu_is_program(p)) {
        ir_errorf(TJ_ERR_UNSUPPORTED, "cpu image: the program is not compiled (backend %s)",
                  p ? p->vt->name : "none");
        return NULL;
    }
    return rt_image_write(p, &cpu_image_ops, size);
}

/* ---- reading --------------------------------------------------------------------------------- */
/* Groups and steps of the image into cp, every index checked against g. */
static tj_status read_plan(cpu_prog *cp, rt_rbuf *r) {
    const ir_graph *g = cp->rp.base.g;
    uint32_t nn = g->n_nodes;
    uint32_t n_groups = rt_get_u32(r);
    if (r->bad || n_groups > nn)
        return ir_errorf(TJ_ERR_CORRUPT, "cpu image: %u fusion groups for %u nodes", n_groups, nn);
    pass_partition *part = calloc(1, sizeof *part);
    cp->part = part;
    if (!part || !(part->groups = calloc(n_groups + 1, sizeof *part->groups)) ||
        !(part->group_of = malloc((nn + 1) * sizeof *part->group_of)))
        return ir_errorf(TJ_ERR_OOM, "cpu image: out of memory");
    part->n_nodes = nn;
    for (uint32_t i = 0; i < nn; i++)
        part->group_of[i] = IR_NONE;
    for (uint32_t i = 0; i < n_groups && !r->bad; i++) {
        pass_group *gr = &part->groups[part->n_groups++];
        gr->fused = rt_get_u8(r) != 0;
        gr->reduce = rt_get_u8(r) != 0;
        uint32_t rank = rt_get_u32(r);
        const void *d = rt_get(r, sizeof gr->dims);
        if (!d || rank > IR_MAX_RANK) {
            r->bad = 1;
            break;
        }
        gr->rank = (int)rank;
        memcpy(gr->dims, d, sizeof gr->dims);
        if (!(gr->nodes = rt_get_ids(r, nn, &gr->n_nodes)) ||
            !(gr->inputs = rt_get_ids(r, nn, &gr->n_inputs)) ||
            !(gr->outputs = rt_get_ids(r, nn, &gr->n_outputs)))
            break;
        for (uint32_t k = 0; k < gr->n_nodes; k++)
            part->group_of[gr->nodes[k]] = i;
    }
    uint32_t n_steps = r->bad ? 0 : rt_get_u32(r);
    if (r->bad || n_steps > nn + 1)
        return ir_errorf(TJ_ERR_CORRUPT, "cpu image: the fusion groups are damaged");
    if (!(cp->steps = calloc(n_steps + 1, sizeof *cp->steps)))
        return ir_errorf(TJ_ERR_OOM, "cpu image: out of memory");
    const rt_blas *blas = NULL;
    for (uint32_t s = 0; s < n_steps && !r->bad; s++) {
        step *sp = &cp->steps[cp->n_steps++];
        sp->kind = rt_get_u8(r);
        sp->sub = rt_get_u8(r);
        sp->id = rt_get_u32(r);
        sp->in = rt_get_ids(r, nn, &sp->n_in);
        sp->out = sp->in ? rt_get_ids(r, nn, &sp->n_out) : NULL;
        sp->plan.n_units = rt_get_i64(r);
        sp->plan.unit_len = rt_get_i64(r);
        rt_get_str(r, sp->name, sizeof sp->name);
        sp->alias = rt_get_u32(r);
        const void *mm = rt_get(r, sizeof sp->mm);
        uint32_t epi = rt_get_u32(r);
        const void *src = rt_get(r, sizeof sp->src), *tr = rt_get(r, sizeof sp->trans);
        uint32_t n_chain = 0;
        sp->chain_nodes = rt_get_ids(r, nn, &n_chain);
        sp->n_chain_nodes = n_chain;
        sp->pool = rt_get_u32(r);
        sp->generic = rt_get_u8(r);
        if (r->bad || !mm || !src || !tr)
            break;
        memcpy(&sp->mm, mm, sizeof sp->mm);
        memcpy(sp->src, src, sizeof sp->src);
        memcpy(sp->trans, tr, sizeof sp->trans);
        bool gen_group = sp->kind == STEP_GEN && (sp->sub == SUB_EW || sp->sub == SUB_RED);
        bool fused = sp->kind == STEP_BLAS || sp->kind == STEP_CONV;
        bool want_name = sp->kind == STEP_GEN || sp->kind == STEP_CF || (fused && epi != IR_NONE);
        bool ok =
            sp->kind <= STEP_CONV && sp->sub <= SUB_CHAIN &&
            sp->id < (gen_group ? part->n_groups : nn) && sp->plan.n_units >= 0 &&
            sp->plan.unit_len >= 0 && sp->alias <= s && (sp->name[0] != 0) == want_name &&
            (epi == IR_NONE || (fused && epi < part->n_groups)) &&
            (sp->pool == 0 || (sp->kind == STEP_CONV && sp->pool <= nn)) &&
            (!sp->alias || (cp->steps[sp->alias - 1].name[0] && !cp->steps[sp->alias - 1].alias));
        if (!ok)
            return ir_errorf(TJ_ERR_CORRUPT, "cpu image: step %u is damaged", s);
        if (sp->kind == STEP_CONV)
            sp->epi = epi == IR_NONE ? NULL : &part->groups[epi];
        if (sp->kind == STEP_BLAS) {
            sp->epi = epi == IR_NONE ? NULL : &part->groups[epi];
            if (!blas && !(blas = rt_blas_get()))
                return ir_errorf(TJ_ERR_UNSUPPORTED,
                                 "cpu image: its matrix products call OpenBLAS, which is not "
                                 "available here (%s)",
                                 rt_blas_info());
            sp->blas = blas;
        }
        if (sp->kind == STEP_NODE) {
            const ir_node *n = ir_node_get(g, sp->id);
            if (n->op == IR_OP_CONST && !cp->rp.consts[sp->id] && /* twice: refused below */
                !(cp->rp.consts[sp->id] = rt_const_tensor(g, n)))
                return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        }
    }
    return r->bad ? ir_errorf(TJ_ERR_CORRUPT, "cpu image: the steps are damaged") : TJ_OK;
}

/* ---- the plan against its graph -------------------------------------------------------------- */
static bool same_ids(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static bool same_group(const pass_group *a, const pass_group *b) {
    return a->fused == b->fused && a->reduce == b->reduce && a->rank == b->rank &&
           !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) &&
           same_ids(a->nodes, a->n_nodes, b->nodes, b->n_nodes) &&
           same_ids(a->inputs, a->n_inputs, b->inputs, b->n_inputs) &&
           same_ids(a->outputs, a->n_outputs, b->outputs, b->n_outputs);
}

static bool same_mm(const rt_mm *a, const rt_mm *b) {
    size_t r = (size_t)a->rank * sizeof(int64_t);
    return a->dt == b->dt && a->m == b->m && a->k == b->k && a->n == b->n &&
           a->batches == b->batches && a->rank == b->rank && !memcmp(a->dims, b->dims, r) &&
           !memcmp(a->sa, b->sa, r) && !memcmp(a->sb, b->sb, r);
}

/* Image step a (of program ca) against the step b the graph plans (of program cb): what it runs,
 * on which buffers, in how many units, under which symbol. A control-flow step the compiling
 * codegen turned down is a reference step in the image; anything else must agree in full. */
static const char *step_differs(const cpu_prog *ca, const step *a, const cpu_prog *cb,
                                const step *b) {
    bool declined = a->kind == STEP_NODE && b->kind == STEP_CF;
    if (a->kind != b->kind && !declined)
        return "what it runs";
    if (a->id != b->id || (a->kind == STEP_GEN && a->sub != b->sub))
        return "its node or group";
    if (!same_ids(a->in, a->n_in, b->in, b->n_in) || !same_ids(a->out, a->n_out, b->out, b->n_out))
        return "its buffers";
    if (a->plan.n_units != b->plan.n_units || a->plan.unit_len != b->plan.unit_len)
        return "its work units";
    if (a->generic != b->generic)
        return "whether its kernel is shape-generic";
    if ((declined ? a->name[0] != 0 : strcmp(a->name, b->name) != 0) || a->alias != b->alias)
        return "its kernel's symbol";
    uint32_t ea = a->epi ? (uint32_t)(a->epi - ca->part->groups) : IR_NONE,
             eb = b->epi ? (uint32_t)(b->epi - cb->part->groups) : IR_NONE;
    if (ea != eb || a->pool != b->pool ||
        ((a->kind == STEP_BLAS || a->kind == STEP_CONV) &&
         (memcmp(a->src, b->src, sizeof a->src) || memcmp(a->trans, b->trans, sizeof a->trans))))
        return "its operands or epilogue";
    if ((a->kind == STEP_BLAS || (a->kind == STEP_GEN && a->sub == SUB_MM)) &&
        !same_mm(&a->mm, &b->mm))
        return "its product's geometry";
    if (!same_ids(a->chain_nodes, a->chain_nodes ? a->n_chain_nodes : 0, b->chain_nodes,
                  b->chain_nodes ? b->n_chain_nodes : 0))
        return "its chain's nodes";
    return NULL;
}

/* Decides the plan cp's graph gives here (plan_decide.c, as a compile would) and refuses the
 * image's unless it is the same: every fusion group, step, buffer, work unit, symbol and alias.
 * A key planned for other kernels (OpenBLAS present or not, another ISA, other options) is
 * another build's: TJ_ERR_UNSUPPORTED, and the module compiles its graph instead. */
static tj_status check_plan(cpu_prog *cp, const jit_cpu_opts *o) {
    cpu_prog *d = jit_cpu_prog_new(cp->rp.base.g, o);
    if (!d)
        return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    d->rp.par_min = cp->rp.par_min;
    tj_status st = jit_cpu_plan_decide(d, o);
    char tail[256];
    const char *at = strstr(cp->key, ";plan=");
    if (!st) {
        jit_cpu_plan_key(d, o, "", tail, sizeof tail);
        if (!at || strcmp(at, tail) != 0)
            st = ir_errorf(TJ_ERR_UNSUPPORTED,
                           "cpu image: planned for other kernels (%s; this machine plans %s)",
                           at ? at + 1 : "no plan key", tail + 1);
    }
    if (!st) {
        jit_cpu_plan_names(d, cp->key);
        if (d->part->n_groups != cp->part->n_groups)
            st = ir_errorf(TJ_ERR_CORRUPT, "cpu image: %u fusion groups; its graph makes %u",
                           cp->part->n_groups, d->part->n_groups);
        for (uint32_t i = 0; !st && i < d->part->n_groups; i++)
            if (!same_group(&cp->part->groups[i], &d->part->groups[i]))
                st = ir_errorf(TJ_ERR_CORRUPT,
                               "cpu image: fusion group %u is not the one its graph makes", i);
        if (!st && d->n_steps != cp->n_steps)
            st = ir_errorf(TJ_ERR_CORRUPT, "cpu image: %u steps; its graph plans %u", cp->n_steps,
                           d->n_steps);
        for (uint32_t s = 0; !st && s < d->n_steps; s++) {
            const char *why = step_differs(cp, &cp->steps[s], d, &d->steps[s]);
            if (why)
                st = ir_errorf(TJ_ERR_CORRUPT,
                               "cpu image: step %u differs from what its graph plans (%s)", s, why);
        }
    }
    /* saved quick code: a hot signature compiles again where a code generator is linked */
    cp->rp.base.recompile_pays = !st && d->rp.base.recompile_pays && !jit_cpu_unavailable();
    jit_cpu_prog_free(&d->rp.base);
    return st;
}

/* The kernels: the container's object mapped by objload, shared with an equal one already
 * loaded. */
static tj_status read_code(cpu_prog *cp, const void *obj, size_t obj_size) {
    uint32_t nk = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++)
        nk += cp->steps[s].name[0] && !cp->steps[s].alias;
    const char **names = calloc(nk + 1, sizeof *names);
    void **addrs = calloc(nk + 1, sizeof *addrs);
    tj_status st = names && addrs ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu image: out of memory");
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++)
        if (cp->steps[s].name[0] && !cp->steps[s].alias)
            names[k++] = cp->steps[s].name;
    if (!st && nk) {
        jit_cpu_code *code = jit_cpu_code_load(obj, (size_t)obj_size, names, nk, addrs);
        if (!code || !(cp->shared = jit_cpu_shared_add(cp->key, code, names, nk, addrs, false)))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
    }
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++)
        if (cp->steps[s].name[0] && !cp->steps[s].alias)
            cp->steps[s].fn = (rt_kernel_fn)addrs[k++];
    for (uint32_t s = 0; s < cp->n_steps && !st; s++)
        if (cp->steps[s].alias)
            cp->steps[s].fn = cp->steps[cp->steps[s].alias - 1].fn;
    free(names);
    free(addrs);
    return st;
}

/* The program from an image's checked envelope (rt_image_ops.read). */
static rt_program *read_image(const ir_graph *g, rt_image_in *in) {
    rt_rbuf *r = &in->plan;
    char key[2048];
    rt_get_str(r, key, sizeof key);
    jit_cpu_opts o = {.par_min = rt_get_i64(r)};
    o.exact_math = rt_get_u8(r) != 0;
    o.no_contract = rt_get_u8(r) != 0;
    o.shape_generic = rt_get_u8(r) != 0;
    o.quick = rt_get_u8(r) != 0;
    if (r->bad || o.par_min <= 0) {
        ir_errorf(TJ_ERR_CORRUPT, "cpu image: its options are damaged");
        return NULL;
    }
    cpu_prog *cp = jit_cpu_prog_new(g, &o);
    if (!cp)
        return NULL;
    tj_status st = TJ_OK;
    if (!(cp->key = strdup(key)) ||
        !(cp->rp.consts = calloc(g->n_nodes + 1, sizeof *cp->rp.consts)))
        st = ir_errorf(TJ_ERR_OOM, "cpu image: out of memory");
    if (!st)
        st = read_plan(cp, r);
    if (!st && r->at != r->n)
        st = ir_errorf(TJ_ERR_CORRUPT, "cpu image: %zu bytes after the plan", r->n - r->at);
    if (!st)
        st = check_plan(cp, &o);
    if (!st)
        st = read_code(cp, in->code, in->code_size);
    /* the regions, read as rt_regions_new asks for them */
    if (!st)
        st = jit_cpu_prog_finish(cp, rt_image_region, in);
    if (!st)
        st = rt_image_regions_done(in, cp->rp.regions != NULL);
    if (!st) /* what the runtime checks of any image's steps, as it will run them */
        st = rt_plan_check(&cp->rp);
    if (st) {
        jit_cpu_prog_free(&cp->rp.base);
        return NULL;
    }
    return &cp->rp.base;
}

/* The symbol of step s's kernel (an alias calls its original's). */
static const char *symbol_of(const rt_program *p, uint32_t s) {
    const cpu_prog *cp = (const cpu_prog *)p;
    const step *sp = &cp->steps[s];
    return sp->alias ? cp->steps[sp->alias - 1].name : sp->name;
}

static const rt_image_ops cpu_image_ops = {
    .backend = "cpu",
    .codegen_id = TJ_CODEGEN_ID,
    .symbol = symbol_of,
    .is_own = jit_cpu_is_program,
    .plan = write_plan,
    .code = code_of,
    .read = read_image,
};

rt_program *jit_cpu_program_from_image(const ir_graph *g, const void *img, size_t size) {
    return rt_image_read(g, img, size, &cpu_image_ops);
}
