/* test_half_dtypes.c — float16 and bfloat16 as storage types: casts round to nearest even
 * (checked on the hand-picked ties, the subnormal edge and overflow, and on every one of the
 * 65536 float16 bit patterns against a decoder written here), the data-movement ops carry them
 * eagerly and compiled, printing shows their values, and arithmetic refuses them by name. */
#include <tracejit.h>

#include "check.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* binary16 decoded from its fields, independently of the library */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static tj_tensor *cast16(tj_dtype dt, int n, const float *v) {
    const int64_t d[1] = {n};
    return tj_cast(tj_tensor_from_data(TJ_F32, 1, d, v), dt);
}
static uint16_t bits_at(tj_tensor *t, int i) {
    return ((const uint16_t *)tj_tensor_data(t))[i];
}

static void rounding(void) {
    tj_scope_begin();
    /* float16: ties to even at 1, the largest finite value, the overflow threshold, the
     * subnormal edge, signed zero, infinities and NaN */
    const float in[] = {1.0f + 0x1p-11f,
                        1.0f + 3 * 0x1p-11f,
                        65504.0f,
                        65519.0f,
                        65520.0f,
                        0x1p-24f,
                        0x1p-25f,
                        0x1.8p-25f,
                        -0.0f,
                        -INFINITY,
                        NAN,
                        0.1f,
                        -2.5f,
                        0x1p-14f,
                        1e-10f};
    const uint16_t want[] = {0x3c00, 0x3c02, 0x7bff, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x0001,
                             0x8000, 0xfc00, 0x7e00, 0x2e66, 0xc100, 0x0400, 0x0000};
    enum { N = sizeof in / sizeof *in };
    tj_tensor *h = cast16(TJ_F16, N, in);
    CHECK(tj_status_of(h) == TJ_OK && tj_tensor_dtype(h) == TJ_F16);
    for (int i = 0; i < N; i++)
        CHECK_MSG(bits_at(h, i) == want[i], "float16 of %a: 0x%04x, want 0x%04x", in[i],
                  bits_at(h, i), want[i]);
    /* bfloat16: float32's top half, rounded to nearest even */
    const float bin[] = {f32_of(0x3ef535b8),
                         f32_of(0x3ef5eeb0),
                         f32_of(0x3f808000),
                         f32_of(0x3f818000),
                         3.4e38f,
                         -1.0f};
    const uint16_t bwant[] = {0x3ef5, 0x3ef6, 0x3f80, 0x3f82, 0x7f80, 0xbf80};
    tj_tensor *b = cast16(TJ_BF16, 6, bin);
    for (int i = 0; i < 6; i++)
        CHECK_MSG(bits_at(b, i) == bwant[i], "bfloat16 of %a: 0x%04x, want 0x%04x", bin[i],
                  bits_at(b, i), bwant[i]);
    /* back to float32 and to int (saturating, as from float32) */
    tj_tensor *back = tj_cast(b, TJ_F32);
    CHECK(f32_bits(((const float *)tj_tensor_data(back))[1]) == 0x3ef60000);
    tj_tensor *ints = tj_cast(h, TJ_I8);
    CHECK(((const int8_t *)tj_tensor_data(ints))[2] == 127 &&
          ((const int8_t *)tj_tensor_data(ints))[12] == -2);
    tj_scope_end();
}

/* every float16 bit pattern: to float64 as the decoder says, and back to the same bits */
static void all_patterns(void) {
    tj_scope_begin();
    static uint16_t pat[65536];
    for (int i = 0; i < 65536; i++)
        pat[i] = (uint16_t)i;
    const int64_t d[1] = {65536};
    tj_tensor *h = tj_tensor_from_data(TJ_F16, 1, d, pat);
    tj_tensor *f = tj_cast(h, TJ_F64), *h2 = tj_cast(tj_cast(h, TJ_F32), TJ_F16);
    const double *fv = tj_tensor_data(f);
    int bad = 0;
    for (int i = 0; i < 65536 && bad < 5; i++) {
        double want = f16_value((uint16_t)i);
        int nan = want != want;
        if (nan ? fv[i] == fv[i] : (fv[i] != want || signbit(fv[i]) != signbit(want))) {
            fprintf(stderr, "  0x%04x -> %a, want %a\n", i, fv[i], want);
            bad++;
        }
        uint16_t r = bits_at(h2, i);
        if (nan ? f16_value(r) == f16_value(r) : r != i) {
            fprintf(stderr, "  0x%04x round trip -> 0x%04x\n", i, r);
            bad++;
        }
    }
    CHECK(!bad);
    tj_scope_end();
}

