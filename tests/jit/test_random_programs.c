/* test_random_programs.c — random programs written against the public API, run eagerly
 * (tj_call_eager: the reference kernels op by op) and compiled (tj_call: trace, passes, backend),
 * compared result by result. Inputs mix size-0 dims with special values (+-inf, NaN, -0,
 * subnormals, 1e30, 3e38, integer extremes); programs mix unary and binary ops, host scalars of
 * other dtypes (tj_scalar_*, tj_static_*), casts, where, reductions over random axes, matmul,
 * softmax, transpose, slice, reshape and concat. Every value a program makes is returned, so
 * nothing is pruned and both runs compute the same ops.
 * CMake runs it three ways: TJ_EXACT_MATH=1 and TJ_BACKEND=interp compare bit for bit (NaN equal
 * to NaN); default math compares statuses, dtypes and shapes (the approximations and FMA
 * contraction may move values); TJ_TEST_TOL=<t> compares floats within a relative tolerance and
 * integers exactly (the CUDA backend's kernels under the fake driver's emulation, which sum in
 * another order). The seed is printed; TJ_TEST_SEED=<n> replays a run. */
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <tracejit.h>

#include "check.h"

#define N_PROGRAMS 300
#define MAX_INSTR 12
#define MAX_VALS (3 + MAX_INSTR)

static uint64_t rng;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int rnd(int n) {
    return (int)(next() % (uint64_t)n);
}

enum { K_UN, K_BIN, K_SCALAR, K_CAST, K_WHERE, K_RED, K_MM, K_SOFTMAX, K_VIEW, K_N };

typedef struct instr {
    int kind, op, a, b, c, dt, n_axes, axes[2], keep, scalar_first, is_static, view;
    double sv;
} instr;

typedef struct program {
    int n_params, n_instr;
    instr in[MAX_INSTR];
} program;

static const program *cur; /* read by the traced function at trace time, as host state */

static tj_tensor *host_scalar(const instr *I) {
    switch (I->dt) {
    case TJ_F32:
        return tj_scalar_f32((float)I->sv);
    case TJ_F64:
        return I->is_static ? tj_static_f64(I->sv) : tj_scalar_f64(I->sv);
    case TJ_I32:
        return tj_scalar_i32((int32_t)I->sv);
    case TJ_I64:
        return I->is_static ? tj_static_i64((int64_t)I->sv) : tj_scalar_i64((int64_t)I->sv);
    default:
        return I->is_static ? tj_static_bool(I->sv != 0) : tj_scalar_bool(I->sv != 0);
    }
}

static tj_tensor *unary(int op, tj_tensor *x) {
    tj_tensor *(*const fns[])(tj_tensor *) = {
        tj_neg,  tj_abs, tj_sign, tj_exp,   tj_log,  tj_sqrt,  tj_rsqrt,       tj_tanh,  tj_sigmoid,
        tj_relu, tj_sin, tj_cos,  tj_floor, tj_ceil, tj_round, tj_logical_not, tj_isnan, tj_isinf};
    return fns[op](x);
}
#define N_UNARY 18

static tj_tensor *binary(int op, tj_tensor *a, tj_tensor *b) {
    tj_tensor *(*const fns[])(tj_tensor *, tj_tensor *) = {
        tj_add,        tj_sub,     tj_mul,           tj_div,         tj_floordiv,  tj_mod,
        tj_pow,        tj_maximum, tj_minimum,       tj_equal,       tj_not_equal, tj_less,
        tj_less_equal, tj_greater, tj_greater_equal, tj_logical_and, tj_logical_or};
    return fns[op](a, b);
}
#define N_BINARY 17

static tj_tensor *reduce(int op, tj_tensor *x, int n, const int *axes, int keep) {
    switch (op) {
    case 0:
        return tj_sum(x, n, axes, keep);
    case 1:
        return tj_mean(x, n, axes, keep);
    case 2:
        return tj_max(x, n, axes, keep);
    case 3:
        return tj_min(x, n, axes, keep);
    case 4:
        return tj_prod(x, n, axes, keep);
    case 5:
        return tj_argmax(x, axes[0]);
    default:
        return tj_argmin(x, axes[0]);
    }
}

