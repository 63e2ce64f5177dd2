/* tracing.c — turning a C function into concrete functions: calling it through libffi, with
 * symbolic tensors (a trace) or concrete ones (an eager call), and building a concrete function
 * from a trace (trace, the S11 re-trace when variables were created, compile, publish).
 *
 *   jit_build_concrete: trace_once (call_user under an rt_trace) -> jit_compile_graph -> publish
 *
 * Nested calls of functions (eager, or inlined while tracing) go through tj_call_eager, which
 * bounds their depth so that unbounded recursion is an error, not a stack overflow. */
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"

/* ---- calling the user's C function ----------------------------------------------------------- */
/* Runs f's C code in the caller's scope; its result is then owned by that scope, whether the
 * code returned a reference its scope owns, an argument, or a reference it retained. */
static tj_tensor *call_user(tj_function *f, tj_tensor *const *args) {
    rt_user_mark m = rt_user_enter();
    if (f->body)
        return rt_user_leave(f->body(f->nargs, args, f->body_user), m);
    void *vals_stack[SIG_STACK],
        **vals = f->nargs <= SIG_STACK ? vals_stack : malloc(f->nargs * sizeof *vals);
    if (!vals)
        return rt_user_leave(rt_scoped(rt_errorf(TJ_ERR_OOM, "%s: out of memory", f->name)), m);
    for (int i = 0; i < f->nargs; i++)
        vals[i] = (void *)&args[i];
    void *ret = NULL;
    ffi_call(&f->cif, FFI_FN(f->fn), &ret, vals);
    if (vals != vals_stack)
        free(vals);
    return rt_user_leave(ret, m);
}

/* ---- tracing --------------------------------------------------------------------------------- */
typedef struct trace_result {
    ir_graph *g;
    tj_variable **caps;
    uint32_t n_caps;
    int result_kind;
    int vars_created;
} trace_result;

static tj_status add_output(rt_trace *tr, const char *fn, int k, tj_tensor *t) {
    if (!t)
        return ir_errorf(TJ_ERR_INVALID, "%s: result %d is NULL", fn, k);
    if (t->kind == RT_ERROR) /* the result's own message, not "cannot record an error" */
        return ir_errorf(t->code, "%s", t->msg);
    if (t->kind == RT_TUPLE)
        return ir_errorf(TJ_ERR_UNSUPPORTED,
                         "%s: result %d is a tuple (nested tuples are not "
                         "supported: return one flat tuple)",
                         fn, k);
    uint32_t id = api_trace_lift(tr, t);
    if (id == IR_NONE)
        return ir_last_code();
    return ir_add_output(tr->g, id);
}

/* The variables a trace created belong to the traced function from now on, whether the trace
 * succeeded or not (f->mu held). */
static void adopt_variables(tj_function *f, tj_variable **vs, int n) {
    tj_variable **all = n ? realloc(f->owned_vars, (f->n_owned_vars + n) * sizeof *all) : NULL;
    if (n && !all) { /* out of memory: release them now rather than lose them */
        for (int i = 0; i < n; i++)
            rt_variable_release(vs[i]);
    } else if (n) {
        memcpy(all + f->n_owned_vars, vs, (size_t)n * sizeof *vs);
        f->owned_vars = all;
        f->n_owned_vars += n;
    }
    free(vs);
}

