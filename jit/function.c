/* function.c — tj_function: a C function plus its signature cache of concrete functions.
 *
 *   tj_call ─ signature hash ─ snapshot lookup (no lock) ─ hit ─▶ program run
 *                                   └─ miss ─▶ lock ─ trace (libffi) ─ compile ─ publish
 *
 * The cache is a copy-on-write snapshot of concrete-function pointers: readers load it with one
 * acquire load; writers (under the function's mutex) publish a new snapshot. Replaced snapshots
 * and evicted concrete functions are retired, not freed, until the function is freed, so a
 * reader never touches freed memory. */
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"

/* ---- function objects ------------------------------------------------------------------------ */

tj_function *tj_function_new(const char *name, void *fn, int nargs,
                             const tj_function_options *opts) {
    if (!fn)
        return (void)ir_errorf(TJ_ERR_INVALID, "function_new: fn is NULL"), NULL;
    if (opts && opts->cache_bound < 0)
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "function_new: cache_bound %d is negative (0: the default, 64)",
                               opts->cache_bound),
               NULL;
    if (nargs < 0 || nargs > 256)
        return (void)ir_errorf(TJ_ERR_INVALID, "function_new: nargs %d out of range [0, 256]",
                               nargs),
               NULL;
    tj_function *f = jit_fn_alloc();
    if (!f)
        return NULL;
    f->magic = FN_MAGIC;
    f->name = strdup(name ? name : "function");
    f->fn = fn;
    f->nargs = nargs;
    f->cache_bound = opts && opts->cache_bound > 0 ? opts->cache_bound : 64;
    f->eager = opts && opts->eager;
    pthread_mutex_init(&f->mu, NULL);
    f->arg_types = calloc((size_t)nargs + 1, sizeof *f->arg_types);
    f->arg_names = calloc((size_t)nargs + 1, sizeof *f->arg_names);
    if (!f->name || !f->arg_types || !f->arg_names)
        goto oom;
    for (int i = 0; i < nargs; i++) {
        f->arg_types[i] = &ffi_type_pointer;
        char buf[32];
        const char *an = opts && opts->arg_names && opts->arg_names[i] ? opts->arg_names[i] : NULL;
        if (!an)
            snprintf(buf, sizeof buf, "x%d", i);
        if (!(f->arg_names[i] = strdup(an ? an : buf)))
            goto oom;
    }
    if (ffi_prep_cif(&f->cif, FFI_DEFAULT_ABI, (unsigned)nargs, &ffi_type_pointer, f->arg_types) !=
        FFI_OK) {
        ir_errorf(TJ_ERR_INVALID, "function_new: libffi cannot call a function of %d arguments",
                  nargs);
        tj_function_free(f);
        return NULL;
    }
    if (opts && opts->n_input_signature > 0) {
        if (opts->n_input_signature != nargs || !opts->input_signature) {
            ir_errorf(TJ_ERR_INVALID,
                      "function_new: '%s' takes %d arguments but its input signature "
                      "has %d specs",
                      f->name, nargs, opts->n_input_signature);
            tj_function_free(f);
            return NULL;
        }
        if (!(f->input_sig = calloc((size_t)nargs, sizeof *f->input_sig)))
            goto oom;
        f->n_input_sig = nargs;
        for (int i = 0; i < nargs; i++) {
            const tj_spec *sp = &opts->input_signature[i];
            jit_argsig *s = &f->input_sig[i];
            if (sp->static_value) {
                const tj_tensor *sv = sp->static_value;
                if (sv->kind != RT_CONCRETE || !sv->is_static) {
                    ir_errorf(TJ_ERR_INVALID,
                              "function_new: input signature %d: static_value is not a static "
                              "value (make it with tj_static_*)",
                              i);
                    tj_function_free(f);
                    return NULL;
                }
                s->is_static = 1;
                if (!(s->value = rt_tensor_clone(sv)))
                    goto oom;
                continue;
            }
            if (jit_check_spec("function_new: input signature", i, sp)) {
                tj_function_free(f);
                return NULL;
            }
            s->dtype = (uint8_t)sp->dtype;
            s->rank = (uint8_t)sp->rank;
            memcpy(s->dims, sp->dims, sizeof s->dims);
        }
    }
    return f;
