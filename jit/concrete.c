/* concrete.c — concrete functions: tracing for specs without running (S6), calling one with a
 * check of every input that names the function, the input and the expected and actual
 * dtype/shape, and the pretty-printed list of a function's signatures (S8). */
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"

tj_concrete *tj_function_get_concrete(tj_function *f, int n, const tj_spec *specs) {
    if (jit_check_fn("get_concrete", f) || jit_check_not_tracing("get_concrete", f))
        return NULL;
    if (n != f->nargs || (n && !specs)) {
        ir_errorf(TJ_ERR_INVALID, "get_concrete: '%s' takes %d arguments, got %d specs%s", f->name,
                  f->nargs, n, n && !specs ? " (specs is NULL)" : "");
        return NULL;
    }
    jit_argsig *sig = calloc((size_t)n + 1, sizeof *sig);
    if (!sig)
        return (void)ir_errorf(TJ_ERR_OOM, "get_concrete: out of memory"), NULL;
    for (int i = 0; i < n; i++) {
        const tj_spec *sp = &specs[i];
        if (sp->static_value) {
            if (sp->static_value->kind != RT_CONCRETE || sp->static_value->rank != 0) {
                free(sig);
                ir_errorf(TJ_ERR_INVALID,
                          "get_concrete: spec %d: a static value must be a concrete 0-d tensor", i);
                return NULL;
            }
            sig[i].is_static = 1;
            sig[i].value = sp->static_value;
            continue;
        }
        if (jit_check_spec("get_concrete: spec", i, sp)) {
            free(sig);
            return NULL;
        }
        sig[i].dtype = (uint8_t)sp->dtype;
        sig[i].rank = (uint8_t)sp->rank;
        for (int d = 0; d < sp->rank; d++)
            sig[i].dims[d] = sp->dims[d] < 0 ? -1 : sp->dims[d];
    }
    uint64_t h = jit_sig_hash(sig, n);
    pthread_mutex_lock(&f->mu);
    tj_concrete *c = NULL;
    jit_snapshot *s = atomic_load(&f->cache);
    for (uint32_t i = 0; s && i < s->n && !c; i++)
        if (s->items[i]->sig_hash == h)
            c = s->items[i];
    if (!c)
        c = jit_build_concrete(f, sig, h, NULL, atomic_load(&f->n_calls));
    if (c)
        c->pinned = 1; /* the caller borrows it: kept until f is freed, even once evicted */
    pthread_mutex_unlock(&f->mu);
    free(sig);
    return c;
}

tj_tensor *jit_concrete_check_args(const tj_concrete *c, int nargs, tj_tensor *const *args) {
    for (int i = 0; i < nargs; i++) {
        const jit_argsig *w = &c->sig[i];
        const tj_tensor *t = args[i];
        if (jit_arg_matches(w, t))
            continue;
        char want[160], got[160], d[128];
        jit_argsig_str(w, want, sizeof want);
        if (t->is_static) {
            char *v = rt_values_str(t);
            snprintf(got, sizeof got, "static %s", v ? v : "?");
            free(v);
        } else {
            snprintf(got, sizeof got, "%s%s", ir_dtype_name(t->dtype),
                     ir_fmt_dims(d, sizeof d, t->rank, t->dims));
        }
        if (w->is_static)
            return rt_errorf(TJ_ERR_SIGNATURE,
                             "cannot compute %s as input #%d(zero-based) is a static argument "
                             "fixed at trace time to %s, got %s",
                             c->name, i, want, got);
        if (!t->is_static && w->dtype != t->dtype)
            return rt_errorf(TJ_ERR_SIGNATURE,
                             "cannot compute %s as input #%d(zero-based) was expected to be a %s "
                             "tensor but is a %s tensor",
                             c->name, i, ir_dtype_name(w->dtype), ir_dtype_name(t->dtype));
        return rt_errorf(TJ_ERR_SIGNATURE,
                         "cannot compute %s as input #%d(zero-based) was expected to be %s but "
                         "is %s",
                         c->name, i, want, got);
    }
    return NULL;
}

tj_tensor *jit_concrete_call(tj_concrete *c, int nargs, tj_tensor *const *args) {
    if (!c)
        return rt_errorf(TJ_ERR_INVALID, "concrete_call: concrete function is NULL");
    tj_tensor *err = jit_check_args("concrete_call", c->fn, nargs, args);
    if (!err)
        err = jit_concrete_check_args(c, nargs, args);
    return err ? err : jit_run_concrete(c, args);
}

tj_tensor *tj_concrete_call(tj_concrete *c, int nargs, tj_tensor *const *args) {
    return rt_scoped(jit_concrete_call(c, nargs, args));
}

char *tj_concrete_graph_text(const tj_concrete *c) {
    return c ? ir_print(c->graph) : NULL;
}
int tj_concrete_node_count(const tj_concrete *c) {
    return c ? (int)c->graph->n_nodes : -1;
}

