/* pool.c — the process-wide thread pool behind rt_parallel_for. Workers are started lazily on
 * the first parallel loop; one loop runs at a time (others, and nested loops, run inline on their
 * caller, so a task may itself call rt_parallel_for without deadlock). Tasks are handed out by an
 * atomic counter; the caller takes part and returns only once every worker has left the loop. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/rt_pool.h"
#include "runtime/runtime.h"

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t *threads;
    int n_workers;
    int stop;
    uint64_t gen;   /* bumped for every loop */
    int n_finished; /* workers done with the current generation */
    rt_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_int_fast64_t next;
} pool;

static pthread_mutex_t g_submit = PTHREAD_MUTEX_INITIALIZER; /* held while a loop runs */
static pthread_mutex_t g_init = PTHREAD_MUTEX_INITIALIZER;
static pool *g_pool;
static int g_size;

int rt_pool_size(void) {
    pthread_mutex_lock(&g_init);
    if (!g_size) {
        const rt_config *c = rt_config_get();
        int n = c && c->num_threads > 0 ? c->num_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        g_size = n < 1 ? 1 : n > 256 ? 256 : n;
    }
    int n = g_size;
    pthread_mutex_unlock(&g_init);
    return n;
}

static void run_tasks(pool *p, rt_task_fn fn, void *ctx, int64_t n) {
    for (;;) {
        int64_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= n)
            return;
        fn(ctx, i);
    }
}

static void *worker(void *arg) {
    pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        rt_task_fn fn = p->fn;
        void *ctx = p->ctx;
        int64_t n = p->n_tasks;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, fn, ctx, n);
        pthread_mutex_lock(&p->mu);
        if (++p->n_finished == p->n_workers)
            pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Called with g_submit held. NULL when threads cannot be started (loops then run inline). */
static pool *pool_get(void) {
    if (g_pool)
        return g_pool;
    int n = rt_pool_size() - 1;
    if (n < 1)
        return NULL;
    pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = calloc((size_t)n, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0)
            break;
        p->n_workers++;
    }
    if (p->n_workers == 0) {
        pthread_cond_destroy(&p->cv_done);
        pthread_cond_destroy(&p->cv_work);
        pthread_mutex_destroy(&p->mu);
        free(p->threads);
        free(p);
        return NULL;
    }
    g_pool = p;
    return p;
}

void rt_parallel_for(int64_t n_tasks, rt_task_fn fn, void *ctx) {
    if (n_tasks <= 0)
        return;
    if (n_tasks == 1 || pthread_mutex_trylock(&g_submit) != 0) {
        for (int64_t i = 0; i < n_tasks; i++)
            fn(ctx, i);
        return;
    }
    pool *p = pool_get();
    if (!p) {
        pthread_mutex_unlock(&g_submit);
        for (int64_t i = 0; i < n_tasks; i++)
            fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    p->n_finished = 0;
    atomic_store(&p->next, 0);
    p->gen++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);

    run_tasks(p, fn, ctx, n_tasks);

    pthread_mutex_lock(&p->mu);
    while (p->n_finished < p->n_workers)
        pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&g_submit);
}

void rt_pool_shutdown(void) {
    pthread_mutex_lock(&g_submit);
    pool *p = g_pool;
    g_pool = NULL;
    if (p) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_workers; i++)
            pthread_join(p->threads[i], NULL);
        pthread_cond_destroy(&p->cv_done);
        pthread_cond_destroy(&p->cv_work);
        pthread_mutex_destroy(&p->mu);
        free(p->threads);
        free(p);
    }
    pthread_mutex_unlock(&g_submit);
}
