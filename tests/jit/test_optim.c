/* Optimizers against the update rules written out here in double (Keras' SGD, momentum,
 * Nesterov and Adam), eagerly and inside a compiled step; their slots and counter; the data
 * helpers (IDX files plain and gzip, every corruption named with its offset; seeded indices);
 * Glorot's limits. */
#include <tracejit.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "native_first.h"

static const float x0v[4] = {1.0f, -2.0f, 0.5f, 3.0f};

/* loss = sum((w - t)^2) / 2: the gradient is w - t */
static const float target[4] = {0.25f, 0.5f, -1.0f, 2.0f};

static tj_variable *w;
static tj_optimizer *opt;

static tj_tensor *grad_of(tj_tensor *wv) {
    int64_t d[1] = {4};
    return tj_sub(wv, tj_tensor_from_data(TJ_F32, 1, d, target));
}

static tj_tensor *step(tj_tensor *unused) {
    (void)unused;
    tj_tensor *g = grad_of(tj_variable_read(w));
    tj_status st = tj_optimizer_apply(opt, 1, &w, &g);
    return st ? tj_error_new(st, "%s", tj_last_error()) : tj_variable_read(w);
}

/* kind: 0 sgd, 1 momentum, 2 nesterov, 3 adam */
static void reference(int kind, int steps, double *out) {
    double v[4], m[4] = {0}, s[4] = {0}, lr = 0.1, mom = 0.9, b1 = 0.9, b2 = 0.999, eps = 1e-7;
    for (int i = 0; i < 4; i++)
        v[i] = x0v[i];
    for (int t = 1; t <= steps; t++)
        for (int i = 0; i < 4; i++) {
            double g = (double)(float)((float)v[i] - target[i]);
            if (kind == 0) {
                v[i] -= lr * g;
            } else if (kind < 3) {
                m[i] = mom * m[i] - lr * g;
                v[i] += kind == 1 ? m[i] : mom * m[i] - lr * g;
            } else {
                /* the bias corrections in float32, as the variable's dtype (and TensorFlow) */
                float b1p = powf((float)b1, (float)t), b2p = powf((float)b2, (float)t);
                double alpha = (float)((float)lr * sqrtf(1 - b2p)) / (1 - b1p);
                m[i] += (g - m[i]) * (1 - b1);
                s[i] += (g * g - s[i]) * (1 - b2);
                v[i] -= m[i] * alpha / (sqrt(s[i]) + eps);
            }
            v[i] = (double)(float)v[i];
            m[i] = (double)(float)m[i];
            s[i] = (double)(float)s[i];
        }
    memcpy(out, v, sizeof v);
}

static void run(int kind, int compiled) {
    int64_t d[1] = {4};
    tj_tensor *init = tj_tensor_from_data(TJ_F32, 1, d, x0v);
    w = tj_variable_new(init, "w");
    tj_release(init);
    opt =
        kind == 3 ? tj_adam_new(0.1, 0.9, 0.999, 1e-7) : tj_sgd_new(0.1, kind ? 0.9 : 0, kind == 2);
    tj_function *f = tj_function_new("step", (void *)step, 1, NULL);
    tj_tensor *dummy = tj_scalar_f32(0);
    for (int t = 0; t < 5; t++) {
        tj_tensor *r = compiled ? tj_call(f, 1, &dummy) : tj_call_eager(f, 1, &dummy);
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        tj_release(r);
    }
    double want[4];
    reference(kind, 5, want);
    tj_tensor *got = tj_variable_read(w);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(fabs(tj_tensor_get_f64(got, i) - want[i]) <= 2e-6 * fmax(1, fabs(want[i])),
                  "kind %d %s: w[%d] = %.9g, want %.9g", kind, compiled ? "compiled" : "eager", i,
                  tj_tensor_get_f64(got, i), want[i]);
    tj_release(got);
    /* the counter and the slots */
    tj_variable *it = tj_optimizer_iterations(opt);
    tj_tensor *n = tj_variable_read(it);
    CHECK_EQ_INT(tj_tensor_get_f64(n, 0), 5);
    CHECK_EQ_INT(tj_tensor_dtype(n), TJ_I64);
    tj_release(n);
    if (kind == 3) {
        CHECK(tj_optimizer_slot(opt, w, "m") != NULL && tj_optimizer_slot(opt, w, "v") != NULL);
        CHECK_STR(tj_variable_name(tj_optimizer_slot(opt, w, "v")), "w/v");
    }
    CHECK(tj_optimizer_slot(opt, w, "nope") == NULL);
    if (compiled)
        CHECK_EQ_INT(tj_function_trace_count(f), tj_get_eager() ? 0 : 1);
    tj_release(dummy);
    tj_function_free(f);
    tj_optimizer_free(opt);
    tj_variable_free(w);
}