static tj_tensor *view(const instr *I, tj_tensor *x) {
    int r = tj_tensor_rank(x);
    switch (I->view) {
    case 0:
        return tj_transpose(x, NULL);
    case 1: {
        int64_t b[TJ_MAX_RANK], e[TJ_MAX_RANK], s[TJ_MAX_RANK];
        for (int d = 0; d < r; d++) {
            b[d] = (I->axes[0] + d) % 3 - 1;
            e[d] = (I->axes[1] + d) % 4 == 0 ? INT64_MAX : (I->axes[1] + d) % 4 - 2;
            s[d] = (I->op + d) % 3 == 0 ? -1 : 1 + (I->op + d) % 2;
        }
        return tj_slice(x, b, e, s);
    }
    case 2:
        return tj_reshape(x, 1, (int64_t[]){-1});
    default:
        return tj_concat(2, (tj_tensor *[]){x, x}, 0);
    }
}

static tj_tensor *run_program(tj_tensor *p0, tj_tensor *p1, tj_tensor *p2) {
    const program *P = cur;
    tj_tensor *v[MAX_VALS] = {p0, p1, p2};
    int nv = 3;
    for (int i = 0; i < P->n_instr; i++) {
        const instr *I = &P->in[i];
        tj_tensor *a = v[I->a % nv], *b = v[I->b % nv], *c = v[I->c % nv], *y;
        switch (I->kind) {
        case K_UN:
            y = unary(I->op, a);
            break;
        case K_BIN:
            y = binary(I->op, a, b);
            break;
        case K_SCALAR:
            y = I->scalar_first ? binary(I->op, host_scalar(I), a)
                                : binary(I->op, a, host_scalar(I));
            break;
        case K_CAST:
            y = tj_cast(a, (tj_dtype)I->dt);
            break;
        case K_WHERE:
            y = tj_where(tj_greater(a, tj_cast(tj_scalar_f64(0.5), tj_tensor_dtype(a))), b, c);
            break;
        case K_RED:
            y = reduce(I->op, a, I->n_axes, I->axes, I->keep);
            break;
        case K_MM:
            y = tj_matmul(a, tj_tensor_rank(a) >= 2 ? tj_transpose(a, NULL) : a);
            break;
        case K_SOFTMAX:
            y = I->op ? tj_softmax(a, -1) : tj_log_softmax(a, -1);
            break;
        default:
            y = view(I, a);
        }
        v[nv++] = y;
    }
    return tj_tuple(nv - 3, v + 3);
}

/* Float-only unary ops (by index in unary()): exp .. cos, isnan, isinf; logical_not is bool. */
static int pick_unary(int dt) {
    static const int fl[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17};
    static const int in[] = {0, 1, 2, 9};
    if (dt == TJ_BOOL)
        return 15;
    return dt == TJ_F32 || dt == TJ_F64 ? fl[rnd(17)] : in[rnd(4)];
}
/* Binary ops by dtype (index in binary()); int div/floordiv/mod/pow included: /0 is a run-time
 * error on both paths. */
static int pick_binary(int dt) {
    static const int bo[] = {7, 8, 9, 10, 11, 15, 16};
    if (dt == TJ_BOOL)
        return bo[rnd(7)];
    return rnd(15);
}
static int out_dtype(const instr *I, int adt, int bdt) {
    switch (I->kind) {
    case K_UN:
        return I->op >= 15 ? TJ_BOOL : adt;
    case K_BIN:
    case K_SCALAR:
        return I->op >= 9 ? TJ_BOOL : adt;
    case K_CAST:
        return I->dt;
    case K_WHERE:
        return bdt;
    case K_RED:
        return I->op >= 5 ? TJ_I64 : adt;
    default:
        return adt;
    }
}

