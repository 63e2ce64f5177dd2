/* bench.h — shared timing and reporting for tracejit's benchmarks: a monotonic clock, medians
 * over repeated runs, a printed table row, and JSON records
 *   {"bench", "metric", "value", "unit", "baseline", "ratio", "isa"}
 * appended to the file named by $TJ_BENCH_JSON (bench/run collects them). "isa" names what the
 * hand-written kernels ran on (tj_cpu_isa: avx512, avx2, generic), as the table's top line does.
 */
#ifndef TJ_BENCH_H
#define TJ_BENCH_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tracejit.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The benchmarks time native code: tiering (on by default: a new signature's first calls run on
 * the interpreter while LLVM compiles) is turned off for the process before its first call, so a
 * first call compiles and every timed call runs the native program. Rows about the tiers ask for
 * them per function (tj_function_options.tiered = 1). */
static inline void bench_native_tier(void) {
    setenv("TJ_TIERED", "0", 1);
}

static inline int bench_quick(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0)
            return 1;
    return 0;
}

/* Prints a row and appends a JSON record. baseline_name may be NULL (no ratio). */
static inline void bench_report(const char *bench, const char *metric, double value,
                                const char *unit, const char *baseline_name, double baseline,
                                double ratio) {
    static int isa_said;
    if (!isa_said++)
        printf("# kernels: %s (tj_cpu_isa; TJ_ISA lowers it)\n", tj_cpu_isa());
    if (baseline_name)
        printf("%-24s %-14s %12.4g %-8s %-26s %12.4g  %6.2fx\n", bench, metric, value, unit,
               baseline_name, baseline, ratio);
    else
        printf("%-24s %-14s %12.4g %-8s %-26s %12s  %7s\n", bench, metric, value, unit, "-", "-",
               "-");
    const char *path = getenv("TJ_BENCH_JSON");
    if (!path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    if (baseline_name)
        fprintf(
            f,
            "{\"bench\": \"%s\", \"metric\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", "
            "\"baseline\": %.6g, \"baseline_name\": \"%s\", \"ratio\": %.4f, \"isa\": \"%s\"}\n",
            bench, metric, value, unit, baseline, baseline_name, ratio, tj_cpu_isa());
    else
        fprintf(f,
                "{\"bench\": \"%s\", \"metric\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", "
                "\"baseline\": null, \"ratio\": null, \"isa\": \"%s\"}\n",
                bench, metric, value, unit, tj_cpu_isa());
    fclose(f);
}
#endif