oom:
    ir_errorf(TJ_ERR_OOM, "function_new: out of memory");
    tj_function_free(f);
    return NULL;
}

static void concrete_free(tj_concrete *c) {
    if (!c)
        return;
    if (c->prog)
        c->prog->vt->free(c->prog);
    ir_graph_free(c->graph);
    for (uint32_t i = 0; i < c->n_caps; i++)
        rt_variable_release(c->caps[i]);
    free(c->caps);
    free(c->locks);
    jit_sig_free(c->sig, c->nargs);
    free(c);
}

static void retire(tj_function *f, void *p, int is_concrete) {
    retired *r = malloc(sizeof *r);
    if (!r)
        return; /* leak rather than risk a reader touching freed memory */
    r->p = p;
    r->is_concrete = is_concrete;
    r->next = f->graveyard;
    f->graveyard = r;
}

void tj_function_free(tj_function *f) {
    if (jit_check_fn("function_free", f) || jit_check_not_tracing("function_free", f))
        return; /* the error stays in tj_last_error */
    pthread_mutex_lock(&f->mu);
    snapshot *s = atomic_load(&f->cache);
    if (s) {
        for (uint32_t i = 0; i < s->n; i++)
            concrete_free(s->items[i]);
        free(s);
    }
    atomic_store(&f->cache, NULL);
    for (retired *r = f->graveyard, *next; r; r = next) {
        next = r->next;
        if (r->is_concrete)
            concrete_free(r->p);
        else
            free(r->p);
        free(r);
    }
    f->graveyard = NULL;
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_destroy(&f->mu);
    jit_sig_free(f->input_sig, (uint32_t)f->n_input_sig);
    if (f->arg_names)
        for (int i = 0; i < f->nargs; i++)
            free(f->arg_names[i]);
    free(f->arg_names);
    free(f->arg_types);
    free(f->name);
    jit_fn_release(f); /* a later call through this handle reports "freed" */
}

const char *tj_function_name(const tj_function *f) {
    return jit_fn_alive(f) ? f->name : "";
}
int tj_function_trace_count(const tj_function *f) {
    return jit_fn_alive(f) ? atomic_load(&f->n_traces) : -1;
}
int tj_function_n_concrete(const tj_function *f) {
    if (!jit_fn_alive(f))
        return -1;
    snapshot *s = atomic_load_explicit(&((tj_function *)f)->cache, memory_order_acquire);
    return s ? (int)s->n : 0;
}

/* ---- calling the user's C function ----------------------------------------------------------- */
static tj_tensor *call_user(tj_function *f, tj_tensor *const *args) {
    void *vals_stack[SIG_STACK],
        **vals = f->nargs <= SIG_STACK ? vals_stack : malloc(f->nargs * sizeof *vals);
    if (!vals)
        return rt_errorf(TJ_ERR_OOM, "%s: out of memory", f->name);
    for (int i = 0; i < f->nargs; i++)
        vals[i] = (void *)&args[i];
    void *ret = NULL;
    ffi_call(&f->cif, FFI_FN(f->fn), &ret, vals);
    if (vals != vals_stack)
        free(vals);
    return ret;
}

tj_tensor *tj_call_eager(tj_function *f, int nargs, tj_tensor *const *args);

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
    uint32_t id = rt_trace_lift(tr, t);
    if (id == IR_NONE)
        return ir_last_code();
    return ir_add_output(tr->g, id);
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
    rt_trace_push(&tr);
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
            sym[i] = rt_scoped(rt_symbolic(&tr, id));
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
    rt_trace_pop();
    if (sym != stack_sym)
        free(sym);
    out->vars_created = tr.n_vars_created;
    free(tr.cap_value);
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
        snapshot *s = atomic_load(&f->cache);
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