/* data movement and casts around float32 math, compiled */
static tj_tensor *moves(tj_tensor *x) {
    tj_tensor *t = tj_transpose(tj_reshape(x, 2, (const int64_t[]){2, 3}), NULL);
    tj_tensor *c = tj_concat(2, (tj_tensor *[]){t, t}, 0);
    tj_tensor *s = tj_slice(c, (const int64_t[]){1, 0}, (const int64_t[]){4, 2}, NULL);
    tj_tensor *w = tj_where(tj_greater(tj_cast(s, TJ_F32), tj_scalar_f32(0)), s,
                            tj_cast(tj_neg(tj_cast(s, TJ_F32)), tj_tensor_dtype(x)));
    tj_tensor *g = tj_gather(w, tj_scalar_i64(2), 0);
    tj_tensor *r[2] = {w, g};
    return tj_tuple(2, r);
}

static void compiled(void) {
    void *fn = tj_jit_compile((void *)moves, 1, &(tj_function_options){.name = "half_moves"});
    tj_tensor *(*f)(tj_tensor *) = (tj_tensor * (*)(tj_tensor *)) fn;
    const tj_dtype dts[2] = {TJ_F16, TJ_BF16};
    for (int k = 0; k < 2; k++) {
        tj_scope_begin();
        const float v[6] = {1.5f, -2.0f, 3.25f, -0.5f, 1000.0f, -7.0f};
        tj_tensor *x = cast16(dts[k], 6, v);
        tj_tensor *e = moves(x), *c = f(x);
        CHECK(tj_status_of(e) == TJ_OK && tj_status_of(c) == TJ_OK);
        tj_tensor *we = tj_tuple_get(e, 0), *wc = tj_tuple_get(c, 0);
        CHECK(tj_tensor_dtype(wc) == dts[k] && tj_tensor_numel(wc) == 6);
        /* x^T = [[1.5,-.5],[-2,1000],[3.25,-7]]; rows 1..3 of [xT; xT], abs */
        const double want[6] = {2, 1000, 3.25, 7, 1.5, 0.5};
        for (int i = 0; i < 6; i++) {
            CHECK(bits_at(we, i) == bits_at(wc, i));
            CHECK_NEAR(tj_tensor_get_f64(wc, i), want[i], 0);
        }
        CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(c, 1), 1), 0.5, 0);
        tj_scope_end();
    }
    tj_jit_free(fn);
}

static void printing_and_errors(void) {
    tj_scope_begin();
    const float v[3] = {0.1f, -2.0f, 65504.0f};
    tj_tensor *h = cast16(TJ_F16, 3, v);
    char *s = tj_tensor_values_str(h);
    CHECK_MSG(s && !strcmp(s, "[0.099975586 -2 65504]"), "%s", s ? s : "(null)");
    free(s);
    CHECK(!strcmp(tj_dtype_name(TJ_BF16), "bfloat16") && tj_dtype_size(TJ_F16) == 2);
    tj_tensor *r = tj_add(h, h);
    CHECK(tj_status_of(r) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "float16");
    r = tj_matmul(tj_reshape(h, 2, (const int64_t[]){1, 3}),
                  tj_reshape(h, 2, (const int64_t[]){3, 1}));
    CHECK(tj_status_of(r) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "float16");
    r = tj_sum(cast16(TJ_BF16, 3, v), 0, NULL, 0);
    CHECK(tj_status_of(r) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "bfloat16");
    CHECK(tj_tensor_get_f64(tj_ones(TJ_BF16, 1, (const int64_t[]){2}), 1) == 1.0);
    tj_scope_end();
}

int main(void) {
    rounding();
    all_patterns();
    compiled();
    printing_and_errors();
    return check_done();
}
