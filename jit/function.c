/* function.c — tj_function: a C function plus its signature cache of concrete functions.
 *
 *   tj_call ─ signature hash ─ snapshot lookup (no lock) ─ hit ─▶ program run
 *                                   └─ miss ─▶ lock ─ trace (libffi) ─ compile ─ publish
 *
 * The cache is a copy-on-write snapshot of concrete-function pointers: a reader (a call) announces
 * itself in one of two counters, loads the snapshot and runs; writers (under the function's mutex)
 * publish a new snapshot and retire the old one and the evicted entry. A retired item is freed
 * once each counter has been seen at zero after its retirement (every call that could have seen
 * it has ended); each publish flips which counter new calls join, so both drain under steady
 * traffic. Memory stays bounded however often a function retraces, and the hit path takes no
 * lock: two atomic adds on the function's counter. Concrete functions handed out by
 * tj_function_get_concrete are pinned: evicted, they live until the function is freed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/jit.h"
#include "runtime/device.h"
#include "api/grad.h"

/* ---- function objects ------------------------------------------------------------------------ */
static rt_arena fn_arena = RT_ARENA_INIT(512);
_Static_assert(sizeof(tj_function) <= 512, "tj_function outgrew its handle slot");

int jit_fn_state(const tj_function *f) {
    if (!f || !rt_arena_holds(&fn_arena, f))
        return JIT_FN_NONE;
    return f->magic == FN_MAGIC ? JIT_FN_ALIVE : JIT_FN_FREED;
}

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
    const jit_backend *backend = NULL;
    if (opts && opts->backend &&
        jit_backend_select(opts->backend, "function_new: backend", &backend) != TJ_OK)
        return NULL;
    const char *od = opts ? opts->output_device : NULL;
    if (od && *od && strcmp(od, "cpu") != 0)
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "function_new: output_device '%s': results are left where they "
                               "are computed (NULL) or copied to \"cpu\"",
                               od),
               NULL;
    tj_function *f = rt_arena_alloc(&fn_arena);
    if (!f)
        return NULL;
    f->outputs_host = od && *od;
    f->magic = FN_MAGIC;
    f->name = strdup(name ? name : "function");
    f->fn = fn;
    f->nargs = nargs;
    f->cache_bound = opts && opts->cache_bound > 0 ? opts->cache_bound : 64;
    f->eager = opts && opts->eager;
    f->tiered = opts ? opts->tiered : 0; /* 0: TJ_TIERED decides (on by default) */
    f->backend = backend;
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

void jit_concrete_free(tj_concrete *c) {
    if (!c)
        return;
    jit_tier_join(c); /* the background compile reads c->graph */
    jit_respecialize_free(c);
    jit_instances_free(c);
    rt_program *t1 = atomic_load(&c->tier1);
    if (t1)
        t1->vt->free(t1);
    if (c->prog)
        c->prog->vt->free(c->prog);
    ir_graph_free(c->graph);
    ir_graph_free(c->traced);
    for (uint32_t i = 0; i < c->n_caps; i++)
        rt_variable_release(c->caps[i]);
    free(c->caps);
    free(c->locks);
    jit_sig_free(c->sig, c->nargs);
    free(c);
}

/* ---- the signature cache: publish, retire, reclaim ------------------------------------------ */
static void free_retired(jit_retired *r) {
    if (r->is_concrete)
        jit_concrete_free(r->p);
    else
        free(r->p);
    free(r);
}

static void retire(tj_function *f, void *p, int is_concrete) {
    jit_retired *r = malloc(sizeof *r);
    if (!r)
        return; /* leak rather than risk a reader touching freed memory */
    r->p = p;
    r->is_concrete = is_concrete;
    if (is_concrete && ((tj_concrete *)p)->pinned) { /* borrowed by the user: until f is freed */
        r->next = f->pinned;
        f->pinned = r;
        return;
    }
    r->seq = ++f->retire_seq;
    r->next = f->graveyard;
    f->graveyard = r;
}

/* Frees the retired items no call can still use. Under f->mu. */
static void reclaim(tj_function *f) {
    /* new calls go to the other counter from now on, so the one they leave drains */
    atomic_fetch_add(&f->epoch, 1);
    for (int p = 0; p < 2; p++)
        if (atomic_load(&f->active[p]) == 0)
            f->zero_seen[p] = f->retire_seq; /* every item retired so far is past this counter */
    uint64_t safe = f->zero_seen[0] < f->zero_seen[1] ? f->zero_seen[0] : f->zero_seen[1];
    for (jit_retired **pr = &f->graveyard; *pr;) {
        jit_retired *r = *pr;
        if (r->seq <= safe) {
            *pr = r->next;
            free_retired(r);
        } else {
            pr = &r->next;
        }
    }
}

