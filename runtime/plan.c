/* plan.c — the one run loop: runs a plan's steps (plan.h) in order for the interpreter and for
 * every compiled backend alike. Compiled kernels split across the runtime's thread pool when
 * large; library products followed by their fused epilogue block by block; convolutions by bands
 * with their epilogue and pool; native scalar control flow; every other node as the executor
 * runs it (exec.c: reference kernels, sources, variables, effects). A value is released after
 * its last reader; a node step of an interpreted plan may write its result over an input that
 * dies there. Checking numerics checks every step's outputs, and profiles get one event per step
 * (per op for an interpreted plan). The library steps (products, convolutions) are plan_lib.c's. */
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "runtime/kernels/gemm.h"
#include "runtime/plan.h"
#include "runtime/rt_pool.h"

/* ---- kernels on the pool --------------------------------------------------------------------- */
typedef struct par_ctx {
    rt_kernel_fn fn;
    void *const *bufs;
    int64_t u0, n_units, chunk;
} par_ctx;

static void par_task(void *ctx, int64_t i) {
    par_ctx *c = ctx;
    int64_t b = i * c->chunk, e = b + c->chunk < c->n_units ? b + c->chunk : c->n_units;
    if (b < e)
        c->fn(c->bufs, c->u0 + b, c->u0 + e);
}

/* An output tensor on the caching allocator, uninitialised: the kernel writes every element. */
static tj_tensor *out_tensor(const ir_node *n) {
    return rt_tensor_alloc_uninit(n->dtype, n->rank, n->dims); /* NULL: the error is set */
}

void rt_plan_run_range(const rt_plan *p, rt_kernel_fn fn, const rt_units *u, void *const *bufs,
                       int64_t u0, int64_t units) {
    if (units <= 0)
        return;
    int threads = units * u->unit_len >= p->par_min ? rt_pool_size() : 1;
    if (threads <= 1 || units < 2) {
        fn(bufs, u0, u0 + units);
        return;
    }
    int64_t n_tasks = (int64_t)threads * 4 < units ? (int64_t)threads * 4 : units;
    int64_t chunk = (units + n_tasks - 1) / n_tasks;
    if (u->unit_len == 1)
        chunk = (chunk + 63) & ~(int64_t)63; /* whole cache lines */
    par_ctx c = {fn, bufs, u0, units, chunk};
    rt_parallel_for((units + chunk - 1) / chunk, par_task, &c);
}

void rt_plan_run_units(const rt_plan *p, rt_kernel_fn fn, const rt_units *u, void *const *bufs) {
    rt_plan_run_range(p, fn, u, bufs, 0, u->n_units);
}

/* A caller tensor (tj_call_into) that can take node id's values directly: same dtype and dims,
 * and not aliasing an argument (a kernel must not write what it is still reading). */
static tj_tensor *bound_output(const rt_plan *p, uint32_t id, tj_tensor *const *outs,
                               tj_tensor *const *args, uint32_t n_args) {
    int32_t k = p->out_slot[id];
    tj_tensor *t = k >= 0 && outs && !p->dev ? outs[k] : NULL;
    const ir_node *n = ir_node_get(p->base.g, id);
    if (!t || t->kind != RT_CONCRETE || t->dtype != n->dtype || t->rank != n->rank ||
        memcmp(t->dims, n->dims, n->rank * sizeof(int64_t)) != 0)
        return NULL;
    for (uint32_t a = 0; a < n_args; a++)
        if (args[a]->data == t->data)
            return NULL;
    return t;
}

static tj_status run_kernel(rt_plan *p, const rt_step *s, tj_tensor **vals, void **bufs,
                            tj_tensor *const *outs, tj_tensor *const *args, uint32_t n_args) {
    const ir_graph *g = p->base.g;
    for (uint32_t k = 0; k < s->n_in; k++)
        bufs[k] = vals[s->in[k]]->data;
    for (uint32_t k = 0; k < s->n_out; k++) {
        tj_tensor *t = bound_output(p, s->out[k], outs, args, n_args);
        t = t ? rt_retain(t) : out_tensor(ir_node_get(g, s->out[k]));
        if (!t)
            return TJ_ERR_OOM;
        vals[s->out[k]] = t;
        bufs[s->n_in + k] = t->data;
    }
    bufs[s->n_in + s->n_out] = s->geom;
    rt_plan_run_units(p, s->fn, &s->units, bufs);
    return TJ_OK;
}

