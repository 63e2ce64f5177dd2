/* A kernel's size is bounded (issue 23, item 10): a function of 1,500 elementwise ops
 * compiles to groups of at most PASS_MAX_GROUP_NODES (128) ops, on small tensors (where runs of
 * small kernels also become chains, bounded the same way) and large ones, and gives the eager
 * values. Before, it was one kernel, whose compile time grew faster than its size (3,000 ops:
 * 5.4 s; 10,000: minutes). */
#include <math.h>
#include <string.h>
#include <tracejit.h>

#include "check.h"

enum { N_ITER = 1000, N_OPS = 1500, MAX_GROUP = 128 }; /* 500 neg, 500 mul, 500 exp */

static tj_tensor *long_chain(tj_tensor *x) {
    for (int i = 0; i < N_ITER; i++)
        x = i % 2 ? tj_neg(x) : tj_exp(tj_mul(x, tj_scalar_f32(1e-3f)));
    return x;
}

int main(void) {
    const int64_t sizes[2] = {4, 100000};
    for (int k = 0; k < 2; k++) {
        tj_scope_begin();
        tj_tensor *x = tj_random_uniform(TJ_F32, 1, &sizes[k], -1, 1, 5);
        tj_function *f = tj_function_new("long_chain", (void *)long_chain, 1, NULL);
        tj_tensor *c = tj_call(f, 1, &x), *e = tj_call_eager(f, 1, &x);
        CHECK_MSG(tj_status_of(c) == TJ_OK, "%s", tj_error_message(c));
        int bad = 0;
        for (int64_t i = 0; i < sizes[k] && !tj_status_of(c); i += 97)
            bad += fabs(tj_tensor_get_f64(c, i) - tj_tensor_get_f64(e, i)) > 1e-5;
        CHECK_EQ_INT(bad, 0);
        tj_spec s = {TJ_F32, 1, {sizes[k]}, NULL};
        char *dot = tj_concrete_graph_dot(tj_function_get_concrete(f, 1, &s), TJ_GRAPH_KERNELS);
        int clusters = 0, most = 0;
        for (char *p = dot; p && (p = strstr(p, "subgraph cluster")); p++) {
            clusters++;
            char *q = strchr(p, '{');
            int depth = 1, ops = 0; /* the nodes drawn inside this cluster's braces */
            for (q = q ? q + 1 : NULL; q && *q && depth; q++) {
                depth += *q == '{' ? 1 : *q == '}' ? -1 : 0;
                ops += !strncmp(q, "[shape=box", 10);
            }
            most = ops > most ? ops : most;
        }
        CHECK_MSG(tj_backend_unavailable("cpu") || /* a build without LLVM interprets */
                      clusters >= (N_OPS + MAX_GROUP - 1) / MAX_GROUP,
                  "f32[%lld]: %d kernels for %d ops", (long long)sizes[k], clusters, N_OPS);
        CHECK_MSG(most <= MAX_GROUP, "f32[%lld]: a kernel of %d ops", (long long)sizes[k], most);
        free(dot);
        tj_function_free(f);
        tj_scope_end();
    }
    return check_done();
}
