/* test_cpu_approx.c — the CPU JIT's vectorized exp, log, tanh and sigmoid (jit/cpu/llvm/approx.c):
 * max error in ULP against the correctly rounded result (double libm for f32, long double for
 * f64) on a sweep over the bit patterns of each range plus uniform random points, at most the
 * bounds stated in approx.c (f32: exp 1.5, log 1, tanh 2.5, sigmoid 2.5; f64 the same); specials
 * (NaN, +-inf, +-0, denormals, huge, tiny, overflow and underflow edges) classed as the reference
 * kernels class them; odd sizes; the fused loop with tanh vectorized (the optimized IR under
 * TJ_DUMP holds <N x float> and no call to tanhf); and, in a forked child with TJ_EXACT_MATH=1,
 * results bit-identical to the reference kernels. TJ_APPROX_POINTS=<n> sets the sweep size (default
 * 2^20 per op and dtype). */
#include <dirent.h>
#include <float.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "test_cpu_util.h"

enum { EXP, LOG, TANH, SIGMOID, N_FN };
static const int fn_op[N_FN] = {IR_OP_EXP, IR_OP_LOG, IR_OP_TANH, IR_OP_SIGMOID};
static const char *const fn_name[N_FN] = {"exp", "log", "tanh", "sigmoid"};
/* the bounds stated in approx.c, in ULP */
static const double bound32[N_FN] = {1.5, 1, 2.5, 2.5}, bound64[N_FN] = {1.5, 1, 2.5, 2.5};
/* ranges swept: [lo, hi]; log sweeps every positive float */
static const double lo_[N_FN] = {-104, 0, -10, -110}, hi_[N_FN] = {89, FLT_MAX, 10, 110};
static const double lo64[N_FN] = {-746, 0, -25, -750}, hi64[N_FN] = {710, DBL_MAX, 25, 750};

static long double truth(int f, long double x) {
    switch (f) {
    case EXP:
        return expl(x);
    case LOG:
        return logl(x);
    case TANH:
        return tanhl(x);
    default:
        return 1.0L / (1.0L + expl(-x));
    }
}

/* |r - t| in units of the last place of the type at t (mant bits, min/max exponents). Infinite
 * values (and true values that large) count as 2^(emax+1): inf for a true value just past the
 * largest finite one is 1 ulp. */
static double ulp_err(double r, long double t, int mant, int emin, int emax) {
    if (isnan(t) || isnan(r))
        return isnan(t) && isnan(r) ? 0 : INFINITY;
    long double big = ldexpl(1, emax + 1);
    long double rr = isinf(r) ? copysignl(big, r) : r;
    long double tt = fabsl(t) >= big ? copysignl(big, t) : t;
    int ex;
    frexpl(fabsl(tt), &ex);
    int ue = ex - mant;
    ue = ue < emin - mant + 1 ? emin - mant + 1 : ue > emax + 1 - mant ? emax + 1 - mant : ue;
    if (tt == 0)
        ue = emin - mant + 1;
    return (double)(fabsl(rr - tt) / ldexpl(1, ue));
}
static double ulp_of(int dt, double r, long double t) {
    return dt == TJ_F32 ? ulp_err(r, t, 24, -126, 127) : ulp_err(r, t, 53, -1022, 1023);
}

/* Runs op over x both compiled and with the interpreter. */
static void run_both(int op, const tj_tensor *x, tj_tensor **got, tj_tensor **want) {
    *got = *want = NULL;
    ir_graph *g = ir_graph_new("approx");
    uint32_t p = tu_param(g, 0, x->dtype, 1, &x->numel);
    ir_add_output(g, tu_un(g, op, p));
    rt_program *c = jit_cpu_compile(g);
    rt_program *ref = rt_interp_new(g);
    CHECK_MSG(c && ref, "%s: %s", ir_ops[op].name, ir_last_error());
    tj_tensor *args[1] = {(tj_tensor *)x};
    if (c)
        CHECK(tu_run(c, args, 1, got) == TJ_OK);
    if (ref)
        CHECK(tu_run(ref, args, 1, want) == TJ_OK);
    if (c)
        c->vt->free(c);
    if (ref)
        ref->vt->free(ref);
    ir_graph_free(g);
}