/* Eager Adam runs as one kernel (api/optim.c) outside tapes and numerics checks; with the checks
 * on it runs op by op. Both must give the same bits: variable and slots, f32 and f64, a variable
 * of one chunk and one split over the pool. */
static void eager_adam_exact(int dt, int64_t n) {
    tj_variable *v[2];
    tj_optimizer *o[2];
    for (int k = 0; k < 2; k++) {
        tj_tensor *init = tj_random_uniform((tj_dtype)dt, 1, &n, -1, 1, 7);
        v[k] = tj_variable_new(init, "p");
        tj_release(init);
        o[k] = tj_adam_new(0.01, 0.9, 0.999, 1e-7);
    }
    for (int t = 0; t < 4; t++) {
        tj_tensor *g = tj_random_normal((tj_dtype)dt, 1, &n, 0, 1, 100 + (uint64_t)t);
        for (int k = 0; k < 2; k++) {
            if (k == 1)
                tj_enable_check_numerics();
            CHECK_EQ_INT(tj_optimizer_apply(o[k], 1, &v[k], &g), TJ_OK);
            if (k == 1)
                tj_disable_check_numerics();
        }
        tj_release(g);
    }
    const char *slots[3] = {NULL, "m", "v"};
    for (int s = 0; s < 3; s++) {
        tj_tensor *a = tj_variable_read(s ? tj_optimizer_slot(o[0], v[0], slots[s]) : v[0]),
                  *b = tj_variable_read(s ? tj_optimizer_slot(o[1], v[1], slots[s]) : v[1]);
        CHECK_MSG(
            memcmp(tj_tensor_data(a), tj_tensor_data(b), (size_t)n * (dt == TJ_F32 ? 4 : 8)) == 0,
            "eager adam %s n=%lld: %s differs between one kernel and op by op",
            dt == TJ_F32 ? "f32" : "f64", (long long)n, s ? slots[s] : "the variable");
        tj_release(a);
        tj_release(b);
    }
    for (int k = 0; k < 2; k++) {
        tj_optimizer_free(o[k]);
        tj_variable_free(v[k]);
    }
}

static void optimizer_errors(void) {
    tj_scope_begin();
    CHECK(tj_adam_new(-1, 0.9, 0.999, 1e-7) == NULL);
    CHECK_HAS(tj_last_error(), "adam_new");
    CHECK(tj_adam_new(0.1, 1.0, 0.999, 1e-7) == NULL);
    CHECK(tj_sgd_new(NAN, 0, 0) == NULL);
    tj_optimizer *o = tj_adam_new(0.1, 0.9, 0.999, 1e-7);
    int64_t d[1] = {4};
    tj_variable *v = tj_variable_new(tj_zeros(TJ_F32, 1, d), "v");
    tj_tensor *bad = tj_zeros(TJ_F32, 1, (int64_t[]){3});
    CHECK_EQ_INT(tj_optimizer_apply(o, 1, &v, &bad), TJ_ERR_SHAPE);
    CHECK_HAS(tj_last_error(), "gradient 0 is float32[3], variable 'v' is float32[4]");
    tj_tensor *none = NULL;
    CHECK_EQ_INT(tj_optimizer_apply(o, 1, &v, &none), TJ_OK); /* no gradient: unchanged */
    CHECK(tj_optimizer_slot(o, v, "m") == NULL);
    tj_variable *iv = tj_variable_new(tj_zeros(TJ_I32, 1, d), "counter");
    tj_tensor *ig = tj_zeros(TJ_I32, 1, d);
    CHECK_EQ_INT(tj_optimizer_apply(o, 1, &iv, &ig), TJ_ERR_DTYPE);
    CHECK_EQ_INT(tj_optimizer_apply(o, 1, NULL, NULL), TJ_ERR_INVALID);
    /* build (Keras' optimizer.build): the counter and v's slots, zeros, before any step */
    CHECK_EQ_INT(tj_optimizer_build(o, 1, &iv), TJ_ERR_DTYPE);
    CHECK_HAS(tj_last_error(), "optimizer_build: variable 'counter' is int32, not a float");
    CHECK_EQ_INT(tj_optimizer_build(o, -1, &v), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_optimizer_build(o, 1, &v), TJ_OK);
    CHECK_EQ_INT(tj_optimizer_build(o, 1, &v), TJ_OK); /* again: the same slots */
    tj_variable *all[4] = {0};
    CHECK_EQ_INT(tj_optimizer_variables(o, 4, all), 3);
    CHECK(all[0] == tj_optimizer_iterations(o));
    CHECK(all[1] == tj_optimizer_slot(o, v, "m") && all[2] == tj_optimizer_slot(o, v, "v"));
    CHECK_STR(tj_variable_name(all[1]), "v/m");
    CHECK_EQ_INT(tj_optimizer_variables(o, 1, all), 3); /* the count; only cap written */
    CHECK_EQ_INT(tj_optimizer_variables(o, -1, all), -1);
    tj_optimizer_free(o);
    CHECK_EQ_INT(tj_optimizer_apply(o, 1, &v, &bad), TJ_ERR_STATE);
    CHECK_HAS(tj_last_error(), "freed");
    tj_optimizer_free(NULL);
    tj_variable_free(v);
    tj_variable_free(iv);
    tj_scope_end();
}