/* Traces f once. args: the call's concrete inputs (NULL when tracing for specs). */
static tj_status trace_once(tj_function *f, const jit_argsig *sig, tj_tensor *const *args,
                            int allow_vars, trace_result *out) {
    memset(out, 0, sizeof *out);
    rt_trace tr;
    memset(&tr, 0, sizeof tr);
    if (!(tr.g = ir_graph_new(f->name)))
        return ir_last_code();
    tr.args = args;
    tr.owner = f;
    tr.n_args = (uint32_t)f->nargs;
    tr.arg_names = (const char *const *)f->arg_names;
    tr.allow_var_create = allow_vars;
    tj_status st = TJ_OK;
    tj_tensor *stack_sym[SIG_STACK],
        **sym = f->nargs <= SIG_STACK ? stack_sym : calloc(f->nargs, sizeof *sym);
    if (!sym) {
        ir_graph_free(tr.g);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", f->name);
    }
    api_trace_push(&tr);
    tj_scope_begin();
    for (int i = 0; i < f->nargs && !st; i++) {
        if (sig[i].is_static) {
            sym[i] = sig[i].value; /* baked into the trace by value */
            continue;
        }
        ir_node p;
        memset(&p, 0, sizeof p);
        p.op = IR_OP_PARAM;
        p.dtype = sig[i].dtype;
        p.rank = sig[i].rank;
        memcpy(p.dims, sig[i].dims, sizeof p.dims);
        p.a.i[0] = i;
        uint32_t id = ir_add(tr.g, &p, NULL, 0);
        if (id == IR_NONE)
            st = ir_last_code();
        else
            sym[i] = rt_scoped(api_symbolic(&tr, id));
    }
    tj_tensor *res = st ? NULL : call_user(f, sym);
    if (!st && tr.err) {
        st = ir_errorf(tr.err, "%s", tr.errmsg);
    } else if (!st && res && res->kind == RT_ERROR) {
        st = ir_errorf(res->code, "%s", res->msg);
    } else if (!st && !res) {
        out->result_kind = JIT_RESULT_NONE;
    } else if (!st && res->kind == RT_TUPLE) {
        out->result_kind = JIT_RESULT_TUPLE;
        for (int k = 0; k < res->n_items && !st; k++)
            st = add_output(&tr, f->name, k, res->items[k]);
    } else if (!st) {
        out->result_kind = JIT_RESULT_SINGLE;
        st = add_output(&tr, f->name, 0, res);
    }
    tj_scope_end();
    api_trace_pop();
    if (sym != stack_sym)
        free(sym);
    out->vars_created = tr.n_vars_created;
    adopt_variables(f, tr.created, tr.n_vars_created);
    api_trace_free_state(&tr);
    if (st) {
        for (uint32_t i = 0; i < tr.n_caps; i++)
            rt_variable_release(tr.caps[i]);
        free(tr.caps);
        ir_graph_free(tr.g);
        return st;
    }
    tr.g->n_caps = tr.n_caps > tr.g->n_caps ? tr.n_caps : tr.g->n_caps;
    out->g = tr.g;
    out->caps = tr.caps;
    out->n_caps = tr.n_caps;
    return TJ_OK;
}

static void trace_result_free(trace_result *r) {
    for (uint32_t i = 0; i < r->n_caps; i++)
        rt_variable_release(r->caps[i]);
    free(r->caps);
    ir_graph_free(r->g);
}

/* Says which argument changed since the last trace (TJ_LOG=retrace) and warns on frequent
 * retracing, as TensorFlow does. Called under f->mu. */
static void log_retrace(tj_function *f, const jit_argsig *sig, uint64_t call_idx) {
    int n = atomic_load(&f->n_traces);
    if (n > 0 && rt_log_enabled(RT_LOG_RETRACE)) {
        jit_snapshot *s = atomic_load(&f->cache);
        tj_concrete *last = NULL;
        for (uint32_t i = 0; s && i < s->n; i++)
            if (!last || s->items[i]->last_used > last->last_used)
                last = s->items[i];
        for (int i = 0; last && i < f->nargs; i++) {
            char a[160], b[160];
            jit_argsig_str(&last->sig[i], a, sizeof a);
            jit_argsig_str(&sig[i], b, sizeof b);
            if (strcmp(a, b) == 0)
                continue;
            const char *what = last->sig[i].is_static != sig[i].is_static ? "kind"
                               : sig[i].is_static                         ? "static value"
                               : last->sig[i].dtype != sig[i].dtype       ? "dtype"
                                                                          : "shape";
            rt_log(RT_LOG_RETRACE, "retracing '%s': argument %d (%s) changed %s: %s -> %s", f->name,
                   i, f->arg_names[i], what, a, b);
        }
    }
    memmove(f->trace_calls, f->trace_calls + 1, 4 * sizeof *f->trace_calls);
    f->trace_calls[4] = call_idx;
    if (n >= 4 && call_idx - f->trace_calls[0] < 10) {
        f->n_warnings++;
        rt_log(RT_LOG_RETRACE,
               "warning: 5 of the last 10 calls of '%s' triggered tf.function-style "
               "retracing; pass tensors instead of static values, or give an input "
               "signature",
               f->name);
    }
}

/* The variables c's graph assigns, sorted by id so concurrent runs lock them in one order. */
static tj_status collect_locks(tj_concrete *c) {
    return rt_assigned_vars(c->graph, c->caps, c->n_caps, &c->locks, &c->n_locks);
}