/* n points of dtype dt in [lo, hi]: half walk the bit patterns (every binade), half uniform. */
static tj_tensor *sweep(int dt, double lo, double hi, int64_t n) {
    tj_tensor *t = rt_tensor_alloc(dt, 1, &n);
    int64_t half = n / 2;
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (i < half) { /* from 0 to lo for even i (when lo < 0), to hi for odd i */
            double lim = i % 2 || lo >= 0 ? hi : lo;
            double frac = (double)(i / 2) / (double)(half / 2 + 1);
            if (dt == TJ_F32) {
                float fl = (float)fabs(lim);
                uint32_t top;
                memcpy(&top, &fl, 4);
                uint32_t bits = (uint32_t)(frac * top);
                memcpy(&fl, &bits, 4);
                v = copysign(fl, lim);
            } else {
                double dl = fabs(lim);
                uint64_t top, bits;
                memcpy(&top, &dl, 8);
                bits = (uint64_t)(frac * (double)top);
                memcpy(&dl, &bits, 8);
                v = copysign(dl, lim);
            }
        } else {
            double l = lo, h = hi > 1e6 ? 1e6 : hi;
            v = tu_unif(l, h);
        }
        if (dt == TJ_F32)
            ((float *)t->data)[i] = (float)v;
        else
            ((double *)t->data)[i] = v;
    }
    return t;
}

/* Max ULP error of got vs the truth over x; the same for the reference kernel (information). */
static void check_ulp(int f, const tj_tensor *x, const tj_tensor *got, const tj_tensor *want,
                      double bound, const char *what) {
    double worst = 0, worst_ref = 0, wx = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        double xi = tu_get(x, i), r = tu_get(got, i);
        long double t = x->dtype == TJ_F32 ? (long double)truth(f, (double)xi) : truth(f, xi);
        if (x->dtype == TJ_F32) /* the f32 truth is double libm's, rounded to double */
            t = (long double)(double)t;
        double e = ulp_of(x->dtype, r, t), er = ulp_of(x->dtype, tu_get(want, i), t);
        if (!(e <= worst)) {
            worst = e;
            wx = xi;
        }
        /* the reference flushes sigmoid to 0 below -88.7 (exp(-x) overflows); the truth does not */
        if (er > worst_ref && !(f == SIGMOID && xi < -80))
            worst_ref = er;
    }
    CHECK_MSG(worst <= bound, "%s: max error %.3f ulp at x = %.9g (bound %g)", what, worst, wx,
              bound);
    printf("%-12s %9lld points: max %.3f ulp (reference kernel %.3f ulp)\n", what,
           (long long)x->numel, worst, worst_ref);
}

static void test_sweeps(int64_t n) {
    char what[64];
    for (int f = 0; f < N_FN; f++) {
        for (int d = 0; d < 2; d++) {
            int dt = d ? TJ_F64 : TJ_F32;
            snprintf(what, sizeof what, "%s %s", fn_name[f], ir_dtype_short(dt));
            tj_tensor *x = d ? sweep(dt, lo64[f], hi64[f], n / 4) : sweep(dt, lo_[f], hi_[f], n);
            tj_tensor *got, *want;
            run_both(fn_op[f], x, &got, &want);
            if (got && want)
                check_ulp(f, x, got, want, d ? bound64[f] : bound32[f], what);
            tj_release(x);
            tj_release(got);
            tj_release(want);
        }
    }
}

/* Specials: NaN-ness, infinities, zeros and their signs as the reference; the rest within the
 * bound. Every size from 1 to 40 so each value lands in vector bodies and scalar tails. */
