/* tape_grad.c — the backward pass: seeds the targets, walks a tape's entries backwards calling
 * each op's rule (grad.c) or, for a control-flow node, tape_cf.c, and sums the gradients that
 * reach each value; then the entry points tj_tape_gradient, tj_tape_gradient_vars and
 * api_tape_vjp collect the sources' gradients. */
#include <stdlib.h>
#include <string.h>

#include "api/tape.h"

static tj_status fail(const char *what, tj_tensor *t) {
    if (t && t->kind == RT_ERROR)
        return ir_errorf(t->code, "%s: %s", what, t->msg);
    return ir_last_code() ? ir_last_code() : TJ_ERR_INVALID;
}

/* Checks seed against target (NULL: ones, and then the target must be a scalar) and adds it to
 * the target's gradient. */
static tj_status seed_target(tj_tape *tp, tj_tensor *target, tj_tensor *seed, kmap *grads) {
    const char *what = "tape_gradient";
    uint64_t tk = api_tape_key(tp, target);
    tj_tensor *s = seed;
    if (!s) {
        if (target->numel != 1 || target->rank != 0)
            return ir_errorf(TJ_ERR_SHAPE,
                             "%s: the target must be a scalar without a seed, got %s with %d "
                             "dims (give the output gradient as `seed`)",
                             what, ir_dtype_name(target->dtype), target->rank);
        s = tj_ones((tj_dtype)target->dtype, 0, NULL);
    } else {
        char a[128], b[128];
        if (seed->kind == RT_ERROR)
            return fail(what, seed);
        if (seed->dtype != target->dtype || !(seed->rank == target->rank) ||
            memcmp(seed->dims, target->dims, sizeof(int64_t) * target->rank))
            return ir_errorf(
                TJ_ERR_SHAPE, "%s: seed %s%s does not match the target %s%s", what,
                ir_dtype_name(seed->dtype), ir_fmt_dims(a, sizeof a, seed->rank, seed->dims),
                ir_dtype_name(target->dtype), ir_fmt_dims(b, sizeof b, target->rank, target->dims));
    }
    /* a target that is not a value of this tape's trace: nothing depends on it */
    return tk ? api_tape_accumulate(grads, tk, s) : TJ_OK;
}

/* Runs the backward pass from the seeded targets; every reached key's gradient is left in grads. */
static tj_status backward(tj_tape *tp, uint32_t n_t, tj_tensor *const *targets,
                          tj_tensor *const *seeds, kmap *grads) {
    const char *what = "tape_gradient";
    tj_status st = TJ_OK;
    for (uint32_t t = 0; t < n_t && !st; t++)
        st = seed_target(tp, targets[t], seeds ? seeds[t] : NULL, grads);
    for (size_t i = tp->n_e; i-- > 0 && !st;) {
        entry *e = &tp->e[i];
        tj_tensor **gp = api_kmap_get(grads, e->out_key);
        if (!gp || !*gp)
            continue;
        const api_grad_rule *r = &api_grad_rules[e->n.op];
        const char *op = ir_ops[e->n.op].name;
        if (r->kind == API_GRAD_NONE)
            continue;
        if (r->kind == API_GRAD_CF && e->first != UINT32_MAX) {
            /* every result of the node at once; then skip its other entries */
            st = api_tape_cf_backward(tp, e->first, (uint32_t)i, grads);
            if (st)
                st = ir_errorf(st, "%s: gradient of '%s': %s", what, op, ir_last_error());
            i = e->first;
            continue;
        }
        if (r->kind != API_GRAD_RULE)
            return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: no gradient for op '%s'%s%s", what, op,
                             r->why ? ": " : " (no rule)", r->why ? r->why : "");
        tj_tensor *stack_gin[8] = {0},
                  **gin = e->n_in <= 8 ? stack_gin : calloc(e->n_in, sizeof *gin);
        if (!gin)
            return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
        uint32_t want = 0; /* the inputs whose gradients are kept below */
        for (uint32_t k = 0; k < e->n_in && k < 32; k++)
            if (e->in_keys[k] && ir_dtype_is_float(e->in[k]->dtype))
                want |= 1u << k;
        st = r->fn(&e->n, e->in, e->out, *gp, want, gin);
        if (st)
            st = ir_errorf(st, "%s: gradient of '%s': %s", what, op, ir_last_error());
        for (uint32_t k = 0; k < e->n_in && !st; k++) {
            if (!gin[k] || !e->in_keys[k] || !ir_dtype_is_float(e->in[k]->dtype))
                continue;
            char a[128], b[128];
            if (gin[k]->kind == RT_ERROR)
                st = ir_errorf(gin[k]->code, "%s: gradient of '%s' (input %u): %s", what, op, k,
                               gin[k]->msg);
            else if (gin[k]->dtype != e->in[k]->dtype || gin[k]->rank != e->in[k]->rank ||
                     memcmp(gin[k]->dims, e->in[k]->dims, sizeof(int64_t) * gin[k]->rank))
                st = ir_errorf(TJ_ERR_INVALID,
                               "%s: the rule of '%s' gave input %u a gradient %s%s for %s%s "
                               "(a bug in the rule)",
                               what, op, k, ir_dtype_name(gin[k]->dtype),
                               ir_fmt_dims(a, sizeof a, gin[k]->rank, gin[k]->dims),
                               ir_dtype_name(e->in[k]->dtype),
                               ir_fmt_dims(b, sizeof b, e->in[k]->rank, e->in[k]->dims));
            else
                st = api_tape_accumulate(grads, e->in_keys[k], gin[k]);
        }
        if (gin != stack_gin)
            free(gin);
    }
    return st;
}

