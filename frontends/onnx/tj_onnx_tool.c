/* tj_onnx — ONNX models on tracejit from the command line:
 *   tj_onnx show MODEL                    the opset, the inputs and outputs (names, dtypes, dims)
 *   tj_onnx run [-o DIR] MODEL IN.pb...   runs the model on TensorProto inputs, prints the
 *                                         outputs, or saves them as DIR/output_K.pb
 *   tj_onnx time MODEL N IN.pb...         load, first call (trace + compile), median of N calls
 *                                         (after the background compile: the native code's),
 *                                         the process's peak resident memory
 * Exit status: 0, 1 on an error (printed), 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tj_onnx.h"

/* This process's peak resident memory in KiB (Linux's VmHWM: the process's own, which a fork and
 * exec do not inherit as getrusage's ru_maxrss does); -1 where /proc does not say. */
static long peak_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static int usage(void) {
    fprintf(stderr, "usage: tj_onnx show MODEL\n"
                    "       tj_onnx run [-o DIR] MODEL INPUT.pb...\n"
                    "       tj_onnx time MODEL N INPUT.pb...\n");
    return 2;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return usage();
    const char *cmd = argv[1], *save = NULL;
    int is_time = !strcmp(cmd, "time");
    if (strcmp(cmd, "show") && strcmp(cmd, "run") && !is_time)
        return usage();
    if (!strcmp(cmd, "run") && !strcmp(argv[2], "-o")) { /* run -o DIR MODEL ... */
        if (argc < 5)
            return usage();
        save = argv[3];
        argv += 2, argc -= 2;
    }
    double t_load = now_ms();
    tj_onnx_model *m = tj_onnx_load(argv[2], NULL);
    t_load = now_ms() - t_load;
    if (!m) {
        fprintf(stderr, "tj_onnx: %s\n", tj_last_error());
        return 1;
    }
    int rc = 0;
    if (!strcmp(cmd, "show")) {
        printf("%s: opset %d, %d inputs, %d outputs\n", argv[2], tj_onnx_opset(m),
               tj_onnx_n_inputs(m), tj_onnx_n_outputs(m));
        for (int out = 0; out < 2; out++)
            for (int k = 0; k < (out ? tj_onnx_n_outputs(m) : tj_onnx_n_inputs(m)); k++) {
                tj_spec s;
                const char *name = out ? tj_onnx_output(m, k, &s) : tj_onnx_input(m, k, &s);
                printf("  %s %d '%s': %s [", out ? "output" : "input", k, name,
                       tj_dtype_name(s.dtype));
                for (int d = 0; d < s.rank; d++)
                    s.dims[d] < 0 ? printf(d ? ", ?" : "?")
                                  : printf(d ? ", %lld" : "%lld", (long long)s.dims[d]);
                printf("]\n");
            }
        tj_onnx_free(m);
        return 0;
    }
    int first = is_time ? 4 : 3, reps = is_time && argc > 3 ? atoi(argv[3]) : 0;
    int n = argc - first;
    if (n != tj_onnx_n_inputs(m) || (is_time && reps < 1)) {
        fprintf(stderr, "tj_onnx: the model takes %d inputs, %d given\n", tj_onnx_n_inputs(m), n);
        tj_onnx_free(m);
        return 2;
    }
    tj_tensor **args = calloc((size_t)n + 1, sizeof *args);
    for (int k = 0; k < n && !rc; k++) {
        args[k] = tj_onnx_read_tensor(argv[first + k]);
        if (tj_status_of(args[k])) {
            fprintf(stderr, "tj_onnx: %s\n", tj_error_message(args[k]));
            rc = 1;
        }
    }
    double t0 = now_ms();
    tj_tensor *r = rc ? NULL : tj_onnx_call(m, n, args);
    double first_ms = now_ms() - t0;
    if (r && tj_status_of(r)) {
        fprintf(stderr, "tj_onnx: %s\n", tj_error_message(r));
        rc = 1;
    } else if (r && !is_time) {
        int no = tj_onnx_n_outputs(m);
        for (int k = 0; k < no && !rc; k++) {
            tj_tensor *o = no == 1 ? r : tj_tuple_get(r, k);
            if (save) {
                char path[4096];
                snprintf(path, sizeof path, "%s/output_%d.pb", save, k);
                if (tj_onnx_write_tensor(path, o, tj_onnx_output(m, k, NULL))) {
                    fprintf(stderr, "tj_onnx: %s\n", tj_last_error());
                    rc = 1;
                } else {
                    printf("%s -> %s\n", tj_onnx_output(m, k, NULL), path);
                }
                continue;
            }
            char *s = tj_tensor_str(o);
            printf("%s = %s\n", tj_onnx_output(m, k, NULL), s ? s : "");
            free(s);
        }
    } else if (r) {
        double w0 = now_ms(); /* tiered: the native code, before the steady state is timed */
        tj_onnx_wait_compiled(m);
        double wait_ms = now_ms() - w0;
        double *v = calloc((size_t)reps, sizeof *v);
        for (int i = 0; i < reps; i++) {
            double a = now_ms();
            tj_release(tj_onnx_call(m, n, args));
            v[i] = now_ms() - a;
        }
        qsort(v, (size_t)reps, sizeof *v, cmp_d);
        printf("%s: load %.3f ms; first call (trace + passes + compile + run) %.3f ms; median "
               "of %d calls %.4f ms; native code %.1f ms after the first call",
               argv[2], t_load, first_ms, reps, v[reps / 2], wait_ms);
        long hwm = peak_kb();
        if (hwm >= 0)
            printf("; peak resident %.1f MB", (double)hwm / 1024);
        printf("\n");
        free(v);
    }
    tj_release(r);
    for (int k = 0; k < n; k++)
        tj_release(args[k]);
    free(args);
    tj_onnx_free(m);
    return rc;
}