static void test_specials(void) {
    static const double sp[] = {NAN,    -NAN,      INFINITY, -INFINITY, 0.0,      -0.0,    1e-45,
                                -1e-45, 1e-40,     -1e-40,   FLT_MIN,   -FLT_MIN, 1e-30,   -1e-30,
                                1e30,   -1e30,     FLT_MAX,  -FLT_MAX,  88.72283, 88.7229, 89,
                                -87.33, -103.9,    -104.5,   -88.8,     9.1,      -9.1,    0.625,
                                -0.625, 0.6249999, 1,        -1,        2,        0.5,     DBL_MIN,
                                5e-324, 709.78,    709.79,   -745.1,    -746,     1e300,   -1e300};
    int nsp = (int)(sizeof sp / sizeof sp[0]);
    char what[64];
    for (int f = 0; f < N_FN; f++) {
        for (int d = 0; d < 2; d++) {
            int dt = d ? TJ_F64 : TJ_F32;
            for (int64_t n = 1; n <= 40; n += n < 20 ? 1 : 7) {
                tj_tensor *x = rt_tensor_alloc(dt, 1, &n);
                for (int64_t i = 0; i < n; i++) {
                    double v = sp[(i + n) % nsp];
                    if (d)
                        ((double *)x->data)[i] = v;
                    else
                        ((float *)x->data)[i] = (float)v;
                }
                tj_tensor *got, *want;
                run_both(fn_op[f], x, &got, &want);
                snprintf(what, sizeof what, "%s %s n=%lld", fn_name[f], ir_dtype_short(dt),
                         (long long)n);
                for (int64_t i = 0; got && want && i < n; i++) {
                    double xi = tu_get(x, i), r = tu_get(got, i), w = tu_get(want, i);
                    long double t = d ? truth(f, xi) : (long double)(double)truth(f, xi);
                    bool cls = isnan(w) || isinf(w) || w == 0;
                    /* sigmoid's tiny results: the reference flushes to 0, approx.c does not */
                    if (f == SIGMOID && w == 0 && xi < 0)
                        cls = false;
                    if (cls)
                        CHECK_MSG((isnan(r) && isnan(w)) || (r == w && signbit(r) == signbit(w)),
                                  "%s: x = %.9g: %.9g, reference %.9g", what, xi, r, w);
                    else
                        CHECK_MSG(ulp_of(dt, r, t) <= (d ? bound64[f] : bound32[f]) &&
                                      (f != SIGMOID || (r >= 0 && r <= 1)),
                                  "%s: x = %.9g: %.17g, truth %.17Lg", what, xi, r, t);
                }
                tj_release(x);
                tj_release(got);
                tj_release(want);
            }
        }
    }
}

/* The benchmark's loop tanh(x*a + b)*c - x must vectorize: its optimized IR works on <N x float>
 * and calls nothing (no tanhf). The first compile of the process: every dump is its. */
