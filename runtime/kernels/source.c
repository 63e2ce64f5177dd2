/* source.c — kernels with no inputs: EYE (ones where the last two indices agree), RANGE
 * (element k = start + k * delta computed in double, then converted; ints saturate) and the
 * stateless random sources. Random values are counter based: element k depends only on
 * (seed, k) — splitmix64's finaliser applied to key(seed) + k * golden — so results are
 * reproducible, independent of evaluation order or backend, and differ between seeds. Normals use
 * Box-Muller on two such streams. */
#include "runtime/kernels/kernels.h"

tj_status rt_k_eye(const ir_node *n, tj_tensor *out) {
    if (!ir_dtype_is_numeric(out->dtype) && out->dtype != TJ_BOOL)
        return rt_k_unsupported(n, out->dtype);
    if (out->rank < 2)
        return ir_errorf(TJ_ERR_INVALID, "eye: output must have rank >= 2, got %d", out->rank);
    int64_t rows = out->dims[out->rank - 2], cols = out->dims[out->rank - 1];
    int64_t mat = rows * cols;
    for (int64_t i = 0; i < out->numel; i++) {
        int64_t w = mat ? i % mat : 0;
        if (w / cols == w % cols)
            rt_k_store_f64(out, i, 1.0);
    }
    return TJ_OK;
}

tj_status rt_k_range(const ir_node *n, tj_tensor *out) {
    if (!ir_dtype_is_numeric(out->dtype))
        return rt_k_unsupported(n, out->dtype);
    if (out->rank != 1)
        return ir_errorf(TJ_ERR_INVALID, "range: output must have rank 1, got %d", out->rank);
    double start = n->a.f[0], delta = n->a.f[2];
    for (int64_t k = 0; k < out->numel; k++)
        rt_k_store_f64(out, k, start + (double)k * delta);
    return TJ_OK;
}

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ull
#define TWO_M53 (1.0 / 9007199254740992.0)

/* 64 random bits for counter c of the stream keyed by `key`. */
static inline uint64_t bits_at(uint64_t key, uint64_t c) {
    return mix64(key + (c + 1) * GOLDEN);
}

tj_status rt_k_random(const ir_node *n, tj_tensor *out) {
    int dt = out->dtype;
    if (!ir_dtype_is_numeric(dt))
        return rt_k_unsupported(n, dt);
    uint64_t key = mix64((uint64_t)n->a.i[0] ^ 0x5851f42d4c957f2dull);
    double p0 = n->a.f[0], p1 = n->a.f[1];
    bool uniform = n->op == IR_OP_RANDOM_UNIFORM;
    for (int64_t k = 0; k < out->numel; k++) {
        double v;
        if (uniform) {
            double u = (double)(bits_at(key, (uint64_t)k) >> 11) * TWO_M53; /* [0, 1) */
            v = p0 + (p1 - p0) * u;
            if (ir_dtype_is_int(dt)) {
                v = floor(v);
            } else if (dt == TJ_F32 && (float)v >= (float)p1 && p1 > p0) {
                /* rounding to f32 must not reach the excluded upper bound */
                ((float *)out->data)[k] = nextafterf((float)p1, -INFINITY);
                continue;
            }
        } else {
            uint64_t c = 2 * (uint64_t)k;
            double u1 = (double)((bits_at(key, c) >> 11) + 1) * TWO_M53; /* (0, 1] */
            double u2 = (double)(bits_at(key, c + 1) >> 11) * TWO_M53;
            v = p0 + p1 * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        }
        rt_k_store_f64(out, k, v);
    }
    return TJ_OK;
}
