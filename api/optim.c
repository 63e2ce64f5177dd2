/* optim.c — optimizers as graph code (tf.keras.optimizers.SGD and Adam) and Keras' Glorot
 * initializer. tj_optimizer_apply reads and assigns variables with ordinary ops, so inside a
 * traced step the whole update is part of the compiled graph; eagerly it runs op by op. Slots
 * (momentum, m, v) and the step counter are variables the optimizer owns, created on the first
 * apply outside any trace (TensorFlow's init_scope), so a traced step may create them on its
 * first trace and later traces reuse them. The update rules are Keras' (TF >= 2.11):
 *   SGD:  m = momentum m - lr g; var += m (nesterov: var += momentum m - lr g); no momentum:
 *         var -= lr g.
 *   Adam: t = iterations + 1; alpha = lr sqrt(1 - beta2^t) / (1 - beta1^t);
 *         m += (g - m)(1 - beta1); v += (g^2 - v)(1 - beta2); var -= m alpha / (sqrt(v) + eps).
 * The counter is incremented once per apply, after the variables. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/grad.h"
#include "runtime/rt_pool.h"

#define OPT_MAGIC 0x6f707469u
enum { OPT_SGD = 1, OPT_ADAM };

typedef struct slot {
    tj_variable *var;  /* a reference: the slots' variable */
    tj_variable *s[2]; /* SGD: momentum; Adam: m, v */
} slot;

struct tj_optimizer {
    uint32_t magic;
    int kind;
    double lr, momentum, beta1, beta2, eps;
    int nesterov;
    pthread_mutex_t mu; /* guards the slot list */
    tj_variable *iterations;
    slot *slots;
    size_t n_slots, cap_slots;
};

static rt_arena opt_arena = RT_ARENA_INIT(256);
_Static_assert(sizeof(struct tj_optimizer) <= 256, "an optimizer fits its arena slot");

static tj_status check_opt(const tj_optimizer *o, const char *what) {
    if (!o)
        return ir_errorf(TJ_ERR_INVALID, "%s: optimizer is NULL", what);
    if (!rt_arena_holds(&opt_arena, o) || o->magic != OPT_MAGIC)
        return ir_errorf(TJ_ERR_STATE, "%s: the optimizer was freed (or is not one)", what);
    return TJ_OK;
}

static tj_optimizer *opt_new(int kind) {
    tj_optimizer *o = rt_arena_alloc(&opt_arena);
    if (!o)
        return NULL;
    o->magic = OPT_MAGIC;
    o->kind = kind;
    pthread_mutex_init(&o->mu, NULL);
    return o;
}

tj_optimizer *tj_sgd_new(double learning_rate, double momentum, int nesterov) {
    if (!(learning_rate >= 0) || !isfinite(learning_rate) || !(momentum >= 0 && momentum <= 1))
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "sgd_new: learning rate %g must be finite and >= 0, momentum %g "
                               "in [0, 1]",
                               learning_rate, momentum),
               NULL;
    tj_optimizer *o = opt_new(OPT_SGD);
    if (o) {
        o->lr = learning_rate;
        o->momentum = momentum;
        o->nesterov = nesterov != 0;
    }
    return o;
}

tj_optimizer *tj_adam_new(double learning_rate, double beta1, double beta2, double epsilon) {
    if (!(learning_rate >= 0) || !isfinite(learning_rate) || !(beta1 >= 0 && beta1 < 1) ||
        !(beta2 >= 0 && beta2 < 1) || !(epsilon >= 0))
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "adam_new: learning rate %g >= 0, beta1 %g and beta2 %g in [0, 1), "
                               "epsilon %g >= 0 expected",
                               learning_rate, beta1, beta2, epsilon),
               NULL;
    tj_optimizer *o = opt_new(OPT_ADAM);
    if (o) {
        o->lr = learning_rate;
        o->beta1 = beta1;
        o->beta2 = beta2;
        o->eps = epsilon;
    }
    return o;
}

