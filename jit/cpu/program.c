/* program.c — the CPU backend's program (rt_program_vt): the graph's live nodes partitioned by
 * passes/fusion.c, every fused elementwise group compiled (all of them in one LLVM module, one
 * kernel each) and every other node run as the interpreter runs it (reference kernels; CONST,
 * PARAM, VAR_READ, ASSIGN, PRINT and HOST_CALLBACK as in runtime/interp.c). Groups run in order;
 * large kernels are split across the runtime's thread pool. Only concrete shapes are compiled:
 * a graph with unknown dims is refused with TJ_ERR_UNSUPPORTED (the caller interprets it). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/cpu/cpu.h"
#include "runtime/rt_pool.h"

rt_program *jit_cpu_compile(const ir_graph *g) {
    return jit_cpu_compile_opts(g, NULL);
}

#ifndef TJ_HAVE_LLVM

rt_program *jit_cpu_compile_opts(const ir_graph *g, const jit_cpu_opts *opts) {
    ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: tracejit was built without LLVM");
    return NULL;
}
const pass_partition *jit_cpu_program_partition(const rt_program *p) {
    return NULL;
}

#else

enum { STEP_FUSED, STEP_NODE };

typedef struct step {
    int kind;
    uint32_t id; /* STEP_FUSED: the group; STEP_NODE: the node */
    jit_cpu_kernel_fn fn;
    jit_cpu_ew_plan plan;
} step;

typedef struct cpu_prog {
    rt_program base;
    pass_partition *part;
    step *steps;
    uint32_t n_steps;
    tj_tensor **consts; /* per node: materialised CONST payloads */
    uint32_t *last_use; /* per node: last step reading it; UINT32_MAX: a graph output */
    jit_cpu_shared *shared;
    int64_t par_min;
    uint32_t max_bufs;
} cpu_prog;

static const rt_program_vt cpu_vt;

const pass_partition *jit_cpu_program_partition(const rt_program *p) {
    return p && p->vt == &cpu_vt ? ((const cpu_prog *)p)->part : NULL;
}

/* ---- running --------------------------------------------------------------------------------- */
typedef struct par_ctx {
    jit_cpu_kernel_fn fn;
    void *const *bufs;
    int64_t n_units, chunk;
} par_ctx;

static void par_task(void *ctx, int64_t i) {
    par_ctx *c = ctx;
    int64_t b = i * c->chunk, e = b + c->chunk < c->n_units ? b + c->chunk : c->n_units;
    if (b < e)
        c->fn(c->bufs, b, e);
}

static void pooled_release(void *user) {
    rt_buffer *b = user;
    rt_free(b->data, b->size);
}

/* An output tensor on the caching allocator, uninitialised: the kernel writes every element. */
static tj_tensor *out_tensor(const ir_node *n) {
    int64_t numel = ir_numel(n->rank, n->dims);
    size_t size = (size_t)numel * ir_dtype_size(n->dtype);
    tj_tensor *t = calloc(1, sizeof *t);
    rt_buffer *b = calloc(1, sizeof *b);
    void *d = rt_alloc(size);
    if (!t || !b || !d) {
        free(t);
        free(b);
        rt_free(d, size);
        ir_errorf(TJ_ERR_OOM, "cpu program: out of memory for %lld elements of %s",
                  (long long)numel, ir_ops[n->op].name);
        return NULL;
    }
    atomic_init(&b->rc, 1);
    b->data = d;
    b->size = size;
    b->release = pooled_release;
    b->user = b;
    atomic_init(&t->rc, 1);
    t->kind = RT_CONCRETE;
    t->dtype = n->dtype;
    t->rank = n->rank;
    t->numel = numel;
    memcpy(t->dims, n->dims, sizeof t->dims);
    t->data = d;
    t->buf = b;
    return t;
}

