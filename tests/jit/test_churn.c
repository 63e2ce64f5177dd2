/* test_churn.c — memory stays flat while a function keeps retracing (issue 9, item 17): with
 * cache_bound 4 and 8 signatures called in turn every call evicts a concrete function and
 * replaces the cache snapshot; with the default bound and 200 shapes in turn the same happens
 * past the 64th. Evicted entries and old snapshots must be freed while calls go on (and while
 * other threads call), not kept until the function is freed. The test prints an RSS series
 * and fails if the resident size grows by more than a generous bound after warm-up; it asserts
 * no timing. TJ_CHURN_CALLS overrides the number of calls. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <tracejit.h>
#include <unistd.h>

#include "check.h"

static tj_tensor *poly(tj_tensor *x) {
    return tj_add(tj_mul(x, tj_scalar_f32(2)), tj_scalar_f32(1));
}

static long rss_kib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

typedef struct churn {
    tj_function *f;
    int n_shapes, calls;
    atomic_int bad;
} churn;

static void *caller(void *arg) {
    churn *c = arg;
    tj_tensor *xs[256];
    for (int s = 0; s < c->n_shapes; s++)
        xs[s] = tj_ones(TJ_F32, 1, (int64_t[]){s + 1});
    for (int i = 0; i < c->calls; i++) {
        int s = i % c->n_shapes;
        tj_tensor *r = tj_call(c->f, 1, &xs[s]);
        if (tj_status_of(r) || tj_tensor_numel(r) != s + 1 || tj_tensor_get_f64(r, s) != 3)
            atomic_fetch_add(&c->bad, 1);
        tj_release(r);
    }
    for (int s = 0; s < c->n_shapes; s++)
        tj_release(xs[s]);
    return NULL;
}

/* Runs `calls` calls over n_shapes shapes on n_threads threads in 10 rounds; returns the RSS
 * growth (KiB) from the end of round 2 to the end. */
static long churn_run(const char *what, int bound, int n_shapes, int calls, int n_threads) {
    tj_function_options o = {.cache_bound = bound};
    churn c = {.f = tj_function_new(what, (void *)poly, 1, &o), .n_shapes = n_shapes};
    c.calls = calls / 10 / n_threads;
    long base = 0, last = 0;
    printf("%s: RSS KiB per tenth of %d calls:", what, calls);
    for (int round = 0; round < 10; round++) {
        pthread_t th[4];
        for (int t = 0; t < n_threads; t++)
            pthread_create(&th[t], NULL, caller, &c);
        for (int t = 0; t < n_threads; t++)
            pthread_join(th[t], NULL);
        last = rss_kib();
        if (round == 1)
            base = last;
        printf(" %ld", last);
    }
    printf("\n");
    CHECK_EQ_INT(atomic_load(&c.bad), 0);
    CHECK(tj_function_n_concrete(c.f) <= (bound ? bound : 64));
    CHECK(tj_function_trace_count(c.f) > n_shapes);
    tj_function_free(c.f);
    return last - base;
}

/* Sanitizers keep freed memory in quarantine and shadow: RSS says nothing there, and the run is
 * about races and leaks, so it is shorter and the bound is not checked. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#define RSS_BOUND_KIB (SANITIZED ? LONG_MAX : 16 * 1024)

int main(void) {
    const char *env = getenv("TJ_CHURN_CALLS");
    int calls = env ? atoi(env) : 20000;
    if (SANITIZED && calls > 20000)
        calls = 20000;
    /* every call retraces: 8 shapes through a bound of 4 */
    long grew = churn_run("bound 4, 8 shapes", 4, 8, calls, 1);
    CHECK_MSG(grew < RSS_BOUND_KIB, "RSS grew by %ld KiB", grew);
    /* the same from two threads at once (readers and reclamation race) */
    grew = churn_run("bound 4, 8 shapes, 2 threads", 4, 8, calls, 2);
    CHECK_MSG(grew < RSS_BOUND_KIB, "RSS grew by %ld KiB", grew);
    /* the default bound with 200 shapes in turn */
    grew = churn_run("default bound, 200 shapes", 0, 200, calls, 1);
    CHECK_MSG(grew < RSS_BOUND_KIB, "RSS grew by %ld KiB", grew);
    return check_done();
}