/* ---- tiered compilation ------------------------------------------------------------------------
 * A tiered function's new signature runs on the interpreter at once (the optimized graph, the
 * reference kernels; large f32 products on gemm_packed.c's tiles). Its compile is released by
 * its second call (jit_tier_go, from run_program: a signature called once never compiles, and
 * the calls before have the cores to themselves: a compile beside a call preempted its OpenBLAS
 * threads or held a lock it needed, up to 70 ms); only then is a background thread made, which
 * compiles the native program on that thread alone, leaving the other core to the calls. Calls
 * switch to the native program when it is published (an atomic pointer: a call takes whichever
 * program it reads; both stay alive until the concrete function is freed, which cancels or joins
 * the thread first). tier_running counts the compiles released and not finished; process exit waits
 * for them, so LLVM is never torn down under one. */
static pthread_mutex_t tier_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tier_cv = PTHREAD_COND_INITIALIZER;
static int tier_running;
static pthread_once_t tier_once = PTHREAD_ONCE_INIT;

void jit_tier_wait_all(void) {
    pthread_mutex_lock(&tier_mu);
    while (tier_running)
        pthread_cond_wait(&tier_cv, &tier_mu);
    pthread_mutex_unlock(&tier_mu);
}
static void tier_register_exit(void) {
    atexit(jit_tier_wait_all);
}

/* A background compile of c's graph for c->backend (generic or specialized), published into
 * *slot when it is native code (logged: "<name>: <published>"); a decline (the interpreter
 * again) or a failure is logged with the error. Then the compile counts as finished
 * (tier_running), after its log lines, so a caller of jit_tier_wait_all sees them. On the
 * compile's own thread. */
static void compile_into(tj_concrete *c, bool generic, bool quick, _Atomic(rt_program *) *slot,
                         const char *published) {
    rt_compile_one_thread = 1;
    rt_program *p = jit_backend_program_opts(c->graph, c->name, c->backend, generic, quick);
    if (p && strcmp(p->vt->name, jit_backend_interpreter()->name) != 0) {
        p->g = c->graph;
        atomic_store_explicit(slot, p, memory_order_release);
        rt_log(RT_LOG_COMPILE, "%s: %s", c->name, published);
    } else {
        rt_log(RT_LOG_COMPILE, "%s: background compile %s; the program before stays", c->name,
               p ? "declined" : ir_last_error());
        if (p)
            p->vt->free(p);
        ir_clear_error();
    }
    pthread_mutex_lock(&tier_mu);
    tier_running--;
    pthread_cond_broadcast(&tier_cv);
    pthread_mutex_unlock(&tier_mu);
}

static void *tier_up(void *arg) {
    tj_concrete *c = arg; /* freed only after this thread is joined */
    compile_into(c, c->shape_generic, rt_config_get()->quick_compile, &c->tier1,
                 "native code in place");
    return NULL;
}

void jit_tier_up_start(tj_concrete *c) {
    pthread_once(&tier_once, tier_register_exit);
    atomic_store(&c->compiling, 1); /* pending: its thread starts when the compile is released */
}

void jit_tier_go(tj_concrete *c, int how) {
    if (!c || atomic_load_explicit(&c->tier_go, memory_order_relaxed) ||
        !atomic_load(&c->compiling))
        return;
    pthread_mutex_lock(&tier_mu);
    if (!atomic_load(&c->tier_go)) {
        /* the thread is made here, not with the signature: a sweep of once-called shapes made
         * (and joined) a thread per shape for nothing */
        if (how == 1 && pthread_create(&c->compiler, NULL, tier_up, c) != 0) {
            rt_log(RT_LOG_COMPILE, "%s: no thread for the background compile: interpreted",
                   c->name);
            how = 2;
        }
        atomic_store(&c->tier_go, how);
        tier_running += how == 1;
    }
    pthread_mutex_unlock(&tier_mu);
}

/* A hot signature: the same graph compiled as the backend's best code (specialized to its shapes,
 * chains of its small kernels; not quick: loops unrolled), published as tier2; the program before
 * stays alive beside it until c is freed, as the tiers do. */
static void *respec_up(void *arg) {
    tj_concrete *c = arg; /* freed only after this thread is joined */
    compile_into(c, false, false, &c->tier2,
                 "compiled again, specialized and unrolled (a hot signature)");
    return NULL;
}