const char *tj_concrete_backend(const tj_concrete *c) {
    return c ? jit_concrete_program(c)->vt->name : "";
}

char *tj_concrete_graph_dot(const tj_concrete *c, tj_graph_stage stage) {
    if (!c)
        return (void)ir_errorf(TJ_ERR_INVALID, "concrete_graph_dot: the concrete function is NULL"),
               NULL;
    if (stage != TJ_GRAPH_TRACED && stage != TJ_GRAPH_OPTIMIZED && stage != TJ_GRAPH_KERNELS)
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "concrete_graph_dot: stage %d is not traced (0), optimized (1) "
                               "or kernels (2)",
                               (int)stage),
               NULL;
    if (stage == TJ_GRAPH_TRACED)
        return ir_dot(c->traced, NULL);
    jit_tier_finish((tj_concrete *)c); /* the kernels of the final program */
    rt_program *prog = jit_concrete_program(c);
    if (stage == TJ_GRAPH_OPTIMIZED || !prog->vt->kernels)
        return ir_dot(c->graph, NULL); /* the interpreter: every node is its own step */
    int32_t *of = malloc((c->graph->n_nodes + 1) * sizeof *of);
    if (!of)
        return (void)ir_errorf(TJ_ERR_OOM, "concrete_graph_dot: out of memory"), NULL;
    ir_dot_kernels k = {of, 0, NULL};
    k.n_kernels = prog->vt->kernels(prog, of, &k.names);
    char *s = ir_dot(c->graph, &k);
    free(of);
    return s;
}

void jit_dump_dot(const tj_concrete *c) {
    const rt_config *cfg = rt_config_get();
    if (!cfg->dump_dir || !*cfg->dump_dir)
        return;
    const char *stage_name[2] = {"traced", "kernels"};
    tj_graph_stage stages[2] = {TJ_GRAPH_TRACED, TJ_GRAPH_KERNELS};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        int n = snprintf(path, sizeof path, "%s/%s.%016llx.%s.dot", cfg->dump_dir, c->name,
                         (unsigned long long)c->sig_hash, stage_name[i]);
        char *dot = n > 0 && (size_t)n < sizeof path ? tj_concrete_graph_dot(c, stages[i]) : NULL;
        FILE *f = dot ? fopen(path, "w") : NULL;
        if (f) {
            fputs(dot, f);
            fclose(f);
        }
        free(dot);
        ir_clear_error(); /* a dump is best effort, as the IR dumps are */
    }
}

char *tj_function_signatures(const tj_function *f) {
    if (jit_check_fn("function_signatures", f))
        return strdup("");
    if (jit_check_not_tracing("function_signatures", f))
        return strdup(""); /* its lock is held by this thread's trace */
    tj_function *mf = (tj_function *)f;
    pthread_mutex_lock(&mf->mu);
    jit_snapshot *s = atomic_load(&mf->cache);
    size_t cap = 4096, len = 0;
    char *buf = calloc(1, cap);
    for (uint32_t i = 0; buf && s && i < s->n; i++) {
        const tj_concrete *c = s->items[i];
        char line[512];
        int k;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        k = snprintf(line, sizeof line, __VA_ARGS__);                                              \
        if (len + (size_t)k + 1 > cap) {                                                           \
            char *p = realloc(buf, cap = (len + (size_t)k + 1) * 2);                               \
            if (!p)                                                                                \
                goto out;                                                                          \
            buf = p;                                                                               \
        }                                                                                          \
        memcpy(buf + len, line, (size_t)k + 1);                                                    \
        len += (size_t)k;                                                                          \
    } while (0)
        EMIT("%s%s(", i ? "\n" : "", f->name);
        for (int a = 0; a < f->nargs; a++)
            EMIT("%s%s", a ? ", " : "", f->arg_names[a]);
        EMIT(")\n  Args:\n");
        for (int a = 0; a < f->nargs; a++) {
            const jit_argsig *sg = &c->sig[a];
            if (sg->is_static) {
                char *v = rt_values_str(sg->value);
                EMIT("    %s: %s (static)\n", f->arg_names[a], v ? v : "?");
                free(v);
                continue;
            }
            char shape[160];
            jit_tf_shape(shape, sizeof shape, sg->rank, sg->dims);
            EMIT("    %s: %s Tensor, shape=%s\n", f->arg_names[a], ir_dtype_name(sg->dtype), shape);
        }
        EMIT("  Returns:\n");
        if (c->graph->n_outputs == 0)
            EMIT("    NoneTensorSpec()\n");
        for (uint32_t o = 0; o < c->graph->n_outputs; o++) {
            const ir_node *n = ir_node_get(c->graph, c->graph->outputs[o]);
            char d[128];
            jit_tf_shape(d, sizeof d, n->rank, n->dims);
            EMIT("    %s Tensor, shape=%s\n", ir_dtype_name(n->dtype), d);
        }
#undef EMIT
    }
out:
    pthread_mutex_unlock(&mf->mu);
    return buf;
}
