/* TJ_PERF_MAP=1: every function of loaded code is appended to /tmp/perf-<pid>.map as perf reads
 * it for JIT code ("<hex start> <hex size> <name>"). Compiles and calls a function, then checks
 * that the map has its kernels, named tracejit:..., each starting inside an executable mapping
 * of this process (/proc/self/maps) with a plausible size; without the variable nothing is
 * written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "native_first.h"
#include <tracejit.h>

static tj_tensor *f(tj_tensor *x) {
    return tj_tanh(tj_add(tj_mul(x, x), tj_scalar_f32(1.5f)));
}
static tj_tensor *g(tj_tensor *x) { /* another graph: its own code, not f's shared */
    return tj_sigmoid(tj_sub(tj_mul(x, x), x));
}

/* Whether [a, a+n) lies in an r-x mapping of this process. */
static int executable(unsigned long a, unsigned long n) {
    FILE *m = fopen("/proc/self/maps", "r");
    char line[512];
    int ok = 0;
    while (m && !ok && fgets(line, sizeof line, m)) {
        unsigned long lo, hi;
        char perm[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && a >= lo && a + n <= hi &&
            perm[0] == 'r' && perm[2] == 'x')
            ok = 1;
    }
    if (m)
        fclose(m);
    return ok;
}

/* Compiles and calls a function; returns it (alive: its code stays mapped) and whether it ran
 * native code. */
static tj_function *run(const char *name, tj_tensor *(*fun)(tj_tensor *), float v, int *native) {
    tj_function *fn = tj_function_new(name, (void *)fun, 1, NULL);
    int64_t d[1] = {1000};
    tj_tensor *x = tj_random_uniform(TJ_F32, 1, d, -v, v, 3), *y = tj_call(fn, 1, &x);
    tj_spec s = {TJ_F32, 1, {1000}, NULL};
    const char *be = tj_concrete_backend(tj_function_get_concrete(fn, 1, &s));
    *native = be && !strcmp(be, "cpu");
    tj_release(y);
    tj_release(x);
    return fn;
}

int main(void) {
    check_untiered();
    setenv("TJ_CACHE", "0", 1); /* fresh compiles, whatever the disk cache holds (read once) */
    if (tj_backend_unavailable("cpu")) {
        printf("skipped: %s\n", tj_backend_unavailable("cpu"));
        return 77;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%ld.map", (long)getpid());
    unlink(path);
    unsetenv("TJ_PERF_MAP");
    int native = 0;
    tj_function *off = run("perf_map_off", f, 1.0f, &native);
    CHECK(native);
    CHECK(access(path, F_OK) != 0); /* off by default */
    setenv("TJ_PERF_MAP", "1", 1);
    tj_function *on = run("perf_map_on", g, 2.0f, &native);
    CHECK(native);
    FILE *m = fopen(path, "r");
    CHECK_MSG(m != NULL, "no %s", path);
    int lines = 0, ours = 0;
    char line[512];
    while (m && fgets(line, sizeof line, m)) {
        unsigned long a, n;
        char sym[400];
        lines++;
        CHECK_MSG(sscanf(line, "%lx %lx %399s", &a, &n, sym) == 3, "line: %s", line);
        if (strncmp(sym, "tracejit:", 9) != 0)
            continue;
        ours++;
        CHECK_MSG(n > 0 && n < (1ul << 24), "size %lx: %s", n, line);
        CHECK_MSG(executable(a, n), "not in an executable mapping: %s", line);
    }
    if (m)
        fclose(m);
    printf("%d lines, %d tracejit functions\n", lines, ours);
    CHECK(ours >= 1);
    unlink(path);
    tj_function_free(on);
    tj_function_free(off);
    return check_done();
}
