/* TJ_EXACT_MATH=1 through the public API: a compiled function with transcendentals and
 * multiply-adds gives results bit-identical to eager execution (the reference kernels); without
 * it the approximations differ somewhere but stay within their stated bounds. The strict run is a
 * child process, since the environment is read once. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tracejit.h>

#include "check.h"

static tj_tensor *f(tj_tensor *x) {
    tj_tensor *y =
        tj_add(tj_mul(x, tj_scalar_f32(1.37f)), tj_scalar_f32(0.11f)); /* FMA candidate */
    return tj_add(tj_mul(tj_tanh(y), tj_exp(tj_neg(y))),
                  tj_log(tj_add(tj_abs(x), tj_scalar_f32(1))));
}

/* Number of elements where compiled and eager differ bitwise (-1 on error), and the max rel diff.
 */
static long differ(double *maxrel) {
    int64_t n = 3001, d[1] = {n};
    float *xs = malloc((size_t)n * sizeof *xs);
    for (int64_t i = 0; i < n; i++)
        xs[i] = (float)(i - 1500) * 0.0123f;
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, d, xs);
    tj_function *fn = tj_function_new("f", (void *)f, 1, NULL);
    tj_tensor *a = tj_call(fn, 1, &x), *b = tj_call_eager(fn, 1, &x);
    long bad = tj_status_of(a) || tj_status_of(b) ? -1 : 0;
    *maxrel = 0;
    for (int64_t i = 0; bad >= 0 && i < n; i++) {
        float p = ((const float *)tj_tensor_data(a))[i], q = ((const float *)tj_tensor_data(b))[i];
        if (memcmp(&p, &q, 4) != 0)
            bad++;
        double r = fabs((double)p - q) / (fabs(q) > 1 ? fabs(q) : 1);
        if (r > *maxrel)
            *maxrel = r;
    }
    tj_release(a);
    tj_release(b);
    tj_release(x);
    tj_function_free(fn);
    free(xs);
    return bad;
}

int main(int argc, char **argv) {
    double rel;
    if (argc > 1 && strcmp(argv[1], "--strict-child") == 0)
        return differ(&rel) == 0 ? 0 : 1;
    setenv("TJ_CACHE", "0", 1);
    long fast = differ(&rel);
    CHECK(fast >= 0);
    CHECK_MSG(rel < 1e-5, "default mode max relative difference %g", rel);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TJ_EXACT_MATH", "1", 1);
        execl("/proc/self/exe", argv[0], "--strict-child", (char *)NULL);
        _exit(99);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "TJ_EXACT_MATH=1 results differ from eager");
    return check_done();
}