static tj_status run_fused(cpu_prog *cp, const step *s, tj_tensor **vals, void **bufs) {
    const ir_graph *g = cp->base.g;
    const pass_group *gr = &cp->part->groups[s->id];
    for (uint32_t k = 0; k < gr->n_inputs; k++)
        bufs[k] = vals[gr->inputs[k]]->data;
    for (uint32_t k = 0; k < gr->n_outputs; k++) {
        const ir_node *n = ir_node_get(g, gr->outputs[k]);
        tj_tensor *t = out_tensor(n);
        if (!t)
            return TJ_ERR_OOM;
        vals[gr->outputs[k]] = t;
        bufs[gr->n_inputs + k] = t->data;
    }
    int64_t units = s->plan.n_units;
    if (units == 0)
        return TJ_OK;
    int threads = units * s->plan.unit_len >= cp->par_min ? rt_pool_size() : 1;
    if (threads <= 1 || units < 2) {
        s->fn(bufs, 0, units);
        return TJ_OK;
    }
    int64_t n_tasks = (int64_t)threads * 4 < units ? (int64_t)threads * 4 : units;
    int64_t chunk = (units + n_tasks - 1) / n_tasks;
    if (s->plan.unit_len == 1)
        chunk = (chunk + 63) & ~(int64_t)63; /* whole cache lines */
    par_ctx c = {s->fn, bufs, units, chunk};
    rt_parallel_for((units + chunk - 1) / chunk, par_task, &c);
    return TJ_OK;
}

static tj_status run_node(cpu_prog *cp, uint32_t i, tj_tensor *const *args, uint32_t n_args,
                          tj_variable **caps, tj_tensor **vals, tj_tensor **ins) {
    const ir_graph *g = cp->base.g;
    const ir_node *n = ir_node_get(g, i);
    const uint32_t *in = ir_inputs(g, n);
    for (uint32_t k = 0; k < n->n_in; k++)
        ins[k] = vals[in[k]];
    const ir_blob *blob = ir_blob_get(g, n->a.blob);
    int64_t slot = n->a.i[0];
    switch (n->op) {
    case IR_OP_CONST:
        vals[i] = tj_retain(cp->consts[i]);
        return TJ_OK;
    case IR_OP_PARAM:
        if ((uint64_t)slot >= n_args)
            return ir_errorf(TJ_ERR_INVALID, "cpu program: param %lld but only %u arguments",
                             (long long)slot, n_args);
        if (!args[slot] || args[slot]->kind != RT_CONCRETE || args[slot]->dtype != n->dtype ||
            args[slot]->rank != n->rank ||
            memcmp(args[slot]->dims, n->dims, (size_t)n->rank * sizeof n->dims[0]) != 0) {
            char want[200];
            return ir_errorf(TJ_ERR_SIGNATURE, "cpu program: argument %lld is not %s%s",
                             (long long)slot, ir_dtype_short(n->dtype),
                             ir_fmt_dims(want, sizeof want, n->rank, n->dims));
        }
        vals[i] = tj_retain(args[slot]);
        return TJ_OK;
    case IR_OP_VAR_READ:
        if (!caps || !caps[slot])
            return ir_errorf(TJ_ERR_STATE, "cpu program: variable slot %lld is not bound",
                             (long long)slot);
        vals[i] = rt_variable_get(caps[slot]);
        return TJ_OK;
    case IR_OP_ASSIGN: {
        if (!caps || !caps[slot])
            return ir_errorf(TJ_ERR_STATE, "cpu program: variable slot %lld is not bound",
                             (long long)slot);
        tj_status st = rt_variable_set(caps[slot], ins[0]);
        if (!st)
            vals[i] = tj_retain(ins[0]);
        return st;
    }
    case IR_OP_PRINT:
        return rt_do_print(blob ? blob->data : "", ins, n->n_in);
    case IR_OP_HOST_CALLBACK:
        if (blob && blob->size == 2 * sizeof(void *)) {
            void *const *fp = blob->data;
            return rt_do_callback(fp[0], fp[1], ins, n->n_in);
        }
        return TJ_OK;
    default:
        break;
    }
    tj_tensor *out = rt_tensor_alloc(n->dtype, n->rank, n->dims);
    if (!out)
        return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    tj_status st = rt_ref_kernel(n, ins, out);
    if (st) {
        tj_release(out);
        return st;
    }
    vals[i] = out;
    return TJ_OK;
}