/* Adam on two variables of different shapes: the per-variable update kernels are the same code
 * (the loop's range is an argument), so the CPU backend compiles them once. */
static tj_variable *two[2];
static int n_shared;
static void log_sink(const char *topic, const char *msg, void *user) {
    (void)topic;
    (void)user;
    const char *p = strstr(msg, "(+"); /* a compile */
    if (!p)
        p = strstr(msg, "; +"); /* a cache hit */
    if (p)
        n_shared += atoi(p + 2);
}
static tj_tensor *two_step(tj_tensor *unused) {
    (void)unused;
    tj_tensor *g[2] = {tj_sin(tj_variable_read(two[0])), tj_sin(tj_variable_read(two[1]))};
    tj_status st = tj_optimizer_apply(opt, 2, two, g);
    return st ? tj_error_new(st, "%s", tj_last_error()) : tj_variable_read(two[1]);
}
static void shared_kernels(void) {
    if (tj_get_eager())
        return;
    tj_scope_begin();
    int64_t d0[1] = {3700}, d1[2] = {30, 50};
    two[0] = tj_variable_new(tj_ones(TJ_F32, 1, d0), "a");
    two[1] = tj_variable_new(tj_ones(TJ_F32, 2, d1), "b");
    opt = tj_adam_new(0.01, 0.9, 0.999, 1e-7);
    tj_function *f = tj_function_new("two_step", (void *)two_step, 1, NULL);
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");
    tj_tensor *x = tj_scalar_f32(0);
    tj_tensor *r = tj_call(f, 1, &x);
    tj_set_log_topics("");
    tj_set_log(NULL, NULL);
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    const char *be = getenv("TJ_BACKEND");
    if ((!be || strcmp(be, "interp")) && !tj_backend_unavailable("cpu"))
        CHECK_MSG(n_shared >= 1, "no kernel was shared (%d)", n_shared);
    /* both variables moved by Adam's first step: lr * sign(g) */
    tj_tensor *a = tj_variable_read(two[0]);
    CHECK_NEAR(tj_tensor_get_f64(a, 0), 1 - 0.01, 1e-6);
    tj_release(r);
    tj_function_free(f);
    tj_optimizer_free(opt);
    tj_variable_free(two[0]);
    tj_variable_free(two[1]);
    tj_scope_end();
}