void jit_respecialize(tj_concrete *c) {
    pthread_once(&tier_once, tier_register_exit);
    pthread_mutex_lock(&tier_mu);
    if (!atomic_load(&c->respec)) {
        int made = c->backend && pthread_create(&c->respec_thread, NULL, respec_up, c) == 0;
        atomic_store(&c->respec, made ? 1 : 2);
        tier_running += made;
    }
    pthread_mutex_unlock(&tier_mu);
}

void jit_respecialize_free(tj_concrete *c) {
    if (atomic_load(&c->respec) == 1)
        pthread_join(c->respec_thread, NULL);
    rt_program *t2 = atomic_load(&c->tier2);
    if (t2)
        t2->vt->free(t2);
}

void jit_tier_finish(tj_concrete *c) {
    jit_tier_go(c, 1);
    jit_tier_join(c);
}

void jit_tier_join(tj_concrete *c) {
    if (c && atomic_load(&c->compiling)) {
        jit_tier_go(c, 2); /* never released: cancelled, no thread */
        if (atomic_exchange(&c->compiling, 0) && atomic_load(&c->tier_go) == 1)
            pthread_join(c->compiler, NULL);
    }
}

/* ---- unknown dims: native code per shape ------------------------------------------------------
 * A signature with -1 dims is traced once (S3: its host code runs once) and its graph kept with
 * unknown dims; a call at shapes not seen yet makes an instance: the graph at those shapes
 * (ir_graph_concretize) planned as a later signature's (shape-generic kernels), from the code
 * cache where its kernels are there, else on the interpreter at once and compiled in the
 * background from its second call, as a tiered signature is (untiered: compiled then). The
 * instances are an append-only list searched by exact shape without a lock, made under a mutex;
 * each is a tj_concrete of its own (caps retained, locks collected) that lives as long as c. */
typedef struct jit_instances {
    pthread_mutex_t mu; /* held to make one; lookups take none */
    const jit_backend *b;
    int tiered;
    _Atomic uint32_t n; /* items[0, n) are published (release), never removed before c is freed */
    tj_concrete *items[JIT_MAX_INSTANCES];
} jit_instances;

/* The instance of t whose signature args match, among its first n. */
static tj_concrete *instance_find(const jit_instances *t, uint32_t n, uint32_t nargs,
                                  tj_tensor *const *args) {
    for (uint32_t i = 0; i < n; i++) {
        int ok = 1;
        for (uint32_t k = 0; k < nargs && ok; k++)
            ok = jit_arg_matches(&t->items[i]->sig[k], args[k]);
        if (ok)
            return t->items[i];
    }
    return NULL;
}

static jit_instances *instances_new(const ir_graph *g, const jit_backend *b, int tiered) {
    if (b == jit_backend_interpreter())
        return NULL;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].a.sub[0]) /* regions: their params keep unknown dims */
            return NULL;
    jit_instances *t = calloc(1, sizeof *t);
    if (t) {
        pthread_mutex_init(&t->mu, NULL);
        t->b = b;
        t->tiered = tiered;
    }
    return t; /* NULL on no memory: the interpreter, as before */
}