void tj_optimizer_free(tj_optimizer *o) {
    if (!o || check_opt(o, "optimizer_free"))
        return;
    for (size_t i = 0; i < o->n_slots; i++) {
        rt_variable_release(o->slots[i].var);
        tj_variable_free(o->slots[i].s[0]);
        tj_variable_free(o->slots[i].s[1]);
    }
    free(o->slots);
    tj_variable_free(o->iterations);
    pthread_mutex_destroy(&o->mu);
    o->magic = 0;
    rt_arena_release(&opt_arena, o, sizeof *o);
}

/* A zero variable shaped like v, made outside any trace (init_scope). */
static tj_variable *zeros_var(int dt, int rank, const int64_t *dims, const char *base,
                              const char *suffix) {
    rt_trace *tr = api_trace_suspend();
    tj_scope_begin();
    char name[256];
    snprintf(name, sizeof name, "%s/%s", base ? base : "variable", suffix);
    tj_variable *z = tj_variable_new(tj_zeros((tj_dtype)dt, rank, dims), name);
    tj_scope_end();
    api_trace_resume(tr);
    return z;
}

/* The slots of v (made on first use; o->mu held). */
static slot *slot_of(tj_optimizer *o, tj_variable *v) {
    for (size_t i = 0; i < o->n_slots; i++)
        if (o->slots[i].var == v)
            return &o->slots[i];
    if (o->n_slots == o->cap_slots) {
        size_t c = o->cap_slots ? o->cap_slots * 2 : 16;
        slot *s = realloc(o->slots, c * sizeof *s);
        if (!s)
            return (void)ir_errorf(TJ_ERR_OOM, "optimizer: out of memory"), NULL;
        o->slots = s;
        o->cap_slots = c;
    }
    slot s = {rt_variable_retain(v), {NULL, NULL}};
    int n = o->kind == OPT_ADAM ? 2 : o->momentum > 0 ? 1 : 0;
    const char *names[2] = {o->kind == OPT_ADAM ? "m" : "momentum", "v"};
    for (int k = 0; k < n; k++)
        if (!(s.s[k] = zeros_var(v->dtype, v->rank, v->dims, v->name, names[k]))) {
            tj_variable_free(s.s[0]);
            rt_variable_release(v);
            return NULL;
        }
    o->slots[o->n_slots] = s;
    return &o->slots[o->n_slots++];
}

static tj_status assigned(tj_tensor *t, const char *what) {
    tj_status st = tj_status_of(t);
    return st ? ir_errorf(st, "%s: %s", what, tj_error_message(t)) : TJ_OK;
}

/* ---- eager Adam in one pass ------------------------------------------------------------------ */
/* Run op by op, Adam's update is twelve passes over the variable, its slots and its gradient (the
 * seed CNN's 3.3M parameters: about half of its eager step). Eagerly, outside tapes and numerics
 * checks, one kernel computes the same ops in the same order, each rounded to the dtype as its
 * eager kernel rounds it (the scalars converted as host scalars are; no contraction: the library
 * is built with -ffp-contract=off), so the values are the op-by-op ones bit for bit (tested). */
typedef struct adam_job {
    const void *p, *m, *v, *g;
    void *p2, *m2, *v2;
    double c1, c2, alpha, eps;
    int64_t n;
} adam_job;
enum { ADAM_CHUNK = 1 << 15 };

