/* module.c — the runtime-only library's saved modules (libtracejit_rt: ir/ and runtime/ alone,
 * no tracer, passes or code generator). A function runs the saved native code read from its
 * image's steps by the runtime (rt_image_read_steps: the code and steps are the image author's,
 * checked for structure, not planned again), or its saved graph on the interpreter when there is
 * no image, the image was saved by another build or for another CPU, or only the graph is asked
 * for. Also the one variable entry point such a program needs: reading a value. The full
 * library defines these functions in jit/module.c and api/variable.c instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/image.h"
#include "runtime/module.h"

/* What runs a loaded function: its program and the variables it assigns (locked by a run). */
typedef struct saved_fn {
    rt_program *prog;
    tj_variable **locks;
    uint32_t n_locks;
} saved_fn;

static tj_status make_fn(rt_module_fn *fn, uint64_t hash, const char *img_path,
                         const char *img_backend, const void *img, size_t img_size,
                         const char *no_img) {
    (void)hash, (void)img_backend;
    saved_fn *s = calloc(1, sizeof *s);
    if (!s)
        return ir_errorf(TJ_ERR_OOM, "module_load: out of memory");
    fn->run = s;
    char why[200];
    snprintf(why, sizeof why, "%s", no_img);
    if (img && (s->prog = rt_image_read_steps(fn->graph, img, img_size)) != NULL) {
        snprintf(fn->how, sizeof fn->how, "saved native code");
    } else if (img && ir_last_code() != TJ_ERR_UNSUPPORTED) {
        return ir_errorf(ir_last_code() ? ir_last_code() : TJ_ERR_CORRUPT, "module_load: %s: %s",
                         img_path, ir_last_error());
    } else if (img) { /* another build, target or CPU: the graph */
        snprintf(why, sizeof why, "%s", ir_last_error());
        ir_clear_error();
    }
    if (!s->prog) {
        if (!(s->prog = rt_interp_new(fn->graph)))
            return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        snprintf(fn->how, sizeof fn->how, "interpreter (%s)", why);
    }
    return rt_assigned_vars(fn->graph, fn->caps, fn->n_caps, &s->locks, &s->n_locks);
}

/* Images of every backend are read: their steps, when the runtime alone runs them. */
static bool reads_images(const char *backend) {
    (void)backend;
    return true;
}

static tj_tensor *call_fn(const tj_module *m, rt_module_fn *fn, int nargs, tj_tensor *const *args) {
    (void)m;
    saved_fn *s = fn->run;
    for (int i = 0; i < nargs; i++) {
        const tj_spec *w = &fn->specs[i];
        const tj_tensor *t = args[i];
        if (t->dtype == (int)w->dtype && t->rank == w->rank &&
            !memcmp(t->dims, w->dims, sizeof(int64_t) * (size_t)w->rank))
            continue;
        char want[128], got[128];
        ir_fmt_dims(want, sizeof want, w->rank, w->dims);
        ir_fmt_dims(got, sizeof got, t->rank, t->dims);
        return rt_errorf(TJ_ERR_SIGNATURE,
                         "cannot compute %s as input #%d(zero-based) was expected to be %s%s but "
                         "is %s%s",
                         fn->name, i, ir_dtype_name(w->dtype), want, ir_dtype_name(t->dtype), got);
    }
    uint32_t n_out = fn->graph->n_outputs;
    tj_tensor **outs = calloc((size_t)n_out + 1, sizeof *outs);
    if (!outs)
        return rt_errorf(TJ_ERR_OOM, "%s: out of memory", fn->name);
    tj_status st =
        rt_run_locked(s->prog, args, (uint32_t)nargs, fn->caps, s->locks, s->n_locks, outs);
    tj_tensor *res = st ? rt_error_from_status(st) : rt_result_of(fn->result_kind, n_out, outs);
    free(outs);
    return res;
}

static const ir_graph *graph_of(const rt_module_fn *fn) {
    return fn->graph;
}

static void free_fn(rt_module_fn *fn, int loaded) {
    saved_fn *s = fn->run;
    (void)loaded; /* this library only loads */
    if (!s)
        return;
    if (s->prog)
        s->prog->vt->free(s->prog);
    free(s->locks);
    free(s);
}

static const rt_module_ops alone_ops = {make_fn, reads_images, call_fn, graph_of, free_fn};

tj_module *tj_module_load(const char *dir) {
    return tj_module_load_opts(dir, 0);
}

tj_module *tj_module_load_opts(const char *dir, unsigned flags) {
    return rt_module_load(dir, flags, &alone_ops);
}

/* There is no trace here: a read is the variable's value. */
tj_tensor *tj_variable_read(tj_variable *v) {
    if (rt_variable_check(v, "variable_read"))
        return rt_scoped(rt_error_from_status(0));
    return rt_scoped(rt_variable_get(v));
}
