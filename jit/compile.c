/* compile.c — the compile pipeline of one concrete function: the pass pipeline (simplify, fold,
 * cse, prune; TJ_PASSES selects, TJ_DUMP writes the IR around each pass, TJ_LOG=passes prints
 * statistics), then a backend program. The fold evaluator runs the reference kernels, so
 * folding is bit-exact with execution. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/jit.h"

tj_status jit_fold_eval(void *user, ir_graph *g, const ir_node *node, const uint32_t *in,
                        uint32_t n_in, uint32_t *blob_out) {
    tj_tensor *ins[16];
    if (n_in > 16)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "fold: too many inputs");
    tj_status st = TJ_OK;
    uint32_t k = 0;
    for (; k < n_in; k++)
        if (!(ins[k] = rt_const_tensor(g, ir_node_get(g, in[k])))) {
            st = ir_last_code();
            break;
        }
    tj_tensor *out = st ? NULL : rt_tensor_alloc(node->dtype, node->rank, node->dims);
    if (!st && !out)
        st = ir_last_code();
    if (!st)
        st = rt_ref_kernel(node, ins, out);
    if (!st) {
        *blob_out = rt_const_blob(g, out);
        if (!*blob_out && out->numel)
            st = ir_errorf(TJ_ERR_OOM, "fold: out of memory");
    }
    rt_release(out);
    for (uint32_t j = 0; j < k; j++)
        rt_release(ins[j]);
    return st;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool lowers(int op, void *b) {
    return ((const jit_backend *)b)->native(op);
}

/* g with the composites b does not lower (or all of them, TJ_DECOMPOSE=1) as primitives; g is
 * consumed. NULL with the error set. */
static ir_graph *primitives_for(ir_graph *g, const jit_backend *b, const char *fn_name) {
    bool all = rt_config_get()->decompose;
    if (!all && !(b && b->native))
        return g;
    uint32_t n = 0;
    ir_graph *d = pass_decompose(g, all ? NULL : lowers, (void *)b, &n);
    if (d == g)
        return g;
    ir_graph_free(g);
    if (d)
        rt_log(RT_LOG_PASSES, "%s: %u composite ops as primitives (%s)", fn_name, n,
               all ? "TJ_DECOMPOSE=1" : b->name);
    return d;
}

ir_graph *jit_optimize_graph(const ir_graph *traced, const char *fn_name, uint64_t sig_hash,
                             const jit_backend *b) {
    const rt_config *cfg = rt_config_get();
    pass_options po;
    memset(&po, 0, sizeof po);
    po.passes = cfg->passes;
    po.dump_dir = cfg->dump_dir;
    po.function = fn_name;
    po.sig_hash = sig_hash;
    po.eval = jit_fold_eval;
#ifndef NDEBUG
    po.verify = 1;
#endif
    pass_stats stats;
    double p0 = RT_PROFILING() ? rt_profile_now() : 0;
    ir_graph *g = pass_pipeline_run(traced, &po, &stats);
    if (!g)
        return NULL;
    if (p0)
        rt_profile_event("passes", fn_name, p0, "\"nodes_in\":%u,\"nodes_out\":%u", traced->n_nodes,
                         g->n_nodes);
    if (rt_log_enabled(RT_LOG_PASSES)) {
        char line[1024];
        pass_stats_format(&stats, line, sizeof line);
        rt_log(RT_LOG_PASSES, "%s: %s", fn_name, line);
    }
    return primitives_for(g, b, fn_name);
}

tj_status jit_fn_backend(const tj_function *f, const jit_backend **out) {
    if (f && f->backend) {
        *out = f->backend;
        return TJ_OK;
    }
    return jit_backend_select(rt_config_get()->backend, "TJ_BACKEND", out);
}

rt_program *jit_backend_program(const ir_graph *g, const char *fn_name, const jit_backend *b,
                                bool shape_generic) {
    return jit_backend_program_opts(g, fn_name, b, shape_generic, rt_config_get()->quick_compile);
}

rt_program *jit_backend_program_opts(const ir_graph *g, const char *fn_name, const jit_backend *b,
                                     bool shape_generic, bool quick) {
    const rt_config *cfg = rt_config_get();
    double t0 = now_ms();
    double c0 = RT_PROFILING() ? rt_profile_now() : 0;
    jit_backend_opts o = {
        .exact_math = cfg->exact_math != 0, .shape_generic = shape_generic, .quick = quick};
    rt_program *p = b->compile(g, &o);
    if (!p && b != jit_backend_interpreter() && !b->device) {
        /* declined (unknown dims, subgraphs) or failed: the interpreter runs this signature. Not
         * for a device backend: the interpreter's results would be the host's, and its inputs
         * may be the device's; its error (an NVRTC log, a refused module) is the call's */
        rt_log(RT_LOG_COMPILE, "%s: %s backend declined (%s); using the interpreter", fn_name,
               b->name, ir_last_error());
        ir_clear_error();
        p = jit_backend_interpreter()->compile(g, &o);
    }
    if (!p)
        return NULL;
    rt_log(RT_LOG_COMPILE, "%s: compiled %u nodes for backend %s in %.3f ms", fn_name, g->n_nodes,
           p->vt->name, now_ms() - t0);
    if (c0)
        rt_profile_event("compile", fn_name, c0, "\"backend\":\"%s\"", p->vt->name);
    return p;
}

rt_program *jit_backend_program_cached(const ir_graph *g, const char *fn_name, const jit_backend *b,
                                       bool shape_generic) {
    jit_backend_opts o = {.exact_math = rt_config_get()->exact_math != 0,
                          .cached_only = true,
                          .shape_generic = shape_generic,
                          .quick = rt_config_get()->quick_compile};
    double t0 = now_ms();
    rt_program *p = b == jit_backend_interpreter() ? NULL : b->compile(g, &o);
    if (!p) {
        ir_clear_error(); /* a miss: the caller starts on the interpreter */
        return NULL;
    }
    rt_log(RT_LOG_COMPILE, "%s: %u nodes for backend %s from cached code in %.3f ms", fn_name,
           g->n_nodes, p->vt->name, now_ms() - t0);
    return p;
}

rt_program *jit_compile_graph(const ir_graph *traced, const char *fn_name, uint64_t sig_hash,
                              const jit_backend *b, bool shape_generic, ir_graph **opt) {
    ir_graph *g = jit_optimize_graph(traced, fn_name, sig_hash, b);
    rt_program *p = g ? jit_backend_program(g, fn_name, b, shape_generic) : NULL;
    if (!p) {
        ir_graph_free(g);
        return NULL;
    }
    *opt = g;
    return p;
}