tj_status jit_fn_publish(tj_function *f, tj_concrete *c) {
    jit_snapshot *old = atomic_load(&f->cache);
    uint32_t n = old ? old->n : 0;
    uint32_t evict = UINT32_MAX;
    if (n >= (uint32_t)f->cache_bound) { /* the least recently used entry makes room */
        uint64_t best = UINT64_MAX;
        for (uint32_t i = 0; i < n; i++)
            if (old->items[i]->last_used < best)
                best = old->items[i]->last_used, evict = i;
    }
    jit_snapshot *s = malloc(sizeof *s + (n + 1) * sizeof(tj_concrete *));
    if (!s)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", f->name);
    s->n = 0;
    for (uint32_t i = 0; i < n; i++)
        if (i != evict)
            s->items[s->n++] = old->items[i];
    s->items[s->n++] = c;
    f->has_concrete = 1;
    atomic_store(&f->cache, s); /* seq_cst: ordered before reclaim's counter loads */
    if (evict != UINT32_MAX)
        retire(f, old->items[evict], 1);
    if (old)
        retire(f, old, 0);
    reclaim(f);
    return TJ_OK;
}

/* A call's read-side section: between enter and leave, nothing it loaded from f's cache is
 * freed. Returns the counter to leave. */
static inline int reader_enter(tj_function *f) {
    int p = (int)(atomic_load_explicit(&f->epoch, memory_order_relaxed) & 1);
    atomic_fetch_add(&f->active[p], 1); /* seq_cst: before the snapshot load */
    return p;
}
static inline void reader_leave(tj_function *f, int p) {
    atomic_fetch_sub_explicit(&f->active[p], 1, memory_order_release);
}

void tj_function_free(tj_function *f) {
    if (jit_check_fn("function_free", f) || jit_check_not_tracing("function_free", f))
        return; /* the error stays in tj_last_error */
    pthread_mutex_lock(&f->mu);
    jit_snapshot *s = atomic_load(&f->cache);
    if (s) {
        for (uint32_t i = 0; i < s->n; i++)
            jit_concrete_free(s->items[i]);
        free(s);
    }
    atomic_store(&f->cache, NULL);
    for (jit_retired *lists[2] = {f->graveyard, f->pinned}, **l = lists; l < lists + 2; l++)
        for (jit_retired *r = *l, *next; r; r = next) {
            next = r->next;
            free_retired(r);
        }
    f->graveyard = f->pinned = NULL;
    for (size_t i = 0; i < f->n_owned_vars; i++)
        rt_variable_release(f->owned_vars[i]);
    free(f->owned_vars);
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_destroy(&f->mu);
    jit_sig_free(f->input_sig, (uint32_t)f->n_input_sig);
    if (f->arg_names)
        for (int i = 0; i < f->nargs; i++)
            free(f->arg_names[i]);
    free(f->arg_names);
    free(f->arg_types);
    free(f->name);
    if (f->body_free)
        f->body_free(f->body_user);
    rt_arena_release(&fn_arena, f, sizeof *f); /* a later call through f reports "freed" */
}

tj_function *jit_function_new_body(const char *name, tj_body body, int nargs, void *user,
                                   void (*free_user)(void *), const tj_function_options *opts) {
    tj_function *f = tj_function_new(name, (void *)body, nargs, opts);
    if (!f) {
        if (free_user)
            free_user(user);
        return NULL;
    }
    f->body = body;
    f->body_user = user;
    f->body_free = free_user;
    return f;
}

tj_function *tj_function_new_body(const char *name, tj_body body, int nargs, void *user,
                                  const tj_function_options *opts) {
    if (!body)
        return (void)ir_errorf(TJ_ERR_INVALID, "function_new_body: body is NULL"), NULL;
    return jit_function_new_body(name, body, nargs, user, NULL, opts);
}

const char *tj_function_name(const tj_function *f) {
    return jit_fn_alive(f) ? f->name : "";
}
int tj_function_trace_count(const tj_function *f) {
    return jit_fn_alive(f) ? atomic_load(&f->n_traces) : -1;
}
tj_status tj_function_wait_compiled(tj_function *f) {
    if (!jit_fn_alive(f))
        return tj_set_error(TJ_ERR_INVALID, "function_wait_compiled: %s function",
                            f ? "a freed or foreign" : "a NULL");
    int slot = reader_enter(f); /* f's concrete functions not run yet: their compiles start */
    jit_snapshot *s = atomic_load(&f->cache);
    for (uint32_t i = 0; s && i < s->n; i++) {
        jit_tier_go(s->items[i], 1);
        jit_instances_go(s->items[i]);
    }
    reader_leave(f, slot);
    jit_tier_wait_all();
    return TJ_OK;
}