static void test_vectorized(const char *dump) {
    ir_graph *g = ir_graph_new("tanh_loop");
    int64_t n = 4099;
    uint32_t x = tu_param(g, 0, TJ_F32, 1, &n);
    uint32_t v = tu_bin(g, IR_OP_MUL, x, tu_const_f64(g, TJ_F32, 0.75));
    v = tu_bin(g, IR_OP_ADD, v, tu_const_f64(g, TJ_F32, 0.25));
    v = tu_bin(g, IR_OP_MUL, tu_un(g, IR_OP_TANH, v), tu_const_f64(g, TJ_F32, 1.5));
    ir_add_output(g, tu_bin(g, IR_OP_SUB, v, x));
    rt_program *p = jit_cpu_compile(g);
    CHECK_MSG(p != NULL, "%s", ir_last_error());
    int n_files = 0, n_vec = 0, n_call = 0;
    DIR *dir = opendir(dump);
    struct dirent *de;
    while (dir && (de = readdir(dir))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 7, ".opt.ll") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dump, de->d_name);
        FILE *fp = fopen(path, "r");
        char line[4096];
        bool vec = false, call = false;
        while (fp && fgets(line, sizeof line, fp)) {
            vec |= strstr(line, " x float>") != NULL; /* <16 x float> here (AVX-512) */
            call |= strstr(line, "@tanhf") != NULL;
        }
        if (fp)
            fclose(fp);
        n_files++;
        n_vec += vec;
        n_call += call;
    }
    if (dir)
        closedir(dir);
    CHECK_MSG(n_files >= 1 && n_vec == n_files && n_call == 0, "%d modules, %d vectorized, %d call",
              n_files, n_vec, n_call);
    /* and it computes the right thing */
    tj_tensor *a = tu_random(TJ_F32, 1, &n, 1), *got = NULL, *want = NULL;
    rt_program *ref = rt_interp_new(g);
    CHECK(p && tu_run(p, &a, 1, &got) == TJ_OK);
    CHECK(ref && tu_run(ref, &a, 1, &want) == TJ_OK);
    int64_t first = -1;
    CHECK_MSG(got && want && tu_diff(got, want, 1e-6, &first) == 0, "first %lld", (long long)first);
    tj_release(a);
    tj_release(got);
    tj_release(want);
    if (p)
        p->vt->free(p);
    if (ref)
        ref->vt->free(ref);
    ir_graph_free(g);
}

/* In exact mode (TJ_EXACT_MATH=1): bit-identical to the reference kernels, specials included. */
static int exact_child(void) {
    for (int f = 0; f < N_FN; f++) {
        for (int d = 0; d < 2; d++) {
            int dt = d ? TJ_F64 : TJ_F32;
            int64_t n = 10007;
            tj_tensor *x = d ? sweep(dt, lo64[f], hi64[f], n) : sweep(dt, lo_[f], hi_[f], n);
            tj_tensor *s = tu_random(dt, 1, &n, 1);
            for (int k = 0; k < 2; k++) {
                tj_tensor *in = k ? s : x, *got, *want;
                run_both(fn_op[f], in, &got, &want);
                int64_t first = -1, bad = tu_diff(got, want, 0, &first);
                CHECK_MSG(bad == 0, "exact %s %s: %lld differ, first x = %.17g", fn_name[f],
                          ir_dtype_short(dt), (long long)bad, first >= 0 ? tu_get(in, first) : 0.0);
                tj_release(got);
                tj_release(want);
            }
            tj_release(x);
            tj_release(s);
        }
    }
    return check_done();
}

static void rm_dir(const char *d) {
    DIR *dir = opendir(d);
    struct dirent *de;
    char path[1024];
    while (dir && (de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", d, de->d_name);
        unlink(path);
    }
    if (dir)
        closedir(dir);
    rmdir(d);
}

int main(void) {
    /* the environment is read once: set it before anything reads it. No disk cache: a kernel
     * compiled in the other math mode must not be loaded. */
    setenv("TJ_CACHE", "0", 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TJ_EXACT_MATH", "1", 1);
        if (!jit_cpu_available())
            _exit(77);
        exit(exact_child());
    }
    char dump[] = "/tmp/tj_approx_XXXXXX";
    CHECK(mkdtemp(dump) != NULL);
    setenv("TJ_DUMP", dump, 1);
    unsetenv("TJ_EXACT_MATH");
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        waitpid(pid, NULL, 0);
        rm_dir(dump);
        return 77;
    }
    const char *pts = getenv("TJ_APPROX_POINTS");
    int64_t n = pts ? strtoll(pts, NULL, 10) : 1 << 20;
    test_vectorized(dump);
    test_specials();
    test_sweeps(n > 16 ? n : 16);
    rm_dir(dump);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exact-mode child: status %d", status);
    return check_done();
}