/* ---- device plans ---------------------------------------------------------------------------- */
/* Value j where step s of a device plan reads it: on the plan's device (a constant's copy made
 * once for the plan; any other host value copied over and kept in vals for later readers). */
static tj_status device_input(rt_plan *p, uint32_t j, tj_tensor **vals, void **buf) {
    tj_tensor *v = vals[j];
    if (!v || v->kind != RT_CONCRETE)
        return ir_errorf(TJ_ERR_INVALID, "%s: value %%%u is not a concrete tensor", p->who, j);
    if (rt_buffer_device(v->buf) == p->dev) {
        *buf = v->data;
        return TJ_OK;
    }
    if (ir_node_get(p->base.g, j)->op == IR_OP_CONST) {
        tj_tensor *c = __atomic_load_n(&p->dev_consts[j], __ATOMIC_ACQUIRE);
        if (!c) {
            tj_tensor *mine = rt_tensor_to_device(v, p->dev), *none = NULL;
            if (!mine)
                return ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
            if (__atomic_compare_exchange_n(&p->dev_consts[j], &none, mine, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                c = mine;
            else
                rt_release(mine), c = none; /* another run copied it first */
        }
        *buf = c->data;
        return TJ_OK;
    }
    tj_tensor *d = rt_tensor_to_device(v, p->dev);
    if (!d)
        return ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
    rt_release(v);
    vals[j] = d;
    *buf = d->data;
    return TJ_OK;
}

static tj_status run_device_kernel(rt_plan *p, uint32_t s, tj_tensor **vals, void **bufs) {
    const rt_step *sp = &p->steps[s];
    const ir_graph *g = p->base.g;
    for (uint32_t k = 0; k < sp->n_in; k++) {
        tj_status st = device_input(p, sp->in[k], vals, &bufs[k]);
        if (st)
            return st;
    }
    for (uint32_t k = 0; k < sp->n_out; k++) {
        const ir_node *n = ir_node_get(g, sp->out[k]);
        tj_tensor *t = rt_tensor_alloc_on(p->dev, n->dtype, n->rank, n->dims);
        if (!t)
            return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        vals[sp->out[k]] = t;
        bufs[sp->n_in + k] = t->data;
    }
    return p->launch(p, s, bufs);
}

/* A node step of a device plan runs on the host: its inputs on a device are copied back first
 * (kept in vals as host values for later host readers). */
/* Whether operand k of control-flow node n stays where it is: its regions are programs of this
 * plan's backend (they take values on its device), and the executor does not read it on the host
 * (a for's bounds, a scan's sequences, sliced row by row). */
static bool cf_keeps(const rt_plan *p, const ir_node *n, uint32_t id, uint32_t k) {
    if (n->op != IR_OP_COND && n->op != IR_OP_WHILE && n->op != IR_OP_FOR && n->op != IR_OP_SCAN)
        return false;
    const rt_program *r0 = p->regions ? p->regions[2 * id] : NULL;
    const rt_program *r1 = p->regions ? p->regions[2 * id + 1] : NULL;
    if (!r0 || r0->vt != p->base.vt || (r1 && r1->vt != p->base.vt))
        return false;
    uint32_t nc = n->op == IR_OP_SCAN ? (uint32_t)n->a.i[0] : 0;
    uint32_t nx = n->op == IR_OP_SCAN ? n->n_in - nc - (uint32_t)n->a.i[1] : 0;
    return n->op == IR_OP_FOR ? k >= 3 : n->op == IR_OP_SCAN ? k < nc || k >= nc + nx : true;
}

static tj_status host_inputs(rt_plan *p, const rt_step *sp, tj_tensor **vals) {
    const ir_node *n = ir_node_get(p->base.g, sp->id);
    for (uint32_t k = 0; k < sp->n_in; k++) {
        uint32_t j = sp->in[k];
        tj_tensor *v = vals[j];
        if (j == sp->id || !v || v->kind != RT_CONCRETE || rt_on_host(v) ||
            n->op == IR_OP_ASSIGN || /* a variable keeps it there */
            cf_keeps(p, n, sp->id, k))
            continue;
        tj_tensor *h = rt_tensor_to_device(v, rt_device_host());
        if (!h)
            return ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
        rt_release(v);
        vals[j] = h;
    }
    return TJ_OK;
}

/* ---- RT_STEP_CF ------------------------------------------------------------------------------ */
/* A natively lowered branch or loop: operands in, one-element results out, packed as the node's
 * tuple; when the code hands back (an error to report) the executor runs the node instead. */
static tj_status run_cf(rt_plan *p, const rt_step *s, tj_tensor **vals, void **bufs,
                        const rt_exec_env *env) {
    const ir_graph *g = p->base.g;
    /* checking numerics: the executor runs the regions' programs, whose every step is checked
     * (the native function has no checks in it) */
    if (RT_CHECKING_NUMERICS())
        return rt_exec_node(g, s->id, env, vals, (tj_tensor **)bufs, NULL);
    const ir_node *n = ir_node_get(g, s->id);
    uint32_t nr = ir_cf_n_results(g, n);
    tj_tensor *stack_res[16] = {0}, **res = nr <= 16 ? stack_res : calloc(nr + 1, sizeof *res);
    if (!res)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", p->who);
    tj_status st = TJ_OK;
    for (uint32_t k = 0; k < s->n_in; k++)
        bufs[k] = vals[s->in[k]]->data;
    for (uint32_t k = 0; k < nr && !st; k++) {
        ir_node d;
        if ((st = ir_cf_result(g, n, k, &d)) == TJ_OK &&
            !(res[k] = rt_tensor_alloc_uninit(d.dtype, d.rank, d.dims)))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        if (!st)
            bufs[s->n_in + k] = res[k]->data;
    }
    int32_t rc = st ? 1 : ((rt_cf_fn)(void *)s->fn)(bufs);
    if (!st && rc == 0) {
        vals[s->id] = rt_tuple_new((int)nr, res);
        st = vals[s->id]->kind == RT_ERROR ? vals[s->id]->code : TJ_OK;
    }
    for (uint32_t k = 0; k < nr; k++)
        rt_release(res[k]);
    if (res != stack_res)
        free(res);
    if (!st && rc != 0) /* an error to report: the executor finds it and names the iteration */
        st = rt_exec_node(g, s->id, env, vals, (tj_tensor **)bufs, NULL);
    return st;
}

/* ---- RT_STEP_NODE ---------------------------------------------------------------------------- */
tj_tensor *rt_plan_dying(const rt_plan *p, uint32_t j, uint32_t at, uint32_t keep,
                         tj_tensor *const *vals, const ir_node *n) {
    tj_tensor *t = vals[j];
    if (p->last_use[j] != at || j == keep || !t || t->kind != RT_CONCRETE || !t->buf ||
        atomic_load(&t->rc) != 1 || atomic_load(&t->buf->rc) != 1 || t->buf->release ||
        t->buf->immutable || t->buf->n_strings || t->data != t->buf->data || t->is_static ||
        t->host_scalar || t->dtype != n->dtype || t->rank != n->rank ||
        memcmp(t->dims, n->dims, (size_t)n->rank * sizeof *n->dims) != 0 ||
        RT_CHECKING_NUMERICS()) /* a step that fails the check is replayed from its inputs */
        return NULL;
    return t;
}

/* An elementwise node whose input dies there writes its result into that input's buffer when
 * nothing else holds it (not borrowed, immutable, a view or shared) and its dtype and dims are
 * the node's: each element is read at its own index before it is written. A model's chain of
 * activations (conv, + bias, relu) then takes one buffer on the first call, not one per op:
 * fresh memory is what a first call pays most for. */
static tj_tensor *reusable(const rt_plan *p, const rt_step *s, uint32_t at, uint32_t keep,
                           tj_tensor *const *vals) {
    const ir_node *n = ir_node_get(p->base.g, s->id);
    if (!(ir_ops[n->op].flags & IR_F_EW) || (ir_ops[n->op].flags & IR_F_CMP) ||
        n->dtype == TJ_STRING)
        return NULL;
    for (uint32_t k = 0; k < s->n_in; k++) {
        tj_tensor *t = rt_plan_dying(p, s->in[k], at, keep, vals, n);
        if (t)
            return t;
    }
    return NULL;
}

/* A step that only materialises a value (a constant, a parameter, a variable read): not work. */
static bool is_value(const ir_graph *g, const rt_step *sp) {
    int op = ir_node_get(g, sp->id)->op;
    return sp->kind == RT_STEP_NODE &&
           (op == IR_OP_CONST || op == IR_OP_PARAM || op == IR_OP_VAR_READ || op == IR_OP_GET);
}

/* ---- profiles and numerics ------------------------------------------------------------------- */
/* The profile event of step s: an interpreted plan's op, or a compiled plan's kernel with its
 * label, the function, its first output and the bytes it reads and writes (its buffers). */
static void profile_step(const rt_plan *p, uint32_t s, double t0) {
    const ir_graph *g = p->base.g;
    const rt_step *sp = &p->steps[s];
    char d[96], fn[256];
    if (!p->labels) {
        const ir_node *n = ir_node_get(g, sp->id);
        if (n->op != IR_OP_CONST && n->op != IR_OP_PARAM)
            rt_profile_event("op", ir_ops[n->op].name, t0, "\"node\":%u,\"out\":\"%s%s\"", sp->id,
                             ir_dtype_short(n->dtype),
                             rt_profile_dims(d, sizeof d, n->rank, n->dims));
        return;
    }
    int64_t bytes = 0;
    for (uint32_t k = 0; k < sp->n_in + sp->n_out; k++) {
        const ir_node *n = ir_node_get(g, k < sp->n_in ? sp->in[k] : sp->out[k - sp->n_in]);
        if (n->dtype != IR_VOID)
            bytes += ir_numel(n->rank, n->dims) * (int64_t)ir_dtype_size(n->dtype);
    }
    const ir_node *o = ir_node_get(g, sp->n_out ? sp->out[0] : sp->id);
    rt_profile_event("kernel", p->labels[s], t0,
                     "\"function\":\"%s\",\"out\":\"%s%s\",\"outputs\":%u,\"bytes\":%lld",
                     rt_profile_json(fn, sizeof fn, g->name ? g->name : ""),
                     o->dtype == IR_VOID ? "void" : ir_dtype_short(o->dtype),
                     rt_profile_dims(d, sizeof d, o->rank, o->dims), sp->n_out, (long long)bytes);
}

/* Check numerics: step s's outputs. An interpreted plan names the op; a compiled one blames a
 * NaN or infinity on the first of the step's ops whose reference-kernel result has one, else on
 * the kernel. */
static tj_status check_step(const rt_plan *p, uint32_t s, const rt_exec_env *env,
                            tj_tensor *const *vals) {
    const ir_graph *g = p->base.g;
    const rt_step *sp = &p->steps[s];
    if (!p->labels) {
        int is_nan = 0;
        int64_t at = vals[sp->id] ? rt_numerics_first_bad(vals[sp->id], &is_nan) : -1;
        return at < 0 ? TJ_OK
                      : rt_numerics_error("", ir_ops[ir_node_get(g, sp->id)->op].name, sp->id,
                                          vals[sp->id], at, is_nan, "(interpreter)");
    }
    for (uint32_t k = 0; k < sp->n_out; k++) {
        int is_nan = 0;
        tj_tensor *v = vals[sp->out[k]];
        if (v && v->kind == RT_CONCRETE &&
            !rt_on_host(v)) { /* a device plan's: checked on a copy */
            tj_tensor *h = rt_tensor_to_device(v, rt_device_host());
            if (!h)
                return ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
            int64_t at = rt_numerics_first_bad(h, &is_nan);
            char ctx[320];
            snprintf(ctx, sizeof ctx, "(kernel '%s' on %s)", p->labels[s], p->dev->name);
            const ir_node *o = ir_node_get(g, sp->out[k]);
            tj_status st = TJ_OK;
            uint32_t *ids = at >= 0 ? malloc((g->n_nodes + 1) * sizeof *ids) : NULL;
            if (ids) { /* the op: its inputs copied back, the kernel's ops run on the host */
                uint32_t n = rt_plan_step_nodes(p, s, ids);
                st = rt_numerics_locate(g, ids, n, env, vals, ctx);
                free(ids);
            }
            if (at >= 0 && !st)
                st = rt_numerics_error("", ir_ops[o->op].name, sp->out[k], h, at, is_nan, ctx);
            rt_release(h);
            if (st)
                return st;
            continue;
        }
        int64_t at = rt_numerics_first_bad(v, &is_nan);
        if (at < 0)
            continue;
        char ctx[320];
        snprintf(ctx, sizeof ctx, "(kernel '%s')", p->labels[s]);
        uint32_t *ids = malloc((g->n_nodes + 1) * sizeof *ids);
        tj_status st = TJ_OK;
        if (ids) {
            uint32_t n = rt_plan_step_nodes(p, s, ids);
            st = rt_numerics_locate(g, ids, n, env, vals, ctx);
            free(ids);
        }
        if (!st) { /* not reproduced op by op: name the kernel's output */
            const ir_node *o = ir_node_get(g, sp->out[k]);
            st = rt_numerics_error("", ir_ops[o->op].name, sp->out[k], vals[sp->out[k]], at, is_nan,
                                   ctx);
        }
        return st;
    }
    return TJ_OK;
}

/* ---- the run loop ---------------------------------------------------------------------------- */
/* Runs p's steps with env into vals (one slot per node). keep (IR_NONE: none) is a node whose
 * value stays in vals whatever its last use. */
static tj_status exec_steps(rt_plan *p, const rt_exec_env *env, tj_tensor **vals, void **scratch,
                            tj_tensor *const *outs, uint32_t keep) {
    const ir_graph *g = p->base.g;
    tj_status st = TJ_OK;
    for (uint32_t s = 0; s < p->n_steps && !st; s++) {
        const rt_step *sp = &p->steps[s];
        double t0 = RT_PROFILING() && (!p->labels || !is_value(g, sp)) ? rt_profile_now() : 0;
        if (p->dev && sp->kind == RT_STEP_KERNEL)
            st = run_device_kernel(p, s, vals, scratch);
        else if (p->dev)
            st = host_inputs(p, sp, vals);
        switch (st ? -1 : p->dev && sp->kind == RT_STEP_KERNEL ? -1 : sp->kind) {
        case -1:
            break;
        case RT_STEP_KERNEL:
            st = run_kernel(p, sp, vals, scratch, outs, env->args, env->n_args);
            break;
        case RT_STEP_GEMM:
            st = rt_plan_run_gemm(p, sp, vals, scratch);
            break;
        case RT_STEP_CF:
            st = run_cf(p, sp, vals, scratch, env);
            break;
        case RT_STEP_CONV:
            st = rt_plan_run_conv(p, sp, vals, scratch, s, keep);
            break;
        default:
            st = rt_exec_node(g, sp->id, env, vals, (tj_tensor **)scratch,
                              p->reuse ? reusable(p, sp, s, keep, vals) : NULL);
        }
        if (t0)
            profile_step(p, s, t0);
        if (!st && RT_CHECKING_NUMERICS() && (!p->labels || !is_value(g, sp)))
            st = check_step(p, s, env, vals);
        /* drop values whose last reader was this step */
        for (uint32_t k = 0; k < sp->n_in; k++) {
            uint32_t j = sp->in[k];
            if (p->last_use[j] == s && j != keep) {
                rt_release(vals[j]);
                vals[j] = NULL;
            }
        }
    }
    return st;
}

tj_status rt_plan_run(rt_program *prog, tj_tensor *const *args, uint32_t n_args, tj_variable **caps,
                      tj_tensor **outs) {
    rt_plan *p = (rt_plan *)prog;
    const ir_graph *g = prog->g;
    /* small programs keep their per-call state on the stack: the hit path allocates nothing */
    tj_tensor *stack_vals[64];
    void *stack_scratch[64];
    tj_tensor **vals = g->n_nodes < 64 ? stack_vals : calloc(g->n_nodes + 1, sizeof *vals);
    void **scratch = p->max_bufs < 64 ? stack_scratch : calloc(p->max_bufs + 1, sizeof(void *));
    if (vals == stack_vals)
        memset(stack_vals, 0, g->n_nodes * sizeof *vals); /* only what this graph uses */
    if (!vals || !scratch) {
        if (vals != stack_vals)
            free(vals);
        if (scratch != stack_scratch)
            free(scratch);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", p->who);
    }
    rt_exec_env env = {.args = args,
                       .n_args = n_args,
                       .caps = caps,
                       .consts = p->consts,
                       .regions = p->regions,
                       .effects = 1,
                       .reinfer = p->reinfer,
                       .check_params = p->check_params,
                       .who = p->who,
                       .device = p->dev};
    tj_status st = exec_steps(p, &env, vals, scratch, outs, IR_NONE);
    if (p->finish)
        st = p->finish(p, st);
    for (uint32_t k = 0; k < g->n_outputs && !st; k++) {
        tj_tensor *v = vals[g->outputs[k]];
        if (p->dev && v && v->kind == RT_CONCRETE && v->dtype != TJ_STRING && rt_on_host(v)) {
            tj_tensor *d = rt_tensor_to_device(v, p->dev); /* a device plan's outputs end there */
            if (!d) {
                st = ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
                break;
            }
            for (uint32_t q = 0; q < g->n_nodes; q++) /* the same value may be several outputs */
                if (vals[q] == v)
                    rt_release(vals[q]), vals[q] = rt_retain(d);
            rt_release(d);
            v = vals[g->outputs[k]];
        }
        if (!outs[k])
            outs[k] = rt_retain(v);
        else if (outs[k] != v) /* not written in place: copy into the caller's tensor */
            st = rt_copy_into(outs[k], v);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++)
        rt_release(vals[i]);
    if (vals != stack_vals)
        free(vals);
    if (scratch != stack_scratch)
        free(scratch);
    return st;
}

tj_status rt_plan_eval(rt_plan *p, const rt_exec_env *env, uint32_t keep, tj_tensor **vals) {
    void **scratch = calloc(p->max_bufs + 1, sizeof(void *));
    if (!scratch)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", p->who);
    tj_status st = exec_steps(p, env, vals, scratch, NULL, keep);
    free(scratch);
    return st;
}

/* ---- building -------------------------------------------------------------------------------- */
tj_status rt_plan_init(rt_plan *p, const ir_graph *g, const char *who) {
    p->base.g = g;
    p->who = who;
    p->par_min = 65536;
    if (!(p->out_slot = malloc((g->n_nodes + 1) * sizeof *p->out_slot)))
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", who);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        p->out_slot[i] = -1;
    for (uint32_t k = g->n_outputs; k-- > 0;)
        p->out_slot[g->outputs[k]] = (int32_t)k;
    return TJ_OK;
}

uint32_t rt_plan_step_nodes(const rt_plan *p, uint32_t s, uint32_t *out) {
    const rt_step *sp = &p->steps[s];
    if (!sp->nodes) {
        out[0] = sp->id;
        return 1;
    }
    memcpy(out, sp->nodes, sp->n_nodes * sizeof *out);
    return sp->n_nodes;
}

tj_status rt_ew_layout_of(const ir_graph *g, const uint32_t *in_ids, uint32_t ni, int r,
                          const int64_t *loop, rt_ew_layout *L) {
    L->st = calloc(ni + 1, sizeof *L->st);
    L->scalar = calloc(ni + 1, sizeof *L->scalar);
    if (!L->st || !L->scalar)
        return ir_errorf(TJ_ERR_OOM, "elementwise layout: out of memory");
    /* raw broadcast strides over the loop dims, size-1 loop dims dropped */
    int64_t dims[IR_MAX_RANK];
    int k = 0;
    for (int d = 0; d < r; d++)
        if (loop[d] != 1)
            dims[k++] = loop[d];
    int kr = k;
    for (uint32_t i = 0; i < ni; i++) {
        const ir_node *in = ir_node_get(g, in_ids[i]);
        int64_t s = 1, raw[IR_MAX_RANK];
        for (int d = r - 1; d >= 0; d--) {
            int id = d - (r - in->rank);
            int64_t dim = id >= 0 ? in->dims[id] : 1;
            raw[d] = dim == 1 ? 0 : s;
            s *= dim;
        }
        k = 0;
        for (int d = 0; d < r; d++)
            if (loop[d] != 1)
                L->st[i][k++] = raw[d];
    }
    /* merge adjacent dims whose strides agree for every input */
    L->rank = 0;
    for (int d = 0; d < kr; d++) {
        int o = L->rank;
        bool merge = o > 0;
        for (uint32_t i = 0; i < ni && merge; i++)
            merge = L->st[i][o - 1] == L->st[i][d] * dims[d];
        if (merge) {
            L->dims[o - 1] *= dims[d];
            for (uint32_t i = 0; i < ni; i++)
                L->st[i][o - 1] = L->st[i][d];
        } else {
            L->dims[o] = dims[d];
            for (uint32_t i = 0; i < ni; i++)
                L->st[i][o] = L->st[i][d];
            L->rank++;
        }
    }
    if (L->rank == 0) { /* every loop dim is 1: one element */
        L->rank = 1;
        L->dims[0] = 1;
        for (uint32_t i = 0; i < ni; i++)
            L->st[i][0] = 0;
    }
    L->flat = L->rank == 1;
    for (uint32_t i = 0; i < ni; i++) {
        L->scalar[i] = true;
        for (int d = 0; d < L->rank; d++)
            L->scalar[i] &= L->st[i][d] == 0;
        if (!L->scalar[i] && L->rank > 1)
            L->flat = false;
    }
    return TJ_OK;
}

void rt_ew_layout_free(rt_ew_layout *L) {
    free(L->st);
    free(L->scalar);
    L->st = NULL;
    L->scalar = NULL;
}

int64_t *rt_ew_geom(const rt_ew_layout *L, uint32_t n_in) {
    int r = L->rank;
    int64_t *geom = malloc((size_t)(1 + n_in) * (size_t)r * sizeof *geom);
    if (!geom)
        return NULL;
    memcpy(geom, L->dims, (size_t)r * sizeof *geom);
    for (uint32_t i = 0; i < n_in; i++)
        memcpy(geom + (size_t)(1 + i) * (size_t)r, L->st[i], (size_t)r * sizeof *geom);
    return geom;
}

bool rt_red_geometry(const ir_graph *g, const ir_node *n, int64_t *outer, int64_t *len,
                     int64_t *inner) {
    if (n->n_in != 1)
        return false;
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
    return ir_red_split(x->rank, x->dims, red, outer, len, inner) && *outer * *inner == on;
}

rt_units rt_red_units(int64_t outer, int64_t len, int64_t inner) {
    int64_t n_blocks = (inner + RT_RED_BLOCK - 1) / RT_RED_BLOCK,
            blk = inner < RT_RED_BLOCK ? inner : RT_RED_BLOCK;
    return (rt_units){.n_units = inner == 1 ? outer : outer * n_blocks,
                      .unit_len = (len ? len : 1) * blk};
}

/* A shape-generic reduction's block: its reduced length, the one extent its code takes at run
 * time; its units must be the geometry's. */
static tj_status red_geom(rt_plan *p, rt_step *sp) {
    const ir_graph *g = p->base.g;
    const ir_node *n = sp->n_out == 1 ? ir_node_get(g, sp->out[0]) : NULL;
    int64_t outer, len, inner;
    if (!n || n->op < IR_OP_SUM || n->op > IR_OP_PROD ||
        !rt_red_geometry(g, n, &outer, &len, &inner))
        return ir_errorf(TJ_ERR_INVALID, "%s: step %%%u: not a shape-generic reduction", p->who,
                         sp->id);
    rt_units u = rt_red_units(outer, len, inner);
    if (u.n_units != sp->units.n_units || u.unit_len != sp->units.unit_len)
        return ir_errorf(
            TJ_ERR_INVALID, "%s: step %%%u: work units %lld x %lld do not match its reduction's",
            p->who, sp->id, (long long)sp->units.n_units, (long long)sp->units.unit_len);
    if (!(sp->geom = malloc(sizeof *sp->geom)))
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", p->who);
    sp->geom[0] = len;
    return TJ_OK;
}

/* Step sp's geometry block from the graph (a shape-generic kernel's extents are never taken
 * from an image's bytes); its work units must be the layout's rows. */
static tj_status step_geom(rt_plan *p, rt_step *sp) {
    const ir_graph *g = p->base.g;
    bool epi = (sp->kind == RT_STEP_GEMM || sp->kind == RT_STEP_CONV) && rt_step_has_epi(sp);
    if (sp->generic == RT_GENERIC_RED && sp->kind == RT_STEP_KERNEL)
        return red_geom(p, sp);
    if (sp->generic != RT_GENERIC_EW || !(sp->kind == RT_STEP_KERNEL || epi))
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: step %%%u: only a kernel or the epilogue of a product or a "
                         "convolution is shape-generic",
                         p->who, sp->id);
    const uint32_t *in = epi ? sp->epi.in : sp->in, *out = epi ? sp->epi.out : sp->out;
    uint32_t n_in = epi ? sp->epi.n_in : sp->n_in, n_out = epi ? sp->epi.n_out : sp->n_out;
    if (!n_out)
        return ir_errorf(TJ_ERR_INVALID, "%s: step %%%u: a shape-generic kernel writes nothing",
                         p->who, sp->id);
    const ir_node *o = ir_node_get(g, out[0]);
    rt_ew_layout L = {0};
    tj_status st = rt_ew_layout_of(g, in, n_in, o->rank, o->dims, &L);
    if (!st) {
        int64_t len = L.dims[L.rank - 1], numel = ir_numel(o->rank, o->dims);
        if (L.flat || sp->units.unit_len != len || sp->units.n_units != (len ? numel / len : 0))
            st = ir_errorf(TJ_ERR_INVALID,
                           "%s: step %%%u: work units %lld x %lld do not match its shape-generic "
                           "kernel's rows",
                           p->who, sp->id, (long long)sp->units.n_units,
                           (long long)sp->units.unit_len);
    }
    if (!st && !(sp->geom = rt_ew_geom(&L, n_in)))
        st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", p->who);
    rt_ew_layout_free(&L);
    return st;
}

tj_status rt_plan_finish(rt_plan *p, bool raw, rt_program *(*region)(const ir_graph *, void *),
                         void *ctx) {
    const ir_graph *g = p->base.g;
    if (!(p->last_use = calloc(g->n_nodes + 1, sizeof *p->last_use)))
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", p->who);
    p->max_bufs = 8;
    for (uint32_t s = 0; s < p->n_steps; s++) {
        const rt_step *sp = &p->steps[s];
        uint32_t nb = rt_step_has_epi(sp) ? sp->epi.n_in + sp->epi.n_out : sp->n_in + sp->n_out;
        if (sp->kind == RT_STEP_CF)
            nb = sp->n_in + ir_cf_n_results(g, ir_node_get(g, sp->id));
        if (nb > p->max_bufs)
            p->max_bufs = nb;
        for (uint32_t k = 0; k < sp->n_in; k++)
            p->last_use[sp->in[k]] = s;
    }
    for (uint32_t s = 0; s < p->n_steps; s++) {
        tj_status st =
            p->steps[s].generic && !p->steps[s].geom ? step_geom(p, &p->steps[s]) : TJ_OK;
        if (st)
            return st;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        p->last_use[g->outputs[k]] = UINT32_MAX;
    tj_status st = raw ? rt_plan_raw_prepare(p) : TJ_OK;
    return st || !region ? st : rt_regions_new(g, region, ctx, &p->regions);
}

void rt_plan_release(rt_plan *p) {
    const ir_graph *g = p->base.g;
    if (p->consts)
        for (uint32_t i = 0; i < g->n_nodes; i++)
            rt_release(p->consts[i]);
    free(p->consts);
    if (p->dev_consts)
        for (uint32_t i = 0; i < g->n_nodes; i++)
            rt_release(p->dev_consts[i]);
    free(p->dev_consts);
    for (uint32_t s = 0; p->steps && s < p->n_steps; s++) {
        rt_step *sp = &p->steps[s];
        free(sp->in);
        free(sp->out);
        free(sp->nodes);
        free(sp->epi.in);
        free(sp->epi.out);
        free(sp->raw_res);
        free(sp->geom);
        rt_gemm_packed_free(sp->packed);
        if (p->labels)
            free(p->labels[s]);
    }
    free(p->labels);
    free(p->steps);
    free(p->raw_off);
    free(p->raw_inplace);
    rt_regions_free(p->regions, g);
    free(p->last_use);
    free(p->out_slot);
}

uint32_t rt_plan_kernels(const rt_program *prog, int32_t *kernel_of, const char *const **names) {
    const rt_plan *p = (const rt_plan *)prog;
    uint32_t n = prog->g->n_nodes, *ids = malloc((n + 1) * sizeof *ids);
    for (uint32_t i = 0; i < n; i++)
        kernel_of[i] = -1;
    *names = (const char *const *)p->labels;
    if (!ids || !p->labels)
        return free(ids), 0;
    for (uint32_t s = 0; s < p->n_steps; s++) {
        uint32_t k = rt_plan_step_nodes(p, s, ids);
        for (uint32_t j = 0; j < k; j++) {
            int op = prog->g->nodes[ids[j]].op; /* values, not work */
            if (op != IR_OP_CONST && op != IR_OP_PARAM && op != IR_OP_VAR_READ && op != IR_OP_GET)
                kernel_of[ids[j]] = (int32_t)s;
        }
    }
    free(ids);
    return p->n_steps;
}