int tj_function_n_concrete(const tj_function *f) {
    if (!jit_fn_alive(f))
        return -1;
    tj_function *mf = (tj_function *)f;
    int slot = reader_enter(mf); /* a retrace elsewhere may retire the snapshot meanwhile */
    jit_snapshot *s = atomic_load(&mf->cache);
    int n = s ? (int)s->n : 0;
    reader_leave(mf, slot);
    return n;
}

static tj_concrete *lookup(tj_function *f, uint64_t h, tj_tensor *const *args, int exact) {
    jit_snapshot *s = atomic_load(&f->cache); /* seq_cst: after reader_enter's add */
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
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The run core of tj_call, tj_concrete_call, module calls and tj_call_into: c's program under
 * its variables' locks, outputs into outs (NULL entries: new references; else the caller's
 * tensors), the tier released after the second call: a signature called once (one of a sweep of
 * batch sizes) never compiles; one called again compiles, on the other core, from its second
 * call's end (tj_function_wait_compiled releases any). A check-numerics failure names the
 * function and the signature it was called with. */
/* One more call of c, whose program says a recompile pays: the hot rule (jit.h), counted
 * without a lock; the clock is read twice per JIT_RESPECIALIZE_CALLS calls. */
static void count_hot(tj_concrete *c) {
    int n = atomic_fetch_add_explicit(&c->hot_calls, 1, memory_order_relaxed) + 1;
    if (n == 1)
        atomic_store_explicit(&c->hot_t0, now_ms(), memory_order_relaxed);
    else if (n == JIT_RESPECIALIZE_CALLS &&
             now_ms() - atomic_load_explicit(&c->hot_t0, memory_order_relaxed) < JIT_HOT_MS)
        jit_respecialize(c);
    else if (n == JIT_RESPECIALIZE_CALLS) /* long calls: counted again from the next */
        atomic_store_explicit(&c->hot_calls, 0, memory_order_relaxed);
}

static tj_status run_program(tj_concrete *c, tj_tensor *const *args, tj_tensor **outs) {
    tj_concrete *at = c->inst ? jit_instance(c, args) : NULL; /* unknown dims: this shape's */
    if (at)
        return run_program(at, args, outs);
    rt_program *p = jit_concrete_program(c);
    tj_status st = rt_run_locked(p, args, c->nargs, c->caps, c->locks, c->n_locks, outs);
    if (!atomic_load_explicit(&c->tier_go, memory_order_relaxed) &&
        atomic_load_explicit(&c->compiling, memory_order_relaxed) &&
        atomic_fetch_add(&c->tier_runs, 1) >= 1)
        jit_tier_go(c, 1);
    if (p->recompile_pays && !atomic_load_explicit(&c->respec, memory_order_relaxed))
        count_hot(c);
    if (st && strncmp(ir_last_error(), "check_numerics:", 15) == 0) {
        char sig[512] = "", a[160], msg[1024]; /* the signature as tj_function_signatures has it */
        for (uint32_t i = 0; i < c->nargs; i++) {
            jit_argsig_str(&c->sig[i], a, sizeof a);
            snprintf(sig + strlen(sig), sizeof sig - strlen(sig), "%s%s", i ? ", " : "", a);
        }
        snprintf(msg, sizeof msg, "%s", ir_last_error());
        st = ir_errorf(st, "%s in function '%s' called with (%s)", msg, c->name, sig);
    }
    return st;
}

