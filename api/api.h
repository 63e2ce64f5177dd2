/* api.h — the internal interface of api/, the user-facing floor above the runtime: the op entry
 * points (ops.c, apply.c: run the reference kernel eagerly, or record a node into the current
 * trace), the trace state that ops record into (trace.c), control flow (control.c,
 * control_tree.c, switch.c) and tensor arrays, variables' entry points, side effects' entry
 * points, gradient tapes and rules (grad.h), replay, optimizers and data loading. It uses the
 * runtime (runtime/runtime.h) and the IR; the jit floor (functions, the compile pipeline, the
 * backends) drives its tracer. */
#ifndef TJ_API_H
#define TJ_API_H

#if defined(TJ_LAYER_IR) || defined(TJ_LAYER_PASSES) || defined(TJ_LAYER_RUNTIME)
#error "api/ is above runtime/: this layer may not use it"
#endif

#include "runtime/runtime.h"

/* ---- tracing: ops record into the innermost trace of the thread ------------------------------ */
/* The outer values a control-flow node's regions read (node ids in the enclosing graph), shared
 * by its regions: capture j is param n_explicit + j of each region. */
typedef struct api_captures {
    uint32_t *outer;
    uint32_t n, cap;
} api_captures;

typedef struct rt_trace {
    ir_graph *g;
    tj_tensor *const *args; /* the triggering call's concrete inputs, or NULL (get_concrete) */
    uint32_t n_args;
    const char *const *arg_names;
    tj_variable **caps; /* captured variables, slot = index (the function's: regions use the
                           root trace's list) */
    uint32_t n_caps, cap_caps;
    uint32_t *cap_value;   /* per slot: node holding the current value in this trace, or IR_NONE */
    uint32_t *cap_version; /* per slot: version of the next VAR_READ (bumped by regions that
                              assign the variable, so the read after them is a new node) */
    uint32_t n_var_state;  /* entries of cap_value and cap_version */
    /* a region (a control-flow body) being traced inside its parent trace */
    int is_region;
    api_captures *captures;  /* the node's captured outer values */
    uint32_t n_explicit;     /* the body's own params come first */
    uint32_t *capture_param; /* per capture: this region's PARAM node, or IR_NONE */
    uint32_t n_capture_param;
    int allow_var_create;
    int n_vars_created;
    tj_variable **created; /* variables created by this trace: their references belong to the
                              traced function, which takes the list when the trace ends */
    tj_status err;         /* first error recorded while tracing (sticky) */
    char errmsg[512];
    uint64_t serial;   /* unique per trace: a symbolic tensor names (trace, serial) */
    const void *owner; /* what is being traced (the jit's tj_function), for re-entry checks */
    struct rt_trace *parent;
} rt_trace;
/* Whether `owner` is being traced on this thread (by any trace on the stack). */
int api_trace_owner_active(const void *owner);

/* Whether symbolic tensor t belongs to a trace that is still open on this thread. */
int rt_trace_is_live(const tj_tensor *t);

/* Records the thread's current error as the trace's first error (if none yet). */
void api_trace_fail(rt_trace *tr, tj_status code);

rt_trace *api_trace_current(void);
void api_trace_push(rt_trace *t);
void api_trace_pop(void);
/* TensorFlow's init_scope: runs what follows eagerly even inside a trace (state made once, such
 * as optimizer slots); resume with what suspend returned. */
rt_trace *api_trace_suspend(void);
void api_trace_resume(rt_trace *t);
/* A symbolic tensor for node `id` of the current trace (unscoped reference). */
tj_tensor *api_symbolic(rt_trace *tr, uint32_t id);
/* The node for t in trace tr: symbolic tensors give their node; concrete ones are lifted to
 * CONST nodes. IR_NONE with the error set on failure. */
uint32_t api_trace_lift(rt_trace *tr, tj_tensor *t);
/* The capture slot of v (added to the function's list, the root trace's), with tr's per-slot
 * state (cap_value, cap_version) covering it; IR_NONE on OOM. */
uint32_t api_trace_capture(rt_trace *tr, tj_variable *v);
/* Frees a trace's own arrays (variable state, region capture params; not caps or the graph). */
void api_trace_free_state(rt_trace *tr);
/* Region tracing (control.c): the PARAM node of capture j in region trace tr (made on first
 * use, typed like the outer value); IR_NONE with the error set. */
uint32_t api_region_capture_param(rt_trace *tr, uint32_t j);

/* ---- the generic op entry -------------------------------------------------------------------- */
/* Applies an op: propagates error inputs, records a node when tracing, else infers and runs the
 * reference kernel. Returns a scoped new reference (never NULL). */
tj_tensor *api_apply(ir_node *proto, tj_tensor *const *in, uint32_t n_in);

/* Runs g's nodes again through api_apply (recorded into the current trace, or eagerly), PARAM k
 * reading params[k]; writes g's outputs (scoped references) to outs. Pure nodes and variable
 * reads only: effects and control flow are an error naming the node (replay.c). */
tj_status api_replay_graph(const ir_graph *g, tj_tensor *const *params, uint32_t n_params,
                           tj_tensor **outs);

/* ---- control flow (control.c; the public entry points in control_tree.c) -------------------- */
/* The control-flow ops over flat lists of tensors (no tuples): eagerly as C, traced as regions. */
tj_tensor *api_cond_flat(tj_tensor *pred, tj_body then_fn, tj_body else_fn, int n,
                         tj_tensor *const *args, void *user);
tj_tensor *api_while_flat(tj_body cond_fn, tj_body body_fn, int n, tj_tensor *const *init,
                          int64_t maximum_iterations, void *user);
tj_tensor *api_for_flat(tj_tensor *start, tj_tensor *limit, tj_tensor *delta, tj_body body_fn,
                        int n, tj_tensor *const *init, void *user);
tj_tensor *api_scan_flat(tj_body body_fn, int n_carry, tj_tensor *const *carry, int n_xs,
                         tj_tensor *const *xs, void *user);

#endif /* TJ_API_H */