/* The sources of one gradient call: per source k, the keys whose gradients sum to it
 * (keys[off[k] .. off[k+1])) and its dtype and shape (for zeros). */
typedef struct source_keys {
    uint64_t *keys;
    uint32_t *off;
    uint8_t *dtype, *rank;
    const int64_t **dims;
} source_keys;

static tj_status gradient(tj_tape *tp, const char *what, uint32_t n_t, tj_tensor *const *targets,
                          tj_tensor *const *seeds, int n, const source_keys *sk,
                          tj_tensor **grads) {
    tj_status st = TJ_OK;
    if (tp->lost)
        return ir_errorf(TJ_ERR_OOM, "%s: the tape ran out of memory while recording", what);
    kmap grads_of = {0};
    tp->busy = 1; /* its own backward pass is not recorded; other tapes record it */
    tj_scope_begin();
    st = backward(tp, n_t, targets, seeds, &grads_of);
    for (int k = 0; k < n && !st; k++) {
        tj_tensor *sum = NULL;
        for (uint32_t j = sk->off[k]; j < sk->off[k + 1] && !st; j++) {
            tj_tensor **g = api_kmap_get(&grads_of, sk->keys[j]);
            if (g && *g)
                sum = sum ? tj_add(sum, *g) : *g;
        }
        if (!sum && (tp->flags & TJ_TAPE_UNCONNECTED_ZERO) && ir_dtype_is_float(sk->dtype[k]))
            sum = tj_zeros((tj_dtype)sk->dtype[k], sk->rank[k], sk->dims[k]);
        if (sum && sum->kind == RT_ERROR)
            st = fail(what, sum);
        grads[k] = sum ? rt_retain(sum) : NULL;
    }
    tj_scope_end();
    tp->busy = 0;
    api_kmap_free(&grads_of);
    for (int k = 0; k < n; k++) {
        if (st) {
            rt_release(grads[k]);
            grads[k] = NULL;
        } else if (grads[k]) {
            rt_scoped(grads[k]);
        }
    }
    return st;
}

