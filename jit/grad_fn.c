/* grad_fn.c — the function transforms tj_grad and tj_value_and_grad (jax.grad,
 * jax.value_and_grad): a body function that opens a tape, watches the chosen arguments, calls
 * the differentiated function (inlined while tracing, op by op eagerly) and asks the tape for
 * the gradients. The result is an ordinary tj_function: traced per signature, optimized with
 * forward and backward in one graph, compiled and cached. */
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"
#include "api/grad.h"

typedef struct grad_fn {
    tj_function *f; /* borrowed */
    int with_value;
    int n;
    int argnums[];
} grad_fn;

static tj_tensor *grad_body(int nargs, tj_tensor *const *args, void *user) {
    grad_fn *gf = user;
    const char *what = gf->with_value ? "value_and_grad" : "grad";
    if (!jit_fn_alive(gf->f))
        return tj_error_new(TJ_ERR_STATE, "%s: the differentiated function was freed", what);
    tj_tensor **a = calloc((size_t)nargs + 1, sizeof *a);
    tj_tensor **out = calloc((size_t)gf->n + 1, sizeof *out);
    tj_tensor **srcs = calloc((size_t)gf->n + 1, sizeof *srcs);
    if (!a || !out || !srcs) {
        free(a);
        free(out);
        free(srcs);
        return tj_error_new(TJ_ERR_OOM, "%s: out of memory", what);
    }
    tj_scope_begin();
    /* eagerly every differentiated argument gets an identity of its own, so that f(x, x) gives
     * each position its own gradient (while tracing each argument is its own node already) */
    for (int k = 0; k < nargs; k++)
        a[k] = args[k];
    for (int j = 0; j < gf->n; j++) {
        int k = gf->argnums[j];
        if (args[k] && args[k]->kind == RT_CONCRETE && !api_trace_current()) {
            a[k] = rt_scoped(rt_tensor_alias(args[k]));
            if (api_tape_n_active) /* enclosing tapes: a higher-order gradient flows through */
                api_tape_on_alias(args[k], a[k]);
        }
        srcs[j] = a[k];
    }
    tj_tensor *res = NULL;
    tj_tape *tape = tj_tape_new(TJ_TAPE_UNCONNECTED_ZERO);
    tj_status st = tape ? TJ_OK : ir_last_code();
    for (int j = 0; j < gf->n && !st; j++) {
        tj_tensor *x = srcs[j];
        if (x && x->kind != RT_ERROR && x->kind != RT_TUPLE && !ir_dtype_is_float(x->dtype))
            st = ir_errorf(TJ_ERR_DTYPE,
                           "%s: argument %d of '%s' is %s: only float arguments have gradients",
                           what, gf->argnums[j], gf->f->name, ir_dtype_name(x->dtype));
        else
            st = tj_tape_watch(tape, x);
    }
    tj_tensor *value = st ? NULL : tj_call(gf->f, nargs, a);
    if (tape)
        tj_tape_stop(tape);
    if (st)
        res = tj_error_new(st, "%s: %s", what, tj_last_error());
    else if (value->kind == RT_ERROR)
        res = value;
    else if (value->kind == RT_TUPLE)
        res = tj_error_new(TJ_ERR_INVALID,
                           "%s: '%s' returned a tuple: it must return one float scalar", what,
                           gf->f->name);
    else if ((st = tj_tape_gradient(tape, value, NULL, gf->n, srcs, out + 1)))
        res = tj_error_new(st, "%s of '%s': %s", what, gf->f->name, tj_last_error());
    else {
        out[0] = value;
        int base = gf->with_value ? 0 : 1, m = gf->n + 1 - base;
        res = m == 1 ? out[base] : tj_tuple(m, out + base);
    }
    rt_retain(res); /* outlives the scope: the body's result */
    tj_tape_free(tape);
    tj_scope_end();
    free(a);
    free(out);
    free(srcs);
    return rt_scoped(res); /* like any body's result: owned by the caller's scope */
}

static tj_function *transform(const char *what, tj_function *f, int n, const int *argnums,
                              const tj_function_options *opts, int with_value) {
    if (!jit_fn_alive(f))
        return (void)ir_errorf(f ? TJ_ERR_STATE : TJ_ERR_INVALID, "%s: function is %s", what,
                               f ? "freed" : "NULL"),
               NULL;
    if (n < 1 || n > f->nargs || !argnums)
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "%s: %d argnums for '%s' of %d arguments (give 1 to %d)", what, n,
                               f->name, f->nargs, f->nargs),
               NULL;
    for (int j = 0; j < n; j++) {
        if (argnums[j] < 0 || argnums[j] >= f->nargs)
            return (void)ir_errorf(TJ_ERR_INVALID,
                                   "%s: argnum %d out of range for '%s' of %d arguments", what,
                                   argnums[j], f->name, f->nargs),
                   NULL;
        for (int i = 0; i < j; i++)
            if (argnums[i] == argnums[j])
                return (void)ir_errorf(TJ_ERR_INVALID, "%s: argnum %d given twice", what,
                                       argnums[j]),
                       NULL;
    }
    grad_fn *gf = malloc(sizeof *gf + (size_t)n * sizeof(int));
    if (!gf)
        return (void)ir_errorf(TJ_ERR_OOM, "%s: out of memory", what), NULL;
    gf->f = f;
    gf->with_value = with_value;
    gf->n = n;
    memcpy(gf->argnums, argnums, (size_t)n * sizeof(int));
    char name[256];
    snprintf(name, sizeof name, "%s_%s", what, f->name);
    tj_function_options o = opts ? *opts : (tj_function_options){0};
    if (!opts || !opts->arg_names)
        o.arg_names = (const char *const *)f->arg_names;
    return jit_function_new_body(opts && opts->name ? opts->name : name, grad_body, f->nargs, gf,
                                 free, &o);
}

tj_function *tj_grad(tj_function *f, int n, const int *argnums, const tj_function_options *opts) {
    return transform("grad", f, n, argnums, opts, 0);
}

tj_function *tj_value_and_grad(tj_function *f, int n, const int *argnums,
                               const tj_function_options *opts) {
    return transform("value_and_grad", f, n, argnums, opts, 1);
}
