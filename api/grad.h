/* grad.h — gradient rules and tapes (api/grad.c, api/tape.c).
 *
 * A rule is the op's adjoint written with tracejit ops, so it runs eagerly on an eager tape and
 * records graph nodes on a tape inside a trace: the backward pass is ordinary graph code that
 * the passes and backends see like any other. Every op in ops.def has an entry (a test walks the
 * table): a rule, "no gradient" (its results are integers or bools, or it has no inputs), or
 * "unsupported" with the reason given in the error. */
#ifndef TJ_API_GRAD_H
#define TJ_API_GRAD_H

#include "api/api.h"

/* n: the op, its canonical attributes and its output's dtype and dims; in: the input values
 * (n->n_in of them); out: the output value; g: the gradient of the output (out's dtype and
 * dims); want: bit k set when the caller uses input k's gradient (inputs from 32 on: always).
 * Sets gin[k] to the gradient of input k (scoped references, in[k]'s dtype and dims) or leaves
 * NULL for none; rules whose gradients cost a kernel each (products, convolutions) skip the
 * unwanted ones: an eager tape's backward pass ran the seed CNN's gradient with respect to its
 * input images, 7 ms of a 70 ms step, for nothing. Returns TJ_OK or an error (ir_errorf). */
typedef tj_status (*api_grad_fn)(const ir_node *n, tj_tensor *const *in, tj_tensor *out,
                                 tj_tensor *g, uint32_t want, tj_tensor **gin);
#define API_GRAD_WANTS(want, k) ((k) >= 32 || (((want) >> (k)) & 1u))
enum {
    API_GRAD_MISSING = 0, /* nobody wrote one: the table test fails */
    API_GRAD_RULE,
    API_GRAD_NONE,        /* no gradient flows through (integer/bool results, sources, effects) */
    API_GRAD_UNSUPPORTED, /* a gradient asked through it is an error naming the op and `why` */
    API_GRAD_CF,          /* control flow: the tape differentiates its regions (tape.c) */
};
typedef struct api_grad_rule {
    int kind;
    api_grad_fn fn;
    const char *why;
} api_grad_rule;
extern const api_grad_rule api_grad_rules[IR_N_OPS];

/* ---- tape hooks (tape.c); cheap when no tape records on the thread --------------------------- */
extern _Thread_local int api_tape_n_active;
/* After an op: n is the node (inferred), orig the arguments as given (their identity), vals the
 * values the op used (host scalars converted), ids their nodes when tracing (else NULL). */
void api_tape_on_op(const ir_node *n, tj_tensor *const *orig, tj_tensor *const *vals, uint32_t n_in,
                    const uint32_t *ids, tj_tensor *res);
/* alias (rt_tensor_alias of src) is src under a new identity: tapes that know src record an
 * identity op from src to it, so an enclosing tape's gradient flows through. */
void api_tape_on_alias(tj_tensor *src, tj_tensor *alias);
/* A variable read (res: its value, concrete or symbolic). */
void api_tape_on_var_read(tj_variable *v, tj_tensor *res);
/* A traced control-flow node of trace tr with operand nodes in[0..n_in) and results outs. */
void api_tape_on_cf(rt_trace *tr, const ir_node *node, const uint32_t *in, uint32_t n_in,
                    tj_tensor *const *outs, uint32_t n_out);
/* The vector-Jacobian product: the gradients of sum_t <targets[t], seeds[t]> with respect to the
 * n sources (scoped references, NULL or zeros as the tape's flags say). */
tj_status api_tape_vjp(tj_tape *tape, uint32_t n_t, tj_tensor *const *targets,
                       tj_tensor *const *seeds, uint32_t n, tj_tensor *const *sources,
                       tj_tensor **grads);
/* Whether an eager call with these arguments must run op by op because a tape records them. */
int api_tape_wants_eager(int n, tj_tensor *const *args);

#endif /* TJ_API_GRAD_H */