static int by_id(const void *a, const void *b) {
    uint64_t x = (*(tj_variable *const *)a)->id, y = (*(tj_variable *const *)b)->id;
    return x < y ? -1 : x > y;
}

/* The variables c's graph assigns, sorted by id so concurrent runs lock them in one order. */
static tj_status collect_locks(tj_concrete *c) {
    const ir_graph *g = c->graph;
    for (uint32_t k = 0; k < g->n_effects; k++) {
        const ir_node *n = ir_node_get(g, g->effects[k]);
        if (n->op != IR_OP_ASSIGN || (uint64_t)n->a.i[0] >= c->n_caps)
            continue;
        tj_variable *v = c->caps[n->a.i[0]];
        int seen = 0;
        for (uint32_t i = 0; i < c->n_locks; i++)
            seen |= c->locks[i] == v;
        if (seen)
            continue;
        tj_variable **l = realloc(c->locks, (c->n_locks + 1) * sizeof *l);
        if (!l)
            return ir_errorf(TJ_ERR_OOM, "out of memory");
        c->locks = l;
        c->locks[c->n_locks++] = v;
    }
    if (c->n_locks > 1)
        qsort(c->locks, c->n_locks, sizeof *c->locks, by_id);
    return TJ_OK;
}

/* Traces, compiles and publishes a concrete function for sig. Called with f->mu held. */
tj_concrete *jit_build_concrete(tj_function *f, const jit_argsig *sig, uint64_t h,
                                tj_tensor *const *args, uint64_t call_idx) {
    log_retrace(f, sig, call_idx);
    int first = !f->has_concrete; /* a failed trace does not use up the first trace */
    trace_result tr;
    atomic_fetch_add(&f->n_traces, 1);
    tj_status st = trace_once(f, sig, args, first, &tr);
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
    tj_concrete *c = calloc(1, sizeof *c);
    if (!c || !(c->sig = jit_sig_copy(sig, (uint32_t)f->nargs))) {
        free(c);
        trace_result_free(&tr);
        return (void)ir_errorf(TJ_ERR_OOM, "%s: out of memory", f->name), NULL;
    }
    c->fn = f;
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
    c->prog = jit_compile_graph(tr.g, f->name, h, &c->graph);
    trace_result_free(&tr);
    if (!c->prog) {
        concrete_free(c);
        return NULL;
    }
    c->prog->g = c->graph;
    if (collect_locks(c) != TJ_OK) {
        concrete_free(c);
        return NULL;
    }
    atomic_store(&c->last_used, call_idx);
    /* publish a new snapshot, evicting the least recently used entry beyond the bound */
    snapshot *old = atomic_load(&f->cache);
    uint32_t n = old ? old->n : 0;
    uint32_t evict = UINT32_MAX;
    if (n >= (uint32_t)f->cache_bound) {
        uint64_t best = UINT64_MAX;
        for (uint32_t i = 0; i < n; i++)
            if (old->items[i]->last_used < best)
                best = old->items[i]->last_used, evict = i;
    }
    snapshot *s = malloc(sizeof *s + (n + 1) * sizeof(tj_concrete *));
    if (!s) {
        concrete_free(c);
        return (void)ir_errorf(TJ_ERR_OOM, "%s: out of memory", f->name), NULL;
    }
    s->n = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i == evict)
            retire(f, old->items[i], 1);
        else
            s->items[s->n++] = old->items[i];
    }
    s->items[s->n++] = c;
    f->has_concrete = 1;
    atomic_store_explicit(&f->cache, s, memory_order_release);
    if (old)
        retire(f, old, 0);
    return c;
}