static tj_status cpu_run(rt_program *p, tj_tensor *const *args, uint32_t n_args, tj_variable **caps,
                         tj_tensor **outs) {
    cpu_prog *cp = (cpu_prog *)p;
    const ir_graph *g = p->g;
    tj_tensor **vals = calloc(g->n_nodes + 1, sizeof *vals);
    void **scratch = calloc(cp->max_bufs + 1, sizeof(void *));
    if (!vals || !scratch) {
        free(vals);
        free(scratch);
        return ir_errorf(TJ_ERR_OOM, "cpu program: out of memory");
    }
    tj_status st = TJ_OK;
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        const step *sp = &cp->steps[s];
        if (sp->kind == STEP_FUSED)
            st = run_fused(cp, sp, vals, scratch);
        else
            st = run_node(cp, sp->id, args, n_args, caps, vals, (tj_tensor **)scratch);
        /* drop values whose last reader was this step */
        const uint32_t *ins;
        uint32_t n_ins;
        if (sp->kind == STEP_FUSED) {
            ins = cp->part->groups[sp->id].inputs;
            n_ins = cp->part->groups[sp->id].n_inputs;
        } else {
            const ir_node *n = ir_node_get(g, sp->id);
            ins = ir_inputs(g, n);
            n_ins = n->n_in;
        }
        for (uint32_t k = 0; k < n_ins; k++) {
            if (cp->last_use[ins[k]] == s) {
                tj_release(vals[ins[k]]);
                vals[ins[k]] = NULL;
            }
        }
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        outs[k] = st ? NULL : tj_retain(vals[g->outputs[k]]);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        tj_release(vals[i]);
    free(vals);
    free(scratch);
    return st;
}

static void cpu_free(rt_program *p) {
    cpu_prog *cp = (cpu_prog *)p;
    if (!cp)
        return;
    if (cp->consts)
        for (uint32_t i = 0; i < p->g->n_nodes; i++)
            tj_release(cp->consts[i]);
    free(cp->consts);
    jit_cpu_shared_release(cp->shared);
    pass_partition_free(cp->part);
    free(cp->steps);
    free(cp->last_use);
    free(cp);
}

static const rt_program_vt cpu_vt = {cpu_run, cpu_free, "cpu"};

/* ---- compiling ------------------------------------------------------------------------------- */
static bool fusable(const ir_graph *g, uint32_t id, void *user) {
    return jit_cpu_ew_supported(g, id);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Builds one module with a kernel per fused group, compiles it and fills the steps' fn. */
static tj_status compile_kernels(cpu_prog *cp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->base.g;
    uint32_t nk = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++)
        nk += cp->steps[s].kind == STEP_FUSED;
    jit_cpu_stats stats = {0};
    stats.n_kernels = nk;
    if (nk == 0) {
        jit_cpu_stats_set(&stats);
        return TJ_OK;
    }
    double t0 = now_ms();
    char prefix[40], key[1536];
    jit_cpu_code_key(g, !o->no_contract, key, sizeof key, prefix, sizeof prefix);
    char **names = calloc(nk, sizeof *names);
    void **addrs = calloc(nk, sizeof *addrs);
    tj_status st = names && addrs ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++) {
        if (cp->steps[s].kind != STEP_FUSED)
            continue;
        if (!(names[k] = malloc(48)))
            st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        else
            snprintf(names[k], 48, "%sg%u", prefix, cp->steps[s].id);
        k++;
    }
    int from = 0;
    if (!st)
        cp->shared = jit_cpu_shared_find(key, (const char *const *)names, nk, addrs, &from);
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("tracejit", ctx);
    jit_cpu_prepare_module(m);
    /* emitting also fills each step's plan (work units), which a cached object does not carry */
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++) {
        step *sp = &cp->steps[s];
        if (sp->kind != STEP_FUSED)
            continue;
        st = jit_cpu_ew_emit(m, g, &cp->part->groups[sp->id], names[k], !o->no_contract, &sp->plan);
        k++;
    }
    if (st || cp->shared) {
        LLVMDisposeModule(m);
        LLVMContextDispose(ctx);
        stats.from_cache = from;
        stats.build_ms = now_ms() - t0;
        jit_cpu_stats_set(&stats);
    } else {
        double t1 = now_ms();
        jit_cpu_code *code = jit_cpu_code_compile(m, ctx, (const char *const *)names, nk, addrs);
        if (!code || !(cp->shared = jit_cpu_shared_add(key, code, (const char *const *)names, nk, addrs)))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
        stats = jit_cpu_last_stats();
        stats.build_ms = t1 - t0;
        stats.n_kernels = nk;
        jit_cpu_stats_set(&stats);
    }
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++)
        if (cp->steps[s].kind == STEP_FUSED)
            cp->steps[s].fn = (jit_cpu_kernel_fn)addrs[k++];
    for (uint32_t k = 0; names && k < nk; k++)
        free(names[k]);
    free(names);
    free(addrs);
    if (!st && from)
        rt_log(RT_LOG_COMPILE, "cpu: %u kernels %s in %.2f ms (no compile)", nk,
               from == 1 ? "shared with a loaded program" : "loaded from the disk cache", stats.build_ms);
    else if (!st)
        rt_log(RT_LOG_COMPILE,
               "cpu: %u kernels, build %.2f ms, O3 %.2f ms, emit %.2f ms, link "
               "%.2f ms, %zu-byte object",
               nk, stats.build_ms, stats.opt_ms, stats.emit_ms, stats.link_ms, stats.obj_bytes);
    return st;
}