#define ADAM_TASK(name, T)                                                                         \
    static void name(void *ctx, int64_t t) {                                                       \
        const adam_job *j = ctx;                                                                   \
        const T *p = j->p, *m = j->m, *v = j->v, *g = j->g;                                        \
        T *p2 = j->p2, *m2 = j->m2, *v2 = j->v2;                                                   \
        T c1 = (T)j->c1, c2 = (T)j->c2, alpha = (T)j->alpha, eps = (T)j->eps;                      \
        int64_t i1 = (t + 1) * ADAM_CHUNK < j->n ? (t + 1) * ADAM_CHUNK : j->n;                    \
        for (int64_t i = t * ADAM_CHUNK; i < i1; i++) {                                            \
            T mi = m[i] + (g[i] - m[i]) * c1, vi = v[i] + (g[i] * g[i] - v[i]) * c2;               \
            m2[i] = mi, v2[i] = vi;                                                                \
            p2[i] = p[i] - (mi * alpha) / (SQRT_##T(vi) + eps);                                    \
        }                                                                                          \
    }
#define SQRT_float sqrtf
#define SQRT_double sqrt
ADAM_TASK(adam_f32, float)
ADAM_TASK(adam_f64, double)

static bool host_dense(const tj_tensor *t, int dt, int64_t n) {
    return t && t->kind == RT_CONCRETE && !t->on_device && t->dtype == dt && t->numel == n;
}

/* 1: not taken here (the caller runs the ops); else the update's status */
static int eager_adam(tj_optimizer *o, slot *s, tj_tensor *g, tj_tensor *alpha, tj_status *st) {
    tj_variable *var = s->var;
    int dt = var->dtype;
    if (api_trace_current() || api_tape_n_active || RT_CHECKING_NUMERICS() ||
        (dt != TJ_F32 && dt != TJ_F64) || !host_dense(g, dt, g->numel) || !host_dense(alpha, dt, 1))
        return 1;
    tj_tensor *p = tj_variable_read(var), *m = tj_variable_read(s->s[0]),
              *v = tj_variable_read(s->s[1]);
    if (!host_dense(p, dt, g->numel) || !host_dense(m, dt, g->numel) ||
        !host_dense(v, dt, g->numel))
        return 1;
    double t0 = RT_PROFILING() ? rt_profile_now() : 0;
    tj_tensor *p2 = rt_scoped(rt_tensor_alloc_uninit(dt, var->rank, var->dims)),
              *m2 = rt_scoped(rt_tensor_alloc_uninit(dt, var->rank, var->dims)),
              *v2 = rt_scoped(rt_tensor_alloc_uninit(dt, var->rank, var->dims));
    if (!p2 || !m2 || !v2) {
        *st = ir_errorf(TJ_ERR_OOM, "adam: out of memory");
        return 0;
    }
    /* the scalars as the ops convert them: host f64 scalars take the tensors' dtype */
    adam_job j = {p->data,
                  m->data,
                  v->data,
                  g->data,
                  p2->data,
                  m2->data,
                  v2->data,
                  dt == TJ_F32 ? (float)(1 - o->beta1) : 1 - o->beta1,
                  dt == TJ_F32 ? (float)(1 - o->beta2) : 1 - o->beta2,
                  dt == TJ_F32 ? *(const float *)alpha->data : *(const double *)alpha->data,
                  dt == TJ_F32 ? (float)o->eps : o->eps,
                  g->numel};
    int64_t chunks = (g->numel + ADAM_CHUNK - 1) / ADAM_CHUNK;
    void (*task)(void *, int64_t) = dt == TJ_F32 ? adam_f32 : adam_f64;
    if (chunks > 1)
        rt_parallel_for(chunks, task, &j);
    else if (chunks == 1)
        task(&j, 0);
    if (t0)
        rt_profile_event("op", "adam_update", t0, "\"eager\":1,\"n\":%lld", (long long)g->numel);
    *st = assigned(tj_assign(s->s[0], m2), "adam");
    if (!*st)
        *st = assigned(tj_assign(s->s[1], v2), "adam");
    if (!*st)
        *st = assigned(tj_assign(var, p2), "adam");
    return 0;
}

static tj_status update(tj_optimizer *o, slot *s, tj_tensor *g, tj_tensor *step) {
    const char *what = o->kind == OPT_ADAM ? "adam" : "sgd";
    tj_variable *v = s->var;
    tj_tensor *lr = tj_scalar_f64(o->lr);
    if (o->kind == OPT_SGD) {
        if (!s->s[0])
            return assigned(tj_assign_sub(v, tj_mul(g, lr)), what);
        tj_tensor *m =
            tj_sub(tj_mul(tj_variable_read(s->s[0]), tj_scalar_f64(o->momentum)), tj_mul(g, lr));
        tj_status st = assigned(tj_assign(s->s[0], m), what);
        if (st)
            return st;
        tj_tensor *d =
            o->nesterov ? tj_sub(tj_mul(m, tj_scalar_f64(o->momentum)), tj_mul(g, lr)) : m;
        return assigned(tj_assign_add(v, d), what);
    }
    tj_tensor *t = tj_cast(step, (tj_dtype)v->dtype);
    tj_tensor *one = tj_scalar_f64(1);
    tj_tensor *b1p = tj_pow(tj_cast(tj_scalar_f64(o->beta1), (tj_dtype)v->dtype), t);
    tj_tensor *b2p = tj_pow(tj_cast(tj_scalar_f64(o->beta2), (tj_dtype)v->dtype), t);
    tj_tensor *alpha = tj_div(tj_mul(lr, tj_sqrt(tj_sub(one, b2p))), tj_sub(one, b1p));
    tj_status fast;
    if (!eager_adam(o, s, g, alpha, &fast))
        return fast;
    tj_tensor *m = tj_variable_read(s->s[0]), *vv = tj_variable_read(s->s[1]);
    tj_status st =
        assigned(tj_assign_add(s->s[0], tj_mul(tj_sub(g, m), tj_scalar_f64(1 - o->beta1))), what);
    if (!st)
        st = assigned(
            tj_assign_add(s->s[1], tj_mul(tj_sub(tj_mul(g, g), vv), tj_scalar_f64(1 - o->beta2))),
            what);
    if (st)
        return st;
    m = tj_variable_read(s->s[0]);
    vv = tj_variable_read(s->s[1]);
    return assigned(
        tj_assign_sub(v, tj_div(tj_mul(m, alpha), tj_add(tj_sqrt(vv), tj_scalar_f64(o->eps)))),
        what);
}

/* vars[k] is a live float variable, for `what`. */
static tj_status check_float_var(tj_variable *v, const char *what) {
    tj_status st = rt_variable_check(v, what);
    if (!st && !ir_dtype_is_float(v->dtype))
        st = ir_errorf(TJ_ERR_DTYPE, "%s: variable '%s' is %s, not a float", what,
                       v->name ? v->name : "?", ir_dtype_name(v->dtype));
    return st;
}

tj_status tj_optimizer_apply(tj_optimizer *o, int n, tj_variable *const *vars,
                             tj_tensor *const *grads) {
    const char *what = "optimizer_apply";
    tj_status st = check_opt(o, what);
    if (st)
        return st;
    if (n < 0 || (n > 0 && (!vars || !grads)))
        return ir_errorf(TJ_ERR_INVALID, "%s: bad lists (n=%d)", what, n);
    for (int k = 0; k < n; k++) {
        if ((st = check_float_var(vars[k], what)))
            return st;
        tj_tensor *g = grads[k];
        if (!g)
            continue; /* no gradient (TensorFlow's None): the variable is left as it is */
        char a[128], b[128];
        if (g->kind == RT_ERROR)
            return ir_errorf(g->code, "%s: gradient %d: %s", what, k, g->msg);
        if (g->kind == RT_TUPLE || g->dtype != vars[k]->dtype || g->rank != vars[k]->rank ||
            memcmp(g->dims, vars[k]->dims, sizeof(int64_t) * g->rank))
            return ir_errorf(g->kind != RT_TUPLE && g->dtype != vars[k]->dtype ? TJ_ERR_DTYPE
                                                                               : TJ_ERR_SHAPE,
                             "%s: gradient %d is %s%s, variable '%s' is %s%s", what, k,
                             ir_dtype_name(g->dtype), ir_fmt_dims(a, sizeof a, g->rank, g->dims),
                             vars[k]->name ? vars[k]->name : "?", ir_dtype_name(vars[k]->dtype),
                             ir_fmt_dims(b, sizeof b, vars[k]->rank, vars[k]->dims));
    }
    pthread_mutex_lock(&o->mu);
    if (!o->iterations)
        o->iterations = zeros_var(TJ_I64, 0, NULL, "optimizer", "iterations");
    slot **ss = calloc((size_t)n + 1, sizeof *ss);
    st = o->iterations && ss ? TJ_OK : ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    for (int k = 0; k < n && !st; k++)
        if (grads[k] && !(ss[k] = slot_of(o, vars[k])))
            st = ir_last_code();
    pthread_mutex_unlock(&o->mu);
    tj_scope_begin();
    tj_tensor *step = st ? NULL : tj_add(tj_variable_read(o->iterations), tj_scalar_i64(1));
    for (int k = 0; k < n && !st; k++)
        if (ss[k])
            st = update(o, ss[k], grads[k], step);
    if (!st)
        st = assigned(tj_assign(o->iterations, step), what);
    tj_scope_end();
    free(ss);
    return st;
}

tj_status tj_optimizer_build(tj_optimizer *o, int n, tj_variable *const *vars) {
    const char *what = "optimizer_build";
    tj_status st = check_opt(o, what);
    if (st)
        return st;
    if (n < 0 || (n > 0 && !vars))
        return ir_errorf(TJ_ERR_INVALID, "%s: bad list (n=%d)", what, n);
    for (int k = 0; k < n && !st; k++)
        st = check_float_var(vars[k], what);
    if (st)
        return st;
    pthread_mutex_lock(&o->mu);
    if (!o->iterations)
        o->iterations = zeros_var(TJ_I64, 0, NULL, "optimizer", "iterations");
    st = o->iterations ? TJ_OK : ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    for (int k = 0; k < n && !st; k++)
        if (!slot_of(o, vars[k]))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    pthread_mutex_unlock(&o->mu);
    return st;
}

int tj_optimizer_variables(tj_optimizer *o, int cap, tj_variable **out) {
    if (check_opt(o, "optimizer_variables"))
        return -1;
    if (cap < 0 || (cap > 0 && !out))
        return ir_errorf(TJ_ERR_INVALID, "optimizer_variables: bad list (cap=%d)", cap), -1;
    int n = 0;
    pthread_mutex_lock(&o->mu);
    if (o->iterations && n++ < cap)
        out[n - 1] = o->iterations;
    for (size_t i = 0; i < o->n_slots; i++)
        for (int k = 0; k < 2; k++)
            if (o->slots[i].s[k] && n++ < cap)
                out[n - 1] = o->slots[i].s[k];
    pthread_mutex_unlock(&o->mu);
    return n;
}

tj_variable *tj_optimizer_iterations(tj_optimizer *o) {
    return check_opt(o, "optimizer_iterations") ? NULL : o->iterations;
}

tj_variable *tj_optimizer_slot(tj_optimizer *o, tj_variable *var, const char *name) {
    if (check_opt(o, "optimizer_slot"))
        return NULL;
    if (!name)
        return (void)ir_errorf(TJ_ERR_INVALID, "optimizer_slot: name is NULL"), NULL;
    int k = strcmp(name, "m") == 0 || strcmp(name, "momentum") == 0 ? 0
            : strcmp(name, "v") == 0                                ? 1
                                                                    : -1;
    tj_variable *r = NULL;
    pthread_mutex_lock(&o->mu);
    for (size_t i = 0; k >= 0 && i < o->n_slots; i++)
        if (o->slots[i].var == var)
            r = o->slots[i].s[k];
    pthread_mutex_unlock(&o->mu);
    if (!r)
        ir_errorf(TJ_ERR_INVALID, "optimizer_slot: no slot '%s' for that variable", name);
    return r;
}

/* ---- initializers ---------------------------------------------------------------------------- */
tj_tensor *tj_glorot_uniform(tj_dtype dt, int rank, const int64_t *dims, uint64_t seed) {
    if (rank < 1 || !dims)
        return rt_scoped(
            rt_errorf(TJ_ERR_SHAPE, "glorot_uniform: needs a rank >= 1 shape, got rank %d", rank));
    /* Keras: a kernel [..., in, out] has receptive field prod(dims[:-2]) */
    double recept = 1;
    for (int d = 0; d + 2 < rank; d++)
        recept *= (double)dims[d];
    double fan_in = rank >= 2 ? (double)dims[rank - 2] * recept : (double)dims[0];
    double fan_out = rank >= 2 ? (double)dims[rank - 1] * recept : (double)dims[0];
    double limit = fan_in + fan_out > 0 ? sqrt(6.0 / (fan_in + fan_out)) : 0;
    return tj_random_uniform(dt, rank, dims, -limit, limit, seed);
}