static tj_concrete *instance_new(tj_concrete *c, const jit_instances *t, tj_tensor *const *args) {
    int rank[SIG_STACK];
    int64_t(*dims)[IR_MAX_RANK] = calloc(c->nargs + 1, sizeof *dims);
    int *rk = c->nargs <= SIG_STACK ? rank : calloc(c->nargs, sizeof *rk);
    tj_concrete *ci = NULL;
    ir_graph *g = NULL;
    if (!dims || !rk)
        goto fail;
    for (uint32_t k = 0; k < c->nargs; k++) {
        rk[k] = args[k]->rank;
        memcpy(dims[k], args[k]->dims, sizeof(int64_t) * args[k]->rank);
    }
    /* a shape error here is the interpreter's to report, with the message the trace would give */
    if (!(g = ir_graph_concretize(c->graph, rk, (const int64_t(*)[IR_MAX_RANK])dims)) ||
        !(ci = calloc(1, sizeof *ci)) || !(ci->sig = jit_sig_copy(c->sig, c->nargs)) ||
        !(ci->caps = calloc(c->n_caps + 1, sizeof *ci->caps)))
        goto fail;
    ci->fn = c->fn;
    ci->name = c->name;
    ci->nargs = c->nargs;
    ci->result_kind = c->result_kind;
    for (uint32_t k = 0; k < c->nargs; k++)
        memcpy(ci->sig[k].dims, dims[k], sizeof ci->sig[k].dims);
    ci->sig_hash = jit_sig_hash(ci->sig, (int)c->nargs);
    for (uint32_t k = 0; k < c->n_caps; k++)
        ci->caps[ci->n_caps++] = rt_variable_retain(c->caps[k]);
    ci->graph = g;
    g = NULL;
    ci->shape_generic = true;
    ci->backend = t->b;
    ci->prog = t->tiered ? jit_backend_program_cached(ci->graph, c->name, t->b, true) : NULL;
    if (!ci->prog && t->tiered) {
        ci->prog = jit_backend_program(ci->graph, c->name, jit_backend_interpreter(), false);
        if (ci->prog)
            jit_tier_up_start(ci);
    } else if (!ci->prog) {
        ci->prog = jit_backend_program(ci->graph, c->name, t->b, true);
    }
    if (!ci->prog || collect_locks(ci) != TJ_OK)
        goto fail;
    ci->prog->g = ci->graph;
    rt_log(RT_LOG_COMPILE, "%s: an instance of its unknown-dims signature (%u nodes)", c->name,
           ci->graph->n_nodes);
    if (rk != rank)
        free(rk);
    free(dims);
    return ci;
fail:
    rt_log(RT_LOG_COMPILE, "%s: no instance at these shapes (%s); interpreted", c->name,
           ir_last_error());
    ir_clear_error();
    ir_graph_free(g);
    jit_concrete_free(ci);
    if (rk != rank)
        free(rk);
    free(dims);
    return NULL;
}