/* ---- data ------------------------------------------------------------------------------------ */
static void write_file(const char *path, const unsigned char *b, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, b, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

static void idx_files(void) {
    tj_scope_begin();
    char dir[] = "/tmp/tj_idx_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[256];
    /* ubyte [2, 3]: 0..5 */
    unsigned char ok[4 + 8 + 6] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 2, 3, 4, 255};
    for (int gz = 0; gz < 2; gz++) {
        snprintf(p, sizeof p, "%s/ok%s", dir, gz ? ".gz" : "");
        write_file(p, ok, sizeof ok, gz);
        tj_tensor *t = tj_idx_load(p);
        CHECK_MSG(tj_status_of(t) == TJ_OK, "%s", tj_error_message(t));
        CHECK_EQ_INT(tj_tensor_rank(t), 2);
        CHECK_EQ_INT(tj_tensor_dims(t)[1], 3);
        CHECK_EQ_INT(tj_tensor_get_f64(t, 5), 255);
        CHECK_EQ_INT(tj_tensor_dtype(t), TJ_I32);
        unlink(p);
    }
    /* float32 big-endian and signed bytes */
    unsigned char fl[4 + 4 + 8] = {0, 0, 0x0D, 1, 0, 0, 0, 2, 0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0};
    snprintf(p, sizeof p, "%s/f", dir);
    write_file(p, fl, sizeof fl, 0);
    tj_tensor *t = tj_idx_load(p);
    CHECK(tj_tensor_get_f64(t, 0) == 1.0 && tj_tensor_get_f64(t, 1) == -2.0);
    unsigned char sb[4 + 4 + 2] = {0, 0, 0x09, 1, 0, 0, 0, 2, 0xff, 0x7f};
    write_file(p, sb, sizeof sb, 0);
    t = tj_idx_load(p);
    CHECK(tj_tensor_get_f64(t, 0) == -1 && tj_tensor_get_f64(t, 1) == 127);
    /* corruptions, each named with its offset */
    struct {
        size_t n;
        unsigned char first;
        unsigned char type;
        const char *msg;
    } bad[] = {{3, 0, 8, "truncated header at byte 0"},
               {sizeof ok, 1, 8, "bad magic at byte 0"},
               {sizeof ok, 0, 0x42, "unknown element type at byte 2"},
               {10, 0, 8, "truncated dimension at byte 8"},
               {sizeof ok - 2, 0, 8, "truncated data at byte 16"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char b[sizeof ok];
        memcpy(b, ok, sizeof ok);
        b[0] = bad[i].first;
        b[2] = bad[i].type;
        snprintf(p, sizeof p, "%s/bad%zu.gz", dir, i);
        write_file(p, b, bad[i].n, 1);
        t = tj_idx_load(p);
        CHECK_EQ_INT(tj_status_of(t), TJ_ERR_CORRUPT);
        CHECK_HAS(tj_error_message(t), bad[i].msg);
        CHECK_HAS(tj_error_message(t), p);
        unlink(p);
    }
    unsigned char extra[sizeof ok + 1];
    memcpy(extra, ok, sizeof ok);
    snprintf(p, sizeof p, "%s/extra", dir);
    write_file(p, extra, sizeof extra, 0);
    CHECK_HAS(tj_error_message(tj_idx_load(p)), "unexpected bytes after the data at byte 18");
    unsigned char huge[4 + 16] = {0,    0,    8,    4,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    write_file(p, huge, sizeof huge, 0);
    CHECK_EQ_INT(tj_status_of(tj_idx_load(p)), TJ_ERR_CORRUPT);
    /* a gzip stream cut in the middle */
    snprintf(p, sizeof p, "%s/cut.gz", dir);
    unsigned char big[4 + 4 + 4000] = {0, 0, 8, 1, 0, 0, 0x0f, 0xa0};
    for (int i = 8; i < (int)sizeof big; i++)
        big[i] = (unsigned char)(i * 7);
    write_file(p, big, sizeof big, 1);
    FILE *f = fopen(p, "rb");
    unsigned char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_file(p, buf, n / 2, 0);
    t = tj_idx_load(p);
    CHECK_EQ_INT(tj_status_of(t), TJ_ERR_CORRUPT);
    unlink(p);
    snprintf(p, sizeof p, "%s/f", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/extra", dir);
    unlink(p);
    rmdir(dir);
    CHECK_EQ_INT(tj_status_of(tj_idx_load("/nonexistent/x.gz")), TJ_ERR_IO);
    CHECK_EQ_INT(tj_status_of(tj_idx_load(NULL)), TJ_ERR_INVALID);
    /* indices: in range, deterministic per seed, every value reachable */
    tj_tensor *a = tj_random_indices(7, 1000, 3), *b2 = tj_random_indices(7, 1000, 3),
              *c = tj_random_indices(7, 1000, 4);
    int seen[7] = {0}, same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        double v = tj_tensor_get_f64(a, i);
        CHECK(v >= 0 && v < 7);
        seen[(int)v]++;
        same &= v == tj_tensor_get_f64(b2, i);
        differ |= v != tj_tensor_get_f64(c, i);
    }
    CHECK(same && differ);
    for (int k = 0; k < 7; k++)
        CHECK(seen[k] > 100);
    CHECK_EQ_INT(tj_status_of(tj_random_indices(0, 3, 1)), TJ_ERR_INVALID);
    /* Glorot: within the limit, and spread across it */
    int64_t kd[4] = {5, 5, 32, 64};
    tj_tensor *k = tj_glorot_uniform(TJ_F32, 4, kd, 9);
    double lim = sqrt(6.0 / (25 * 32 + 25 * 64)), mx = 0;
    for (int64_t i = 0; i < tj_tensor_numel(k); i++)
        mx = fmax(mx, fabs(tj_tensor_get_f64(k, i)));
    CHECK(mx <= lim && mx > 0.99 * lim);
    tj_scope_end();
}

int main(void) {
    check_untiered();
    for (int kind = 0; kind < 4; kind++)
        for (int compiled = 0; compiled < 2; compiled++)
            run(kind, compiled);
    eager_adam_exact(TJ_F32, 5);
    eager_adam_exact(TJ_F32, 70000);
    eager_adam_exact(TJ_F64, 70000);
    optimizer_errors();
    shared_kernels();
    idx_files();
    return check_done();
}