static void random_program(program *P, const int *pdt, const int *prank) {
    int vdt[MAX_VALS], vrank[MAX_VALS];
    for (int k = 0; k < 3; k++)
        vdt[k] = pdt[k], vrank[k] = prank[k];
    P->n_params = 3;
    P->n_instr = 2 + rnd(MAX_INSTR - 1);
    for (int i = 0; i < P->n_instr; i++) {
        instr *I = &P->in[i];
        memset(I, 0, sizeof *I);
        int nv = 3 + i;
        I->kind = rnd(K_N);
        I->a = nv - 1 - rnd(nv < 3 ? nv : 3); /* mostly recent values: chains */
        int adt = vdt[I->a], same[MAX_VALS], ns = 0;
        for (int k = 0; k < nv; k++)
            if (vdt[k] == adt)
                same[ns++] = k;
        /* the second operand mostly of the first one's dtype: mismatches are errors */
        I->b = rnd(8) ? same[rnd(ns)] : rnd(nv);
        I->c = rnd(8) ? same[rnd(ns)] : rnd(nv);
        if (I->kind == K_WHERE) { /* b and c alike, a anything */
            int bdt = vdt[I->b];
            for (int k = 0; k < nv; k++)
                if (vdt[k] == bdt && rnd(2))
                    I->c = k;
        }
        if ((I->kind == K_SOFTMAX && (vrank[I->a] == 0 || adt > TJ_F64)) ||
            (I->kind == K_MM && (vrank[I->a] == 0 || adt == TJ_BOOL)))
            I->kind = K_UN;
        switch (I->kind) {
        case K_UN:
            I->op = pick_unary(adt);
            break;
        case K_BIN:
        case K_SCALAR:
            I->op = pick_binary(adt);
            break;
        case K_RED:
            I->op = adt == TJ_BOOL ? 2 + rnd(2) : rnd(7);
            break;
        case K_SOFTMAX:
            I->op = rnd(2);
            break;
        default:
            I->op = rnd(6);
        }
        I->dt = rnd(5);
        if (I->kind == K_SCALAR && rnd(2)) /* often the other operand's kind, as users write */
            I->dt = adt;
        static const double svals[] = {2.5,      -3,        0,    -0.0,         1,
                                       7,        1e30,      3e38, -1e-40,       0.5,
                                       INFINITY, -INFINITY, NAN,  2147483647.0, -2147483648.0};
        I->sv = svals[rnd((int)(sizeof svals / sizeof *svals))];
        I->is_static = rnd(3) == 0;
        I->scalar_first = rnd(2);
        int r = vrank[I->a];
        I->n_axes = r ? rnd(r < 2 ? 2 : 3) : 0;
        I->axes[0] = r ? rnd(r) - (rnd(2) ? r : 0) : 0;
        I->axes[1] = r ? rnd(r) : 0;
        if (I->n_axes == 2 && (I->axes[1] - I->axes[0]) % (r ? r : 1) == 0)
            I->n_axes = 1;
        I->keep = rnd(2);
        I->view = rnd(4);
        vdt[nv] = out_dtype(I, adt, vdt[I->b]);
        vrank[nv] = I->kind == K_RED ? (I->keep && I->op < 5 ? r : (I->n_axes ? r - I->n_axes : 0))
                    : I->kind == K_VIEW && I->view == 2 ? 1
                                                        : r;
        if (vrank[nv] < 0)
            vrank[nv] = 0;
    }
}

/* ---- inputs ---------------------------------------------------------------------------------- */
static double special(int dt) {
    static const double f[] = {INFINITY, -INFINITY, NAN,   -0.0, 0,  1e-40,  -1e-45,
                               1e30,     3e38,      -3e38, 1,    -1, 1e-310, 1e300};
    static const double i32[] = {2147483647.0, -2147483648.0, 0, -1, 1};
    static const double i64[] = {9223372036854775807.0, -9223372036854775808.0, 0, -1, 1};
    switch (dt) {
    case TJ_F32:
        return f[rnd(12)];
    case TJ_F64:
        return f[rnd(14)];
    case TJ_I32:
        return i32[rnd(5)];
    default:
        return i64[rnd(5)];
    }
}

static tj_tensor *random_input(int dt, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        double v = rnd(5) == 0 ? special(dt) : (double)(rnd(2001) - 1000) / 100.0;
        switch (dt) {
        case TJ_F32:
            ((float *)buf)[i] = (float)v;
            break;
        case TJ_F64:
            ((double *)buf)[i] = v;
            break;
        case TJ_I32:
            ((int32_t *)buf)[i] = fabs(v) < 2147483648.0 ? (int32_t)v : INT32_MIN;
            break;
        case TJ_I64:
            ((int64_t *)buf)[i] = fabs(v) < 9.2e18 ? (int64_t)v : (v > 0 ? INT64_MAX : INT64_MIN);
            break;
        default:
            ((uint8_t *)buf)[i] = (uint8_t)rnd(2);
        }
    }
    tj_tensor *t = tj_tensor_from_data((tj_dtype)dt, rank, dims, buf);
    free(buf);
    return t;
}