tj_concrete *jit_instance(tj_concrete *c, tj_tensor *const *args) {
    jit_instances *t = c->inst;
    /* a shape seen before: no lock (the call path stays lock-free) */
    tj_concrete *ci =
        instance_find(t, atomic_load_explicit(&t->n, memory_order_acquire), c->nargs, args);
    if (ci)
        return ci;
    pthread_mutex_lock(&t->mu); /* a new shape: made once, whoever else asks meanwhile */
    uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
    if (!(ci = instance_find(t, n, c->nargs, args)) && n < JIT_MAX_INSTANCES &&
        (ci = instance_new(c, t, args)) != NULL) {
        t->items[n] = ci;
        atomic_store_explicit(&t->n, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&t->mu);
    return ci;
}

void jit_instances_go(tj_concrete *c) {
    jit_instances *t = c ? c->inst : NULL;
    for (uint32_t i = 0; t && i < atomic_load_explicit(&t->n, memory_order_acquire); i++)
        jit_tier_go(t->items[i], 1);
}

void jit_instances_free(tj_concrete *c) {
    jit_instances *t = c->inst;
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        jit_concrete_free(t->items[i]);
    pthread_mutex_destroy(&t->mu);
    free(t);
    c->inst = NULL;
}

/* Traces, compiles and publishes a concrete function for sig. Called with f->mu held. */
tj_concrete *jit_build_concrete(tj_function *f, const jit_argsig *sig, uint64_t h,
                                tj_tensor *const *args, uint64_t call_idx) {
    log_retrace(f, sig, call_idx);
    int first = !f->has_concrete; /* a failed trace does not use up the first trace */
    trace_result tr;
    atomic_fetch_add(&f->n_traces, 1);
    double t0 = RT_PROFILING() ? rt_profile_now() : 0;
    tj_status st = trace_once(f, sig, args, first, &tr);
    if (t0)
        rt_profile_event("trace", f->name, t0, "\"nodes\":%u", st ? 0 : tr.g->n_nodes);
    if (!st && first && tr.vars_created) {
        /* S11: variables were created on the first trace; trace again with creation forbidden,
         * as TensorFlow does, so an unconditional tj_variable_new is reported. */
        trace_result again;
        atomic_fetch_add(&f->n_traces, 1);
        st = trace_once(f, sig, args, 0, &again);
        trace_result_free(&tr);
        tr = again;
    }
    if (st)
        return NULL;
    const jit_backend *b = NULL;
    if (jit_fn_backend(f, &b) != TJ_OK) {
        trace_result_free(&tr);
        return NULL;
    }
    tj_concrete *c = calloc(1, sizeof *c);
    if (!c || !(c->sig = jit_sig_copy(sig, (uint32_t)f->nargs))) {
        free(c);
        trace_result_free(&tr);
        return (void)ir_errorf(TJ_ERR_OOM, "%s: out of memory", f->name), NULL;
    }
    c->fn = f;
    c->name = f->name;
    c->sig_hash = h;
    c->nargs = (uint32_t)f->nargs;
    c->result_kind = tr.result_kind;
    c->caps = tr.caps;
    c->n_caps = tr.n_caps;
    tr.caps = NULL;
    tr.n_caps = 0;
    for (int i = 0; i < f->nargs; i++)
        for (int d = 0; d < sig[i].rank && !sig[i].is_static; d++)
            if (sig[i].dims[d] < 0)
                c->has_unknown = 1;
    /* automatic dynamic shapes (torch.compile's rule): a function's first signature gets code
     * specialized to its extents; a later one, most often the same ranks at other extents, gets
     * shape-generic kernels where the backend has them, which its next shapes reuse without a
     * compile (jit_backend_opts.shape_generic) */
    c->shape_generic = !first;
    c->backend = b;
    int tiered = (f->tiered > 0 || (f->tiered == 0 && rt_config_get()->tiered)) &&
                 !c->has_unknown && b != jit_backend_interpreter() && !b->device;
    if (tiered) {
        /* a new shape of a function that has run before: b's code at once where none must be
         * generated (its kernels compiled for another shape, or on disk). Otherwise, and for a
         * function's first signature, the interpreter now and b's code from a background
         * thread: a first native run packs the weights and touches its buffers for the first
         * time, and a model's first call took longer so (ResNet-50 from the disk cache: 120-142
         * ms native, 78-95 ms interpreted; the seed CNN 20-21 against 14-16 ms). */
        c->graph = jit_optimize_graph(tr.g, f->name, h, b);
        c->prog = c->graph && !first
                      ? jit_backend_program_cached(c->graph, f->name, b, c->shape_generic)
                      : NULL;
        tiered = c->graph && !c->prog;
        if (tiered) {
            c->prog = jit_backend_program(c->graph, f->name, jit_backend_interpreter(), false);
        }
    } else if (c->has_unknown) {
        /* the graph at unknown dims runs on the interpreter (the fallback), each shape it is
         * called at on an instance of b's code */
        c->graph = jit_optimize_graph(tr.g, f->name, h, b);
        c->prog = c->graph
                      ? jit_backend_program(c->graph, f->name, jit_backend_interpreter(), false)
                      : NULL;
        if (c->prog && b != jit_backend_interpreter())
            rt_log(RT_LOG_COMPILE,
                   "%s: a signature with unknown dims: compiled for %s per shape it is called at",
                   f->name, b->name);
    } else {
        c->prog = jit_compile_graph(tr.g, f->name, h, b, c->shape_generic, &c->graph);
    }
    if (c->has_unknown && c->graph)
        c->inst = instances_new(c->graph, b,
                                (f->tiered > 0 || (f->tiered == 0 && rt_config_get()->tiered)) &&
                                    !b->device);
    c->traced = tr.g; /* kept for pictures (tj_concrete_graph_dot) */
    tr.g = NULL;
    trace_result_free(&tr);
    if (!c->prog) {
        jit_concrete_free(c);
        return NULL;
    }
    c->prog->g = c->graph;
    jit_dump_dot(c);
    if (tiered)
        jit_tier_up_start(c);
    if (collect_locks(c) != TJ_OK) {
        jit_concrete_free(c);
        return NULL;
    }
    atomic_store(&c->last_used, call_idx);
    if (jit_fn_publish(f, c) != TJ_OK) {
        jit_concrete_free(c);
        return NULL;
    }
    return c;
}

tj_concrete *jit_concrete_from_graph(const char *name, const ir_graph *g, const tj_spec *specs,
                                     int nargs, tj_variable *const *caps, uint32_t n_caps,
                                     int result_kind, uint64_t hash, const jit_backend *b,
                                     const void *image, size_t image_size) {
    tj_concrete *c = calloc(1, sizeof *c);
    if (c) {
        c->sig = calloc((size_t)nargs + 1, sizeof *c->sig);
        c->caps = calloc((size_t)n_caps + 1, sizeof *c->caps);
    }
    if (!c || !c->sig || !c->caps) {
        jit_concrete_free(c);
        return (void)ir_errorf(TJ_ERR_OOM, "%s: out of memory", name), NULL;
    }
    c->name = name;
    c->sig_hash = hash;
    c->nargs = (uint32_t)nargs;
    c->result_kind = result_kind;
    for (int i = 0; i < nargs; i++) {
        c->sig[i].dtype = (uint8_t)specs[i].dtype;
        c->sig[i].rank = (uint8_t)specs[i].rank;
        memcpy(c->sig[i].dims, specs[i].dims, sizeof c->sig[i].dims);
    }
    for (uint32_t k = 0; k < n_caps; k++)
        c->caps[c->n_caps++] = rt_variable_retain(caps[k]);
    if (!image)
        c->prog = jit_compile_graph(g, name, hash, b, false, &c->graph);
    else if (!b->read)
        ir_errorf(TJ_ERR_UNSUPPORTED, "%s: the %s backend reads no images", name, b->name);
    else if ((c->graph = ir_graph_clone(g)) != NULL)
        c->prog = b->read(c->graph, image, image_size);
    if (!c->prog || collect_locks(c) != TJ_OK) {
        jit_concrete_free(c);
        return NULL;
    }
    c->prog->g = c->graph;
    return c;
}

/* Nested calls (a function calling functions, itself included, eagerly or inside a trace, where
 * calls are inlined) run on the C stack: past this depth, or with less than STACK_RESERVE bytes
 * of the thread's stack left, a call fails instead of overflowing the stack. */
#define MAX_CALL_DEPTH 1000
#define STACK_RESERVE (256 * 1024)
static _Thread_local int call_depth;
static _Thread_local char *stack_low; /* lowest usable address of this thread's stack */

static int stack_short(void) {
    char here;
    if (!stack_low) {
        pthread_attr_t a;
        void *lo = NULL;
        size_t sz = 0;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            pthread_attr_getstack(&a, &lo, &sz);
            pthread_attr_destroy(&a);
        }
        stack_low = lo ? (char *)lo : (char *)1;
    }
    return stack_low != (char *)1 && &here - stack_low < STACK_RESERVE;
}