static tj_concrete *lookup(tj_function *f, uint64_t h, tj_tensor *const *args, int exact) {
    snapshot *s = atomic_load_explicit(&f->cache, memory_order_acquire);
    if (!s)
        return NULL;
    for (uint32_t i = 0; i < s->n; i++) {
        tj_concrete *c = s->items[i];
        if (exact && c->sig_hash != h)
            continue;
        if (!exact && !c->has_unknown)
            continue;
        int ok = 1;
        for (int k = 0; k < f->nargs && ok; k++)
            ok = jit_arg_matches(&c->sig[k], args[k]);
        if (ok)
            return c;
    }
    return NULL;
}

/* ---- running a concrete function ------------------------------------------------------------- */
tj_tensor *jit_run_concrete(tj_concrete *c, tj_tensor *const *args) {
    tj_tensor *stack_outs[8] = {0};
    uint32_t n_out = c->graph->n_outputs;
    tj_tensor **outs = n_out <= 8 ? stack_outs : calloc(n_out, sizeof *outs);
    if (!outs)
        return rt_errorf(TJ_ERR_OOM, "%s: out of memory", c->fn->name);
    for (uint32_t i = 0; i < c->n_locks; i++)
        rt_variable_lock(c->locks[i]);
    tj_status st = c->prog->vt->run(c->prog, args, c->nargs, c->caps, outs);
    for (uint32_t i = c->n_locks; i-- > 0;)
        rt_variable_unlock(c->locks[i]);
    tj_tensor *res;
    if (st) {
        res = rt_error_from_status(st);
    } else if (c->result_kind == JIT_RESULT_SINGLE) {
        res = outs[0];
    } else {
        res = rt_tuple_new((int)n_out, outs);
        for (uint32_t k = 0; k < n_out; k++)
            tj_release(outs[k]);
    }
    if (outs != stack_outs)
        free(outs);
    return res;
}

tj_status jit_check_fn(const char *what, const tj_function *f) {
    if (!f)
        return ir_errorf(TJ_ERR_INVALID, "%s: function is NULL", what);
    int state = jit_fn_state(f);
    if (state == JIT_FN_FREED)
        return ir_errorf(TJ_ERR_STATE, "%s: the function was freed (tj_function_free)", what);
    if (state != JIT_FN_ALIVE)
        return ir_errorf(TJ_ERR_INVALID, "%s: not a tj_function made by tj_function_new", what);
    return TJ_OK;
}

tj_status jit_check_not_tracing(const char *what, const tj_function *f) {
    if (rt_trace_owner_active(f))
        return ir_errorf(TJ_ERR_STATE,
                         "%s: '%s' is being traced on this thread (called from inside its own "
                         "trace); this would wait for itself",
                         what, f->name);
    return TJ_OK;
}

tj_tensor *jit_check_args(const char *what, const tj_function *f, int nargs,
                          tj_tensor *const *args) {
    tj_status st = jit_check_fn(what, f);
    if (st)
        return rt_error_from_status(st);
    if (nargs != f->nargs)
        return rt_errorf(TJ_ERR_INVALID, "%s: '%s' takes %d arguments, got %d", what, f->name,
                         f->nargs, nargs);
    if (nargs && !args)
        return rt_errorf(TJ_ERR_INVALID, "%s: args is NULL", what);
    for (int i = 0; i < nargs; i++) {
        if (!args[i])
            return rt_errorf(TJ_ERR_INVALID, "%s: '%s' argument %d is NULL", what, f->name, i);
        if (args[i]->kind == RT_ERROR)
            return tj_retain(args[i]);
        if (args[i]->kind == RT_TUPLE)
            return rt_errorf(TJ_ERR_INVALID, "%s: '%s' argument %d is a tuple", what, f->name, i);
        if (args[i]->kind == RT_SYMBOLIC && !rt_trace_is_live(args[i]))
            return rt_errorf(TJ_ERR_STATE,
                             "%s: '%s' argument %d is a symbolic tensor from a finished trace (it "
                             "escaped the function that traced it)",
                             what, f->name, i);
    }
    return NULL;
}