/* ---- comparison ------------------------------------------------------------------------------ */
static int strict;
static double tol; /* TJ_TEST_TOL: floats compared within it (relative), integers exactly */

static int close_f(double x, double y) {
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    if (isinf(x) || isinf(y))
        return x == y;
    return fabs(x - y) <= tol * (1 + fmax(fabs(x), fabs(y)));
}

static int same_elem(const tj_tensor *a, const tj_tensor *b, int64_t i) {
    const void *pa = tj_tensor_data(a), *pb = tj_tensor_data(b);
    if (tol > 0 && (tj_tensor_dtype(a) == TJ_F32 || tj_tensor_dtype(a) == TJ_F64))
        return close_f(tj_tensor_get_f64(a, i), tj_tensor_get_f64(b, i));
    switch (tj_tensor_dtype(a)) {
    case TJ_F32: {
        float x = ((const float *)pa)[i], y = ((const float *)pb)[i];
        return (isnan(x) && isnan(y)) || memcmp(&x, &y, 4) == 0;
    }
    case TJ_F64: {
        double x = ((const double *)pa)[i], y = ((const double *)pb)[i];
        return (isnan(x) && isnan(y)) || memcmp(&x, &y, 8) == 0;
    }
    default:
        return memcmp((const char *)pa + i * tj_dtype_size(tj_tensor_dtype(a)),
                      (const char *)pb + i * tj_dtype_size(tj_tensor_dtype(a)),
                      tj_dtype_size(tj_tensor_dtype(a))) == 0;
    }
}

/* The eager run's status: the first error among the returned values (errors are sticky). */
static tj_status eager_status(const tj_tensor *r, const char **msg) {
    *msg = tj_error_message(r);
    if (tj_status_of(r))
        return tj_status_of(r);
    for (int k = 0; k < tj_tuple_size(r); k++) {
        const tj_tensor *x = tj_tuple_get(r, k);
        if (tj_status_of(x)) {
            *msg = tj_error_message(x);
            return tj_status_of(x);
        }
    }
    return TJ_OK;
}

/* Whether the eager run produced this error (code and message) among its values. */
static int eager_has(const tj_tensor *r, tj_status code, const char *msg) {
    for (int k = 0; k < tj_tuple_size(r); k++) {
        const tj_tensor *x = tj_tuple_get(r, k);
        if (tj_status_of(x) == code && !strcmp(tj_error_message(x), msg))
            return 1;
    }
    return tj_status_of(r) == code && !strcmp(tj_error_message(r), msg);
}

/* Statuses agree when both succeed, or when the compiled run's error is one the eager run met.
 * A trace checks every op's dtypes and shapes before anything runs, so where eager execution met
 * a run-time error (/0) first and passed it on to later ops, the compiled run may report a later
 * op's dtype or shape error instead: any error is then right. */
static void compare(int it, const tj_tensor *eager, const tj_tensor *comp, int *n_values) {
    const char *em;
    tj_status se = eager_status(eager, &em), sc = tj_status_of(comp);
    int agree = se == TJ_OK ? sc == TJ_OK
                : se == TJ_ERR_RUNTIME
                    ? sc != TJ_OK /* later ops got eager's error instead */
                    : sc != TJ_OK && eager_has(eager, sc, tj_error_message(comp));
    CHECK_MSG(agree, "program %d: eager %s (%s), compiled %s (%s)", it, tj_status_name(se), em,
              tj_status_name(sc), tj_error_message(comp));
    if (se || sc)
        return;
    CHECK_EQ_INT(tj_tuple_size(eager), tj_tuple_size(comp));
    for (int k = 0; k < tj_tuple_size(eager) && k < tj_tuple_size(comp); k++) {
        const tj_tensor *a = tj_tuple_get(eager, k), *b = tj_tuple_get(comp, k);
        int same = tj_tensor_dtype(a) == tj_tensor_dtype(b) &&
                   tj_tensor_rank(a) == tj_tensor_rank(b) &&
                   !memcmp(tj_tensor_dims(a), tj_tensor_dims(b),
                           (size_t)tj_tensor_rank(a) * sizeof(int64_t));
        CHECK_MSG(same, "program %d value %d: dtype or shape differ", it, k);
        if (!same || !strict || tj_tensor_dtype(a) == TJ_STRING)
            continue;
        int64_t bad = -1;
        for (int64_t i = 0; i < tj_tensor_numel(a) && bad < 0; i++)
            if (!same_elem(a, b, i))
                bad = i;
        CHECK_MSG(bad < 0, "program %d value %d element %lld: eager %.17g, compiled %.17g", it, k,
                  (long long)bad, bad >= 0 ? tj_tensor_get_f64(a, bad) : 0.0,
                  bad >= 0 ? tj_tensor_get_f64(b, bad) : 0.0);
        (*n_values)++;
    }
}

