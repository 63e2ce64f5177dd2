/* shapes_util.h — what the shape tests (test_shape_reuse.c, test_unknown_dims.c) share: an f32
 * tensor of a shape filled with a deterministic pattern, and how many elements of a result differ
 * from another (relative tolerance; NaN equals NaN), through the public API only. */
#ifndef TJ_TEST_SHAPES_UTIL_H
#define TJ_TEST_SHAPES_UTIL_H
#include <math.h>
#include <stdlib.h>
#include <tracejit.h>

static inline tj_tensor *su_filled(int rank, const int64_t *dims, float seed) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = seed + (float)((i * 7919) % 113) / 37.0f - 1.0f;
    tj_tensor *t = tj_tensor_from_data(TJ_F32, rank, dims, v);
    free(v);
    return t;
}

/* Elements of r that differ from e's (both valid tensors of e's element count). */
static inline int su_differ(const tj_tensor *r, const tj_tensor *e, double tol) {
    int bad = 0;
    for (int64_t i = 0; i < tj_tensor_numel(e) && i < tj_tensor_numel(r); i++) {
        double x = tj_tensor_get_f64(r, i), y = tj_tensor_get_f64(e, i);
        bad += !(fabs(x - y) <= tol * (1 + fabs(y))) && !(isnan(x) && isnan(y));
    }
    return bad;
}
#endif