tj_tensor *jit_run_concrete(tj_concrete *c, tj_tensor *const *args) {
    tj_tensor *stack_outs[8] = {0};
    uint32_t n_out = c->graph->n_outputs;
    tj_tensor **outs = n_out <= 8 ? stack_outs : calloc(n_out, sizeof *outs);
    if (!outs)
        return rt_errorf(TJ_ERR_OOM, "%s: out of memory", c->name);
    tj_status st = run_program(c, args, outs);
    if (!st && ((c->fn && c->fn->outputs_host) || rt_config_get()->outputs_host))
        for (uint32_t k = 0; k < n_out && !st; k++) /* results asked for on the host */
            if (outs[k] && !rt_on_host(outs[k])) {
                tj_tensor *h = rt_tensor_to_device(outs[k], rt_device_host());
                st = h ? TJ_OK : ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
                if (h)
                    rt_release(outs[k]), outs[k] = h;
            }
    if (st)
        for (uint32_t k = 0; k < n_out; k++)
            rt_release(outs[k]), outs[k] = NULL;
    tj_tensor *res = st ? rt_error_from_status(st) : rt_result_of(c->result_kind, n_out, outs);
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
    if (api_trace_owner_active(f))
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
        if (rt_is_freed(args[i], what))
            return rt_error_from_status(TJ_ERR_STATE);
        if (args[i]->kind == RT_ERROR)
            return rt_retain(args[i]);
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
                                  tj_tensor **err, int *slot) {
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
    *slot = reader_enter(f);
    tj_concrete *c = lookup(f, h, args, 1);
    if (!c) {                   /* a miss: build the signature and trace, once per signature */
        reader_leave(f, *slot); /* a publish below reclaims: it must not wait for this call */
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
        if (c) /* entered before the lock is dropped: no reclaim can free c in between */
            *slot = reader_enter(f);
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
    if (f->eager || tj_get_eager() || api_trace_current() ||
        (api_tape_n_active && api_tape_wants_eager(nargs, args))) {
        /* eager mode, a nested call while tracing, or a call a tape records: run the C code
         * inline (S9, S20) */
        return tj_call_eager(f, nargs, args);
    }
    int slot;
    double t0 = RT_PROFILING() ? rt_profile_now() : 0;
    tj_concrete *c = find_concrete(f, nargs, args, &err, &slot);
    if (!c)
        return rt_scoped(err);
    tj_tensor *r = jit_run_concrete(c, args);
    reader_leave(f, slot);
    if (t0)
        rt_profile_event("call", f->name, t0, "\"signature\":\"%016llx\"",
                         (unsigned long long)c->sig_hash);
    return rt_scoped(r);
}

/* Checks the caller's output tensors against c's outputs (dims known at trace time). */
static tj_status check_outputs(const tj_concrete *c, int n_out, tj_tensor *const *outs) {
    const ir_graph *g = c->graph;
    const char *name = c->name;
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
        rt_release(err);
        return st;
    }
    for (int k = 0; k < n_out; k++)
        if ((st = rt_check_output(outs[k], "call_into", k)))
            return st;
    int taped = api_tape_n_active && api_tape_wants_eager(nargs, args);
    if (f->eager || tj_get_eager() || api_trace_current() || taped) {
        /* as tj_call: eagerly, so a tape watching the arguments records the ops; each output is
         * then recorded as a copy of its result */
        tj_scope_begin(); /* own the result whether or not the caller has a scope open */
        tj_tensor *r = tj_call_eager(f, nargs, args);
        int n = r->kind == RT_TUPLE ? r->n_items : 1;
        if (r->kind == RT_ERROR)
            st = ir_errorf(r->code, "%s", r->msg);
        else if (n != n_out)
            st = ir_errorf(TJ_ERR_INVALID, "call_into: '%s' returns %d results, %d outputs given",
                           f->name, n, n_out);
        for (int k = 0; !st && k < n; k++) {
            tj_tensor *item = r->kind == RT_TUPLE ? r->items[k] : r;
            if ((st = rt_copy_into(outs[k], item))) {
                char msg[600];
                snprintf(msg, sizeof msg, "%s", ir_last_error());
                st = ir_errorf(st, "call_into: '%s' output %d: %s", f->name, k, msg);
            } else if (taped) {
                api_tape_on_alias(item, outs[k]);
            }
        }
        tj_scope_end();
        return st;
    }
    int slot;
    tj_concrete *c = find_concrete(f, nargs, args, &err, &slot);
    if (!c) {
        st = ir_errorf(err->code, "%s", err->msg);
        rt_release(err);
        return st;
    }
    if ((st = check_outputs(c, n_out, outs))) {
        reader_leave(f, slot);
        return st;
    }
    /* the program writes straight into the caller's tensors: nothing is allocated for results */
    tj_tensor *stack_outs[8], **o = n_out <= 8 ? stack_outs : malloc((size_t)n_out * sizeof *o);
    if (!o) {
        reader_leave(f, slot);
        return ir_errorf(TJ_ERR_OOM, "call_into: out of memory");
    }
    for (int k = 0; k < n_out; k++)
        o[k] = outs[k];
    st = run_program(c, args, o);
    reader_leave(f, slot);
    if (o != stack_outs)
        free(o);
    return st;
}
