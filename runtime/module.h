/* module.h — saved modules (S27) as the runtime holds them: the tj_module both libraries share,
 * its manifest reader (module.c) and the public calls on a module (call, runs_on, signature,
 * variable, describe, free). What runs a function is the library's: the full library's jit/
 * makes a concrete function (traced and compiled, or read from its image by the backend that
 * wrote it: jit/module.c), the runtime-only library a program read from the image's steps by the
 * runtime alone, or the interpreter (runtime/alone/module.c). Each library passes its
 * rt_module_ops to rt_module_new and rt_module_load. */
#ifndef TJ_RUNTIME_MODULE_H
#define TJ_RUNTIME_MODULE_H

#include "runtime/runtime.h"

/* What a function returns: nothing, one tensor, a tuple. */
enum { RT_RESULT_NONE = 0, RT_RESULT_SINGLE, RT_RESULT_TUPLE };

typedef struct rt_module_fn {
    char *name;
    int n_args;
    tj_spec *specs;
    void *src;          /* built: the tj_function (borrowed) */
    void *run;          /* what runs it: the library's (ops->free_fn frees it when loaded) */
    ir_graph *graph;    /* loaded: the checked graph (owned) */
    tj_variable **caps; /* loaded: the variables of its capture slots (the module's) */
    uint32_t n_caps;
    int result_kind;
    char how[240]; /* loaded: what runs it and why */
} rt_module_fn;

typedef struct rt_module_ops {
    /* loading: fn->run for fn's checked graph (fn->graph; text hash `hash`) from the native image
     * img (NULL: none or not wanted; the file img_path, written by backend img_backend), else
     * from the graph, and fn->how; no_img says why there is no image. An image that cannot run
     * here (TJ_ERR_UNSUPPORTED) is the library's to handle: it compiles or interprets the graph
     * instead, saying why in fn->how. */
    tj_status (*make)(rt_module_fn *fn, uint64_t hash, const char *img_path,
                      const char *img_backend, const void *img, size_t img_size,
                      const char *no_img);
    /* whether images of backend `name` are read by this library (else the graph is used) */
    bool (*reads)(const char *name);
    /* runs fn on args (count and kinds checked; loaded: against the signature too) */
    tj_tensor *(*call)(const tj_module *m, rt_module_fn *fn, int nargs, tj_tensor *const *args);
    /* fn's optimized graph (its results' types) */
    const ir_graph *(*graph)(const rt_module_fn *fn);
    void (*free_fn)(rt_module_fn *fn, int loaded);
} rt_module_ops;

struct tj_module {
    uint32_t magic;
    char *name;
    int loaded;
    tj_variable **vars; /* loaded: owned */
    uint32_t n_vars;
    rt_module_fn *fns;
    uint32_t n_fns;
    const rt_module_ops *ops;
};

/* An empty module named name ("module" when NULL or empty), or NULL (error set). */
tj_module *rt_module_new(const char *name, const rt_module_ops *ops);
/* TJ_OK for a live module; an error naming `what` otherwise. */
tj_status rt_module_check(const tj_module *m, const char *what);
/* Room for element n of an array of n elements of size bytes (capacities 4, 8, 16, ...). */
int rt_module_grow(void **p, uint32_t n, size_t size);
tj_variable *rt_module_find_var(const tj_module *m, const char *name);
/* Reads the module saved in dir (tj_module_load_opts's flags), its functions made by ops->make.
 * NULL with the error set. */
tj_module *rt_module_load(const char *dir, unsigned flags, const rt_module_ops *ops);
/* The manifest's size limit (the saver reads it back for its checksum). */
enum { RT_MODULE_MAX_MANIFEST = 1 << 20 };

/* The variables among caps[0..n_caps) that graph g (its regions too) assigns, sorted by id so
 * concurrent runs lock them in one order: *out malloc'd (NULL when none). */
tj_status rt_assigned_vars(const ir_graph *g, tj_variable *const *caps, uint32_t n_caps,
                           tj_variable ***out, uint32_t *n_out);
/* Runs p under the locks of locks[0..n_locks) (rt_assigned_vars), outputs into outs as
 * rt_program_vt.run does. Inline: every call of a compiled function passes here. */
static inline tj_status rt_run_locked(rt_program *p, tj_tensor *const *args, uint32_t n_args,
                                      tj_variable **caps, tj_variable *const *locks,
                                      uint32_t n_locks, tj_tensor **outs) {
    for (uint32_t i = 0; i < n_locks; i++)
        rt_variable_lock(locks[i]);
    tj_status st = p->vt->run(p, args, n_args, caps, outs);
    for (uint32_t i = n_locks; i-- > 0;)
        rt_variable_unlock(locks[i]);
    return st;
}
/* A function's result from its program's outputs outs[0..n) (references consumed): outs[0]
 * (RT_RESULT_SINGLE), else a tuple of them. */
static inline tj_tensor *rt_result_of(int kind, uint32_t n, tj_tensor **outs) {
    if (kind == RT_RESULT_SINGLE)
        return outs[0];
    tj_tensor *res = rt_tuple_new((int)n, outs);
    for (uint32_t k = 0; k < n; k++)
        rt_release(outs[k]);
    return res;
}

#endif /* TJ_RUNTIME_MODULE_H */
