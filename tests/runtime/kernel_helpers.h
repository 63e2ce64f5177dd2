/* kernel_helpers.h — helpers for the reference-kernel tests (test_kernels*.c): build tensors,
 * run one op through ir_infer + rt_tensor_alloc + rt_ref_kernel exactly as eager execution does,
 * and compare results. Included by test files only. */
#ifndef TJ_TEST_KERNEL_HELPERS_H
#define TJ_TEST_KERNEL_HELPERS_H
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "runtime/runtime.h"

/* Every tensor made here is tracked and released by pool_free() at the end of main. */
static tj_tensor *pool_[8192];
static int n_pool_;
static inline tj_tensor *track(tj_tensor *t) {
    if (t && n_pool_ < (int)(sizeof pool_ / sizeof pool_[0]))
        pool_[n_pool_++] = t;
    return t;
}
static inline void pool_free(void) {
    while (n_pool_ > 0)
        tj_release(pool_[--n_pool_]);
}

/* A concrete tensor; for TJ_STRING, data is an array of const char *. */
static inline tj_tensor *mk(int dt, int rank, const int64_t *dims, const void *data) {
    tj_tensor *t = rt_tensor_alloc(dt, rank, dims);
    if (!t)
        return NULL;
    if (dt == TJ_STRING) {
        const char *const *s = data;
        for (int64_t i = 0; i < t->numel; i++) {
            tj_string *e = (tj_string *)t->data + i;
            e->len = strlen(s[i]);
            e->data = rt_strdup_len(s[i], e->len);
        }
    } else if (t->numel && data) {
        memcpy(t->data, data, (size_t)t->numel * ir_dtype_size(dt));
    }
    return track(t);
}

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define F32(...) ((const float[]){__VA_ARGS__})
#define F64(...) ((const double[]){__VA_ARGS__})
#define I32(...) ((const int32_t[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define B8(...) ((const uint8_t[]){__VA_ARGS__})
#define STR(...) ((const char *const[]){__VA_ARGS__})

static inline ir_node proto(int op) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    return p;
}

/* Infers, allocates and runs. Returns the output (caller releases) or NULL with *st set. */
static inline tj_tensor *run_n(ir_node p, tj_tensor *const *in, uint32_t n, tj_status *st) {
    ir_node descs[8];
    const ir_node *ptrs[8] = {0};
    for (uint32_t k = 0; k < n && k < 8; k++) {
        rt_desc(in[k], &descs[k]);
        ptrs[k] = &descs[k];
    }
    p.n_in = n;
    tj_status s = ir_infer(&p, ptrs, n);
    if (s) {
        *st = s;
        fprintf(stderr, "ir_infer failed: %s\n", ir_last_error());
        return NULL;
    }
    tj_tensor *out = rt_tensor_alloc(p.dtype, p.rank, p.dims);
    if (!out) {
        *st = TJ_ERR_OOM;
        return NULL;
    }
    s = rt_ref_kernel(&p, in, out);
    *st = s;
    if (s) {
        tj_release(out);
        return NULL;
    }
    return track(out);
}

static tj_status last_st;
static inline tj_tensor *run1(ir_node p, tj_tensor *a) {
    return run_n(p, &a, 1, &last_st);
}
static inline tj_tensor *run2(ir_node p, tj_tensor *a, tj_tensor *b) {
    tj_tensor *in[2] = {a, b};
    return run_n(p, in, 2, &last_st);
}
static inline tj_tensor *run0(ir_node p) {
    return run_n(p, NULL, 0, &last_st);
}

/* Element i as double (bool/int/float). */
static inline double at(const tj_tensor *t, int64_t i) {
    return tj_tensor_get_f64(t, i);
}
static inline int64_t ati(const tj_tensor *t, int64_t i) {
    switch (t->dtype) {
    case TJ_I32:
        return ((const int32_t *)t->data)[i];
    case TJ_I64:
        return ((const int64_t *)t->data)[i];
    case TJ_BOOL:
        return ((const uint8_t *)t->data)[i];
    default:
        return (int64_t)at(t, i);
    }
}
static inline const char *ats(const tj_tensor *t, int64_t i) {
    return ((const tj_string *)t->data)[i].data;
}

static inline bool same_f(double a, double b, double tol) {
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= tol * (1 + fabs(b));
}

/* Checks shape and values of t against want (n values as doubles). */
#define CHECK_SHAPE(t, rank_, ...)                                                                 \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        CHECK_EQ_INT((t)->rank, rank_);                                                            \
        for (int d_ = 0; d_ < (rank_) && d_ < (t)->rank; d_++)                                     \
            CHECK_EQ_INT((t)->dims[d_], want_[d_]);                                                \
    } while (0)

#define CHECK_VALS(t, tol, ...)                                                                    \
    do {                                                                                           \
        const double want_[] = {__VA_ARGS__};                                                      \
        int64_t n_ = (int64_t)(sizeof want_ / sizeof want_[0]);                                    \
        CHECK_MSG((t) != NULL, "NULL result: %s", ir_last_error());                                \
        if (t) {                                                                                   \
            CHECK_EQ_INT((t)->numel, n_);                                                          \
            for (int64_t i_ = 0; i_ < n_ && i_ < (t)->numel; i_++)                                 \
                CHECK_MSG(same_f(at(t, i_), want_[i_], tol), "[%lld] %.9g vs %.9g", (long long)i_, \
                          at(t, i_), want_[i_]);                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_IVALS(t, ...)                                                                        \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        int64_t n_ = (int64_t)(sizeof want_ / sizeof want_[0]);                                    \
        CHECK_MSG((t) != NULL, "NULL result: %s", ir_last_error());                                \
        if (t) {                                                                                   \
            CHECK_EQ_INT((t)->numel, n_);                                                          \
            for (int64_t i_ = 0; i_ < n_ && i_ < (t)->numel; i_++)                                 \
                CHECK_MSG(ati(t, i_) == want_[i_], "[%lld] %lld vs %lld", (long long)i_,           \
                          (long long)ati(t, i_), (long long)want_[i_]);                            \
        }                                                                                          \
    } while (0)

#define CHECK_SVALS(t, ...)                                                                        \
    do {                                                                                           \
        const char *const want_[] = {__VA_ARGS__};                                                 \
        int64_t n_ = (int64_t)(sizeof want_ / sizeof want_[0]);                                    \
        CHECK_MSG((t) != NULL, "NULL result: %s", ir_last_error());                                \
        if (t) {                                                                                   \
            CHECK_EQ_INT((t)->numel, n_);                                                          \
            for (int64_t i_ = 0; i_ < n_ && i_ < (t)->numel; i_++) {                               \
                CHECK_STR(ats(t, i_), want_[i_]);                                                  \
                CHECK_EQ_INT(((const tj_string *)(t)->data)[i_].len, strlen(want_[i_]));           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Expects the op to fail with `code` and a message containing `needle`. */
#define CHECK_FAILS(expr, code, needle)                                                            \
    do {                                                                                           \
        tj_tensor *r_ = (expr);                                                                    \
        CHECK_MSG(r_ == NULL, "expected failure");                                                 \
        CHECK_EQ_INT(last_st, code);                                                               \
        CHECK_HAS(ir_last_error(), needle);                                                        \
    } while (0)

#endif