static void dump(int it, const program *P, int const *pdt, int const *prank, int64_t pd[3][3]) {
    fprintf(stderr, "program %d:\n", it);
    for (int k = 0; k < 3; k++)
        fprintf(stderr, "  p%d: %s rank %d [%lld,%lld,%lld]\n", k, tj_dtype_name((tj_dtype)pdt[k]),
                prank[k], (long long)pd[k][0], (long long)pd[k][1], (long long)pd[k][2]);
    for (int i = 0; i < P->n_instr; i++) {
        const instr *I = &P->in[i];
        fprintf(stderr,
                "  v%d = kind %d op %d (v%d, v%d, v%d) dt %d sv %g static %d axes %d:%d,%d "
                "keep %d view %d\n",
                i + 3, I->kind, I->op, I->a % (3 + i), I->b % (3 + i), I->c % (3 + i), I->dt, I->sv,
                I->is_static, I->n_axes, I->axes[0], I->axes[1], I->keep, I->view);
    }
}

int main(void) {
    const char *env = getenv("TJ_TEST_SEED");
    const char *exact = getenv("TJ_EXACT_MATH"), *backend = getenv("TJ_BACKEND");
    strict = (exact && !strcmp(exact, "1")) || (backend && !strcmp(backend, "interp"));
    const char *t = getenv("TJ_TEST_TOL");
    tol = t ? strtod(t, NULL) : 0;
    strict |= tol > 0;
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (TJ_TEST_SEED=%llu to replay), %s comparison\n", (unsigned long long)seed,
           (unsigned long long)seed,
           tol > 0  ? "within a tolerance"
           : strict ? "bitwise"
                    : "status/dtype/shape");
    rng = seed * 2654435761u + 1;
    int n_ok = 0, n_values = 0;
    for (int it = 0; it < N_PROGRAMS; it++) {
        tj_scope_begin();
        program P;
        /* parameter shapes: sub-shapes of one base shape, sometimes with a size-0 dim */
        static const int64_t sizes[] = {1, 2, 3, 5, 8, 17, 70};
        int rank = rnd(4), pdt[3], prank[3];
        int64_t base[3] = {1, 1, 1}, pd[3][3] = {{0}};
        for (int d = 0; d < rank; d++)
            base[d] = sizes[rnd(rank == 1 ? 7 : 5)];
        if (rank && rnd(6) == 0)
            base[rnd(rank)] = 0;
        tj_tensor *args[3];
        for (int k = 0; k < 3; k++) {
            prank[k] = rank - (rnd(3) == 0 ? rnd(rank + 1) : 0);
            for (int j = 0; j < prank[k]; j++)
                pd[k][j] = rnd(4) == 0 ? 1 : base[rank - prank[k] + j];
            pdt[k] = k == 0 ? rnd(2) : rnd(5); /* the first one a float: most ops apply */
            args[k] = random_input(pdt[k], prank[k], pd[k]);
        }
        random_program(&P, pdt, prank);
        cur = &P;
        tj_function *f = tj_function_new("random_program", (void *)run_program, 3, NULL);
        tj_tensor *eager = tj_call_eager(f, 3, args);
        tj_tensor *comp = tj_call(f, 3, args);
        int before = check_failures_;
        compare(it, eager, comp, &n_values);
        if (check_failures_ != before)
            dump(it, &P, pdt, prank, pd);
        n_ok += tj_status_of(comp) == TJ_OK;
        tj_function_free(f);
        tj_scope_end();
    }
    printf("%d programs, %d ran without error, %d values compared bit for bit\n", N_PROGRAMS, n_ok,
           n_values);
    CHECK(n_ok >= N_PROGRAMS / 5); /* the generator must mostly make valid programs */
    return check_done();
}