/* Checks the call's common arguments and clears grads. */
static tj_status check_call(tj_tape *tp, const char *what, tj_tensor *target, int n,
                            const void *list, tj_tensor **grads) {
    tj_status st = api_tape_check(tp, what);
    if (st)
        return st;
    if (n < 0 || (n > 0 && (!list || !grads)))
        return ir_errorf(TJ_ERR_INVALID, "%s: bad source list (n=%d)", what, n);
    for (int k = 0; k < n; k++)
        grads[k] = NULL;
    if (!target)
        return ir_errorf(TJ_ERR_INVALID, "%s: target is NULL", what);
    if (target->kind == RT_ERROR)
        return ir_errorf(target->code, "%s: the target is an error: %s", what, target->msg);
    if (target->kind == RT_TUPLE)
        return ir_errorf(TJ_ERR_INVALID, "%s: the target is a tuple, not a tensor", what);
    if (!ir_dtype_is_float(target->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "%s: the target must be a float tensor, got %s", what,
                         ir_dtype_name(target->dtype));
    if (tp->serial != api_tape_serial_now())
        return ir_errorf(TJ_ERR_STATE, "%s: the tape belongs to another trace", what);
    if (tp->busy)
        return ir_errorf(TJ_ERR_STATE, "%s: called from inside the same tape's gradient", what);
    return TJ_OK;
}

static void sk_free(source_keys *sk) {
    free(sk->keys);
    free(sk->off);
    free(sk->dtype);
    free(sk->rank);
    free(sk->dims);
}

/* Room for n sources and n_keys keys; on failure nothing is kept and the error is set. */
static tj_status sk_alloc(source_keys *sk, int n, size_t n_keys, const char *what) {
    sk->keys = malloc((n_keys + 1) * sizeof *sk->keys);
    sk->off = malloc(((size_t)n + 1) * sizeof *sk->off);
    sk->dtype = malloc((size_t)n + 1);
    sk->rank = malloc((size_t)n + 1);
    sk->dims = malloc(((size_t)n + 1) * sizeof *sk->dims);
    if (sk->keys && sk->off && sk->dtype && sk->rank && sk->dims)
        return TJ_OK;
    sk_free(sk);
    return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
}

/* Source k of a gradient call: its key (or one no value has, when t is not the tape's), dtype
 * and shape. */
static void sk_source(source_keys *sk, const tj_tape *tape, uint32_t k, tj_tensor *t) {
    sk->off[k] = k;
    sk->keys[k] = api_tape_key(tape, t);
    if (!sk->keys[k])
        sk->keys[k] = ~0ull; /* not a value of this tape: unconnected */
    sk->dtype[k] = t->dtype;
    sk->rank[k] = t->rank;
    sk->dims[k] = t->dims;
}

tj_status tj_tape_gradient(tj_tape *tape, tj_tensor *target, tj_tensor *seed, int n,
                           tj_tensor *const *sources, tj_tensor **grads) {
    const char *what = "tape_gradient";
    tj_status st = check_call(tape, what, target, n, sources, grads);
    if (st)
        return st;
    source_keys sk;
    if ((st = sk_alloc(&sk, n, (size_t)n, what)))
        return st;
    for (int k = 0; k < n && !st; k++) {
        tj_tensor *s = sources[k];
        if (!s)
            st = ir_errorf(TJ_ERR_INVALID, "%s: source %d is NULL", what, k);
        else if (s->kind == RT_ERROR)
            st = ir_errorf(s->code, "%s: source %d is an error: %s", what, k, s->msg);
        else if (s->kind != RT_CONCRETE && s->kind != RT_SYMBOLIC)
            st = ir_errorf(TJ_ERR_INVALID, "%s: source %d is not a tensor", what, k);
        if (st)
            break;
        sk_source(&sk, tape, (uint32_t)k, s);
    }
    sk.off[n] = (uint32_t)n;
    if (!st)
        st = gradient(tape, what, 1, &target, seed ? &seed : NULL, n, &sk, grads);
    sk_free(&sk);
    return st;
}

tj_status tj_tape_gradient_vars(tj_tape *tape, tj_tensor *target, tj_tensor *seed, int n,
                                tj_variable *const *vars, tj_tensor **grads) {
    const char *what = "tape_gradient_vars";
    tj_status st = check_call(tape, what, target, n, vars, grads);
    if (st)
        return st;
    for (int k = 0; k < n; k++)
        if ((st = rt_variable_check(vars[k], what)))
            return st;
    source_keys sk;
    if ((st = sk_alloc(&sk, n, (size_t)n * tape->n_reads, what)))
        return st;
    uint32_t m = 0;
    for (int k = 0; k < n; k++) {
        sk.off[k] = m;
        for (size_t i = 0; i < tape->n_reads; i++)
            if (tape->reads[i].v == vars[k])
                sk.keys[m++] = tape->reads[i].key;
        sk.dtype[k] = vars[k]->dtype;
        sk.rank[k] = vars[k]->rank;
        sk.dims[k] = vars[k]->dims;
    }
    sk.off[n] = m;
    st = gradient(tape, what, 1, &target, seed ? &seed : NULL, n, &sk, grads);
    sk_free(&sk);
    return st;
}

tj_status api_tape_vjp(tj_tape *tape, uint32_t n_t, tj_tensor *const *targets,
                       tj_tensor *const *seeds, uint32_t n, tj_tensor *const *sources,
                       tj_tensor **grads) {
    const char *what = "gradient";
    tj_status st = api_tape_check(tape, what);
    if (st)
        return st;
    source_keys sk;
    if ((st = sk_alloc(&sk, (int)n, n, what)))
        return st;
    for (uint32_t k = 0; k < n; k++)
        sk_source(&sk, tape, k, sources[k]);
    sk.off[n] = n;
    for (uint32_t t = 0; t < n_t && !st; t++)
        if (!targets[t] || targets[t]->kind == RT_ERROR || targets[t]->kind == RT_TUPLE)
            st = ir_errorf(TJ_ERR_INVALID, "%s: target %u is not a tensor", what, t);
    if (!st)
        st = gradient(tape, what, n_t, targets, seeds, (int)n, &sk, grads);
    sk_free(&sk);
    return st;
}