tj_tensor *tj_call_eager(tj_function *f, int nargs, tj_tensor *const *args) {
    tj_tensor *err = jit_check_args("call", f, nargs, args);
    if (err)
        return rt_scoped(err);
    if (call_depth >= MAX_CALL_DEPTH || stack_short())
        return rt_scoped(rt_errorf(
            TJ_ERR_STATE, "call: '%s': functions nested %d deep%s (unbounded recursion?)", f->name,
            call_depth, call_depth >= MAX_CALL_DEPTH ? "" : " exhaust the thread's stack"));
    call_depth++;
    double t0 = RT_PROFILING() && !api_trace_current() ? rt_profile_now() : 0;
    tj_scope_begin();
    /* a host scalar passed as an argument is a tensor argument, as in a trace (where it becomes
     * a parameter): the callee must not promote it */
    tj_tensor *plain_stack[SIG_STACK], **plain = (tj_tensor **)args;
    for (int i = 0; i < nargs && plain == args; i++) {
        if (args[i]->kind != RT_CONCRETE || !args[i]->host_scalar || args[i]->is_static)
            continue;
        plain = nargs <= SIG_STACK ? plain_stack : malloc((size_t)nargs * sizeof *plain);
        if (!plain) {
            tj_scope_end();
            return rt_scoped(rt_errorf(TJ_ERR_OOM, "call: out of memory"));
        }
        for (int k = 0; k < nargs; k++)
            if (!(plain[k] = rt_scoped(args[k]->is_static ? rt_retain(args[k])
                                                          : rt_tensor_plain(args[k]))))
                plain[k] = args[k]; /* out of memory: the tensor as it is */
    }
    tj_tensor *r = call_user(f, plain);
    if (plain != args && plain != plain_stack)
        free(plain);
    if (!r)
        r = tj_tuple(0, NULL);
    r = tj_keep(r);
    tj_scope_end();
    call_depth--;
    if (t0) /* an eager call (TJ_EAGER, tj_call_eager), not one inlined into a trace */
        rt_profile_event("call", f->name, t0, "\"eager\":1");
    return r;
}
