/* test_adopt.c — tj_tensor_adopt: immutable data that a traced function captures as a constant is
 * shared, not copied: the data stays alive (release not yet called) while a compiled program
 * holds it after every tensor is gone, the values are right on both tiers, a retrace shares it
 * again, tj_call_into refuses it as an output, and bad arguments are errors. */
#include <stdlib.h>
#include <string.h>
#include <tracejit.h>

#include "check.h"

static int releases;
static void on_release(void *p) {
    releases++;
    free(p);
}

static tj_tensor *weights; /* captured by the traced function: becomes a constant */
static tj_tensor *affine(tj_tensor *x) {
    return tj_add(tj_mul(x, weights), tj_scalar_f32(1));
}

static void check_values(tj_tensor *r, const float *x, const float *w, int n) {
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    for (int i = 0; i < n && !tj_status_of(r); i++)
        CHECK_NEAR(tj_tensor_get_f64(r, i), x[i] * w[i] + 1, 0);
}

int main(void) {
    enum { N = 1024 };
    int64_t d[1] = {N};
    float *w = aligned_alloc(64, N * sizeof(float)), x[N], x2[N];
    for (int i = 0; i < N; i++) {
        w[i] = (float)(i % 17) - 8;
        x[i] = (float)i * 0.25f;
        x2[i] = (float)(N - i);
    }
    for (int tiered = 0; tiered < 2; tiered++) {
        releases = 0;
        float *wc = aligned_alloc(64, N * sizeof(float));
        memcpy(wc, w, N * sizeof(float));
        weights = tj_tensor_adopt(TJ_F32, 1, d, wc, on_release, wc);
        CHECK_EQ_INT(tj_status_of(weights), TJ_OK);
        CHECK(tj_tensor_data(weights) == (const void *)wc); /* not copied */
        tj_function_options o = {0};
        o.tiered = tiered;
        tj_function *f = tj_function_new("affine", (void *)affine, 1, &o);
        tj_tensor *xt = tj_tensor_from_data(TJ_F32, 1, d, x);
        tj_tensor *r = tj_call(f, 1, &xt);
        check_values(r, x, w, N);
        tj_release(r);
        /* the tensor is gone; the compiled function still holds the data */
        tj_release(weights);
        weights = NULL;
        CHECK_EQ_INT(releases, 0);
        r = tj_call(f, 1, &xt);
        check_values(r, x, w, N);
        tj_release(r);
        tj_release(xt);
        xt = tj_tensor_from_data(TJ_F32, 1, d, x2);
        r = tj_call(f, 1, &xt); /* same signature: no retrace needs the tensor */
        check_values(r, x2, w, N);
        tj_release(r);
        tj_release(xt);
        CHECK_EQ_INT(releases, 0);
        tj_function_free(f);
        CHECK_EQ_INT(releases, 1); /* handed back once, with the last holder */
    }

    /* a retrace for another shape captures the same adopted tensor again: still one release */
    releases = 0;
    float *wc = aligned_alloc(64, N * sizeof(float));
    memcpy(wc, w, N * sizeof(float));
    weights = tj_tensor_adopt(TJ_F32, 1, d, wc, on_release, wc);
    tj_function *f = tj_function_new("affine", (void *)affine, 1, NULL);
    tj_tensor *xt = tj_tensor_from_data(TJ_F32, 1, d, x);
    tj_tensor *r = tj_call(f, 1, &xt);
    check_values(r, x, w, N);
    tj_release(r);
    tj_tensor *xx = tj_broadcast_to(xt, 2, (int64_t[]){2, N}); /* [2, N]: a second trace */
    r = tj_call(f, 1, &xx);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tensor_rank(r), 2);
    CHECK_NEAR(tj_tensor_get_f64(r, N + 5), x[5] * w[5] + 1, 0);
    CHECK_EQ_INT(tj_function_n_concrete(f), 2);
    tj_release(r);
    tj_release(xx);

    /* an adopted tensor is never written: refused as tj_call_into's output */
    tj_status st = tj_call_into(f, 1, &xt, 1, &weights);
    CHECK_EQ_INT(st, TJ_ERR_INVALID);
    CHECK(strstr(tj_last_error(), "output 0 holds immutable data") != NULL);
    CHECK_NEAR(tj_tensor_get_f64(weights, 3), w[3], 0);
    tj_tensor *out = tj_tensor_empty(TJ_F32, 1, d); /* a tensor of its own is fine */
    CHECK_EQ_INT(tj_call_into(f, 1, &xt, 1, &out), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(out, 7), x[7] * w[7] + 1, 0);
    tj_release(out);
    tj_release(xt);
    tj_release(weights);
    weights = NULL;
    CHECK_EQ_INT(releases, 0);
    tj_function_free(f);
    CHECK_EQ_INT(releases, 1);

    /* eager ops on an adopted tensor read it like any other */
    releases = 0;
    wc = aligned_alloc(64, N * sizeof(float));
    memcpy(wc, w, N * sizeof(float));
    tj_tensor *a = tj_tensor_adopt(TJ_F32, 1, d, wc, on_release, wc);
    tj_tensor *s = tj_sum(a, 0, NULL, 0);
    double want = 0;
    for (int i = 0; i < N; i++)
        want += w[i];
    CHECK_NEAR(tj_tensor_get_f64(s, 0), want, 1e-3);
    tj_release(s);
    tj_release(a);
    CHECK_EQ_INT(releases, 1);

    /* bad arguments: errors naming the call, and release is not called */
    static const char *strs[1] = {"a"};
    tj_tensor *e = tj_tensor_adopt(TJ_STRING, 1, (int64_t[]){1}, strs, on_release, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_UNSUPPORTED);
    CHECK(strstr(tj_error_message(e), "tensor_adopt") != NULL);
    tj_release(e);
    e = tj_tensor_adopt(TJ_F32, 1, d, NULL, on_release, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_INVALID);
    tj_release(e);
    e = tj_tensor_adopt(TJ_F32, 1, d, (const char *)w + 1, on_release, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_INVALID);
    CHECK(strstr(tj_error_message(e), "aligned") != NULL);
    tj_release(e);
    e = tj_tensor_adopt(TJ_F32, 1, (int64_t[]){-3}, w, on_release, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    tj_release(e);
    CHECK_EQ_INT(releases, 1);
    free(w);
    return check_done();
}