static char *describe_inputs(const tj_function *f, tj_tensor *const *args) {
    size_t cap = 1024, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    len += (size_t)snprintf(buf, cap, "  inputs: (");
    for (int i = 0; i < f->nargs; i++) {
        char *s = tj_tensor_str(args[i]);
        char spec[160];
        jit_argsig_str(&f->input_sig[i], spec, sizeof spec);
        size_t need = len + strlen(s ? s : "") + 8;
        if (need > cap) {
            char *p = realloc(buf, cap = need * 2);
            if (!p)
                break;
            buf = p;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", s ? s : "");
        free(s);
    }
    char sigs[1024] = "";
    size_t sl = 0;
    for (int i = 0; i < f->n_input_sig && sl < sizeof sigs - 200; i++) {
        char spec[160];
        jit_argsig_str(&f->input_sig[i], spec, sizeof spec);
        sl += (size_t)snprintf(sigs + sl, sizeof sigs - sl, "%s%s", i ? ", " : "", spec);
    }
    if (len + strlen(sigs) + 64 > cap) {
        char *p = realloc(buf, cap = len + strlen(sigs) + 64);
        if (!p)
            return buf;
        buf = p;
    }
    snprintf(buf + len, cap - len, ")\n  input_signature: (%s)", sigs);
    return buf;
}

/* The concrete function for a call: lock-free lookup, tracing on a miss. NULL with the error set
 * (*err: an error tensor to return, for tj_call). */
static tj_concrete *find_concrete(tj_function *f, int nargs, tj_tensor *const *args,
                                  tj_tensor **err) {
    uint64_t call_idx = atomic_fetch_add_explicit(&f->n_calls, 1, memory_order_relaxed);
    *err = NULL;
    if (f->input_sig) {
        for (int i = 0; i < nargs; i++) {
            if (!jit_arg_matches(&f->input_sig[i], args[i])) {
                char *d = describe_inputs(f, args);
                *err = rt_errorf(TJ_ERR_SIGNATURE,
                                 "%s: inputs incompatible with input_signature "
                                 "(argument %d):\n%s",
                                 f->name, i, d ? d : "");
                free(d);
                return NULL;
            }
        }
    }
    /* one concrete function for a whole input_signature */
    uint64_t h = f->input_sig ? 0x1de5u : jit_args_hash(nargs, args);
    tj_concrete *c = lookup(f, h, args, 1);
    if (!c) { /* a miss: build the signature and trace, once per signature */
        jit_argsig stack_sig[SIG_STACK];
        jit_argsig *sig = nargs <= SIG_STACK ? stack_sig : calloc((size_t)nargs, sizeof *sig);
        if (!sig) {
            *err = rt_errorf(TJ_ERR_OOM, "call: out of memory");
            return NULL;
        }
        if (f->input_sig)
            memcpy(sig, f->input_sig, (size_t)nargs * sizeof *sig);
        else
            jit_signature(nargs, args, sig);
        pthread_mutex_lock(&f->mu);
        c = lookup(f, h, args, 1);
        if (!c)
            c = lookup(f, h, args, 0);
        if (!c)
            c = jit_build_concrete(f, sig, h, args, call_idx);
        pthread_mutex_unlock(&f->mu);
        if (sig != stack_sig)
            free(sig);
        if (!c) {
            *err = rt_error_from_status(0);
            return NULL;
        }
    }
    atomic_store_explicit(&c->last_used, call_idx, memory_order_relaxed);
    return c;
}

tj_tensor *tj_call(tj_function *f, int nargs, tj_tensor *const *args) {
    tj_tensor *err = jit_check_args("call", f, nargs, args);
    if (err)
        return rt_scoped(err);
    if (f->eager || tj_get_eager() || rt_trace_current()) {
        /* eager mode, or a nested call while tracing: run the C code inline (S9, S20) */
        return tj_call_eager(f, nargs, args);
    }
    tj_concrete *c = find_concrete(f, nargs, args, &err);
    return rt_scoped(c ? jit_run_concrete(c, args) : err);
}

/* Checks the caller's output tensors against c's outputs (dims known at trace time). */
static tj_status check_outputs(const tj_concrete *c, int n_out, tj_tensor *const *outs) {
    const ir_graph *g = c->graph;
    const char *name = c->fn->name;
    if ((uint32_t)n_out != g->n_outputs)
        return ir_errorf(TJ_ERR_INVALID, "call_into: '%s' returns %u results, %d outputs given",
                         name, g->n_outputs, n_out);
    for (int k = 0; k < n_out; k++) {
        const ir_node *n = ir_node_get(g, g->outputs[k]);
        const tj_tensor *t = outs[k];
        char a[128], b[128]; /* t passed rt_check_output in tj_call_into */
        int ok = t->dtype == n->dtype && t->rank == n->rank && n->dtype != TJ_STRING;
        for (int d = 0; ok && d < n->rank; d++)
            ok = n->dims[d] < 0 || n->dims[d] == t->dims[d];
        if (!ok)
            return ir_errorf(TJ_ERR_SIGNATURE,
                             "call_into: '%s' result %d is %s%s but output %d is %s%s", name, k,
                             ir_dtype_name(n->dtype), ir_fmt_dims(a, sizeof a, n->rank, n->dims), k,
                             ir_dtype_name(t->dtype), ir_fmt_dims(b, sizeof b, t->rank, t->dims));
    }
    return TJ_OK;
}

tj_status tj_call_into(tj_function *f, int nargs, tj_tensor *const *args, int n_out,
                       tj_tensor *const *outs) {
    tj_tensor *err = jit_check_args("call_into", f, nargs, args);
    tj_status st = TJ_OK;
    if (!err && (n_out < 0 || (n_out && !outs)))
        err = rt_errorf(TJ_ERR_INVALID, "call_into: bad output list (n_out=%d)", n_out);
    if (err) {
        st = ir_errorf(err->code, "%s", err->msg);
        tj_release(err);
        return st;
    }
    for (int k = 0; k < n_out; k++)
        if ((st = rt_check_output(outs[k], "call_into", k)))
            return st;
    if (f->eager || tj_get_eager() || rt_trace_current()) {
        tj_scope_begin(); /* own the result whether or not the caller has a scope open */
        tj_tensor *r = tj_call_eager(f, nargs, args);
        int n = r->kind == RT_TUPLE ? r->n_items : 1;
        if (r->kind == RT_ERROR)
            st = ir_errorf(r->code, "%s", r->msg);
        else if (n != n_out)
            st = ir_errorf(TJ_ERR_INVALID, "call_into: '%s' returns %d results, %d outputs given",
                           f->name, n, n_out);
        for (int k = 0; !st && k < n; k++)
            if ((st = rt_copy_into(outs[k], r->kind == RT_TUPLE ? r->items[k] : r)))
                st = ir_errorf(st, "call_into: '%s' output %d: %s", f->name, k, ir_last_error());
        tj_scope_end();
        return st;
    }
    tj_concrete *c = find_concrete(f, nargs, args, &err);
    if (!c) {
        st = ir_errorf(err->code, "%s", err->msg);
        tj_release(err);
        return st;
    }
    if ((st = check_outputs(c, n_out, outs)))
        return st;
    /* the program writes straight into the caller's tensors: nothing is allocated for results */
    tj_tensor *stack_outs[8], **o = n_out <= 8 ? stack_outs : malloc((size_t)n_out * sizeof *o);
    if (!o)
        return ir_errorf(TJ_ERR_OOM, "call_into: out of memory");
    for (int k = 0; k < n_out; k++)
        o[k] = outs[k];
    for (uint32_t i = 0; i < c->n_locks; i++)
        rt_variable_lock(c->locks[i]);
    st = c->prog->vt->run(c->prog, args, c->nargs, c->caps, o);
    for (uint32_t i = c->n_locks; i-- > 0;)
        rt_variable_unlock(c->locks[i]);
    if (o != stack_outs)
        free(o);
    return st;
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
            if (!(plain[k] = rt_scoped(args[k]->is_static ? tj_retain(args[k])
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
    return r;
}