rt_program *jit_cpu_compile_opts(const ir_graph *g, const jit_cpu_opts *opts) {
    jit_cpu_opts o = opts ? *opts : (jit_cpu_opts){0};
    if (!g) {
        ir_errorf(TJ_ERR_INVALID, "cpu jit: graph is NULL");
        return NULL;
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = ir_node_get(g, i);
        for (int d = 0; d < n->rank; d++) {
            if (n->dims[d] < 0) {
                ir_errorf(TJ_ERR_UNSUPPORTED,
                          "cpu jit: node %%%u (%s) has unknown dims; only "
                          "concrete signatures are compiled",
                          i, ir_ops[n->op].name);
                return NULL;
            }
        }
        if (n->a.sub[0]) {
            ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: node %%%u (%s) has a subgraph", i,
                      ir_ops[n->op].name);
            return NULL;
        }
    }
    if (jit_cpu_llvm_init() != TJ_OK)
        return NULL;
    cpu_prog *cp = calloc(1, sizeof *cp);
    uint32_t nn = g->n_nodes + 1;
    if (!cp) {
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        return NULL;
    }
    cp->base.vt = &cpu_vt;
    cp->base.g = g;
    cp->par_min = o.par_min > 0 ? o.par_min : 65536;
    cp->part = pass_fusion_run(g, fusable, NULL);
    if (!cp->part)
        goto fail;
    cp->steps = calloc(cp->part->n_groups + 1, sizeof *cp->steps);
    cp->consts = calloc(nn, sizeof *cp->consts);
    cp->last_use = calloc(nn, sizeof *cp->last_use);
    if (!cp->steps || !cp->consts || !cp->last_use) {
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        goto fail;
    }
    cp->max_bufs = 8;
    for (uint32_t gi = 0; gi < cp->part->n_groups; gi++) {
        const pass_group *gr = &cp->part->groups[gi];
        step *sp = &cp->steps[cp->n_steps++];
        if (gr->fused) {
            sp->kind = STEP_FUSED;
            sp->id = gi;
            if (gr->n_inputs + gr->n_outputs > cp->max_bufs)
                cp->max_bufs = gr->n_inputs + gr->n_outputs;
            for (uint32_t k = 0; k < gr->n_inputs; k++)
                cp->last_use[gr->inputs[k]] = gi;
        } else {
            sp->kind = STEP_NODE;
            sp->id = gr->nodes[0];
            const ir_node *n = ir_node_get(g, sp->id);
            if (n->n_in > cp->max_bufs)
                cp->max_bufs = n->n_in;
            const uint32_t *in = ir_inputs(g, n);
            for (uint32_t k = 0; k < n->n_in; k++)
                cp->last_use[in[k]] = gi;
            if (n->op == IR_OP_CONST && !(cp->consts[sp->id] = rt_const_tensor(g, n)))
                goto fail;
        }
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        cp->last_use[g->outputs[k]] = UINT32_MAX;
    if (compile_kernels(cp, &o) != TJ_OK)
        goto fail;
    return &cp->base;
fail:
    cpu_free(&cp->base);
    return NULL;
}

#endif /* TJ_HAVE_LLVM */
