/* pool.c — the process-wide thread pool behind rt_parallel_for. Workers are started lazily on
 * the first parallel loop; one loop runs at a time (others, and nested loops, run inline on their
 * caller, so a task may itself call rt_parallel_for without deadlock). Tasks are handed out from
 * one atomic word, the loop's tag beside the next task's index, so only a thread that joins
 * while the loop still has work takes any; the caller takes part and returns once every task
 * has finished, not once every worker has looked. A worker another process keeps off its core
 * (a shared machine) then costs the loop nothing: the others take its share, and the caller
 * does not wait for it to wake up only to find the loop done (that wait, a scheduler slice of
 * milliseconds per loop, made 2 threads slower than 1 beside a busy process).
 *
 * A worker that finished a loop spins for up to SPIN_NS watching for the next one before it
 * sleeps on the condition variable, and the caller spins the same way for the tasks to finish:
 * a futex wake-up costs 5-50 us on a VM, as much as a small layer's whole product, and loops come
 * back to back inside a call. OpenBLAS runs inside the pool's tasks (blas.c), so no other pool of
 * threads spins beside these. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#include "runtime/rt_pool.h"
#include "runtime/runtime.h"

/* The hand-out word: the loop's tag (its generation, modulo 2^TAG_BITS) in the high bits, the
 * next task's index below. A thread takes tasks only by a compare-and-swap that finds its own
 * loop's tag, so one that read the loop late (preempted between reading and taking) can never
 * take a later loop's tasks with this loop's function. */
enum { TAG_BITS = 24, INDEX_BITS = 64 - TAG_BITS };
#define INDEX_MASK (((uint64_t)1 << INDEX_BITS) - 1)

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t *threads;
    int n_workers;
    int stop;
    atomic_uint_fast64_t gen; /* bumped for every loop (release: fn, ctx, n_tasks are set) */
    atomic_int_fast64_t done; /* tasks of the current loop finished */
    /* the current loop: atomics because a late worker may read them while the next loop's are
     * written (it then finds the word's tag changed and uses none of them) */
    _Atomic(rt_task_fn) fn;
    _Atomic(void *) ctx;
    atomic_int_fast64_t n_tasks;
    atomic_uint_fast64_t next; /* tag | index of the next task */
} pool;

static pthread_mutex_t g_submit = PTHREAD_MUTEX_INITIALIZER; /* held while a loop runs */
static pthread_mutex_t g_init = PTHREAD_MUTEX_INITIALIZER;
static pool *g_pool;
static int g_size;

enum { SPIN_NS = 50000 };

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until done(arg) holds (1) or SPIN_NS pass (0). */
static int spin_until(int (*done)(const pool *, uint64_t), const pool *p, uint64_t v) {
    int64_t t0 = 0;
    for (uint32_t i = 0;; i++) {
        if (done(p, v))
            return 1;
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > SPIN_NS)
                return 0;
        }
        CPU_RELAX();
    }
}

static int new_gen(const pool *p, uint64_t seen) {
    return atomic_load_explicit(&p->gen, memory_order_acquire) != seen;
}
static int all_done(const pool *p, uint64_t n) {
    return (uint64_t)atomic_load_explicit(&p->done, memory_order_acquire) >= n;
}

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

/* Guided self-scheduling: each grab takes 1/(4·threads) of what is left (at least one task),
 * so a loop of many small tasks (a convolution's 700 bands of two rows) touches the shared
 * counter a few dozen times instead of once per task (a cache line that crosses cores each
 * time), and the chunks shrink to single tasks at the end, where the balance is made (1/4, not
 * 1/2: a thread that another process slows then holds less of the work). Runs the tasks of loop
 * `tag` (fn, ctx, n read for it) while it has any; a worker that finishes the last one wakes the
 * caller should it sleep (the caller finishing it needs no wake-up, nor the mutex). */
static void run_tasks(pool *p, uint64_t tag, rt_task_fn fn, void *ctx, int64_t n, int worker) {
    int64_t parts = 4 * ((int64_t)p->n_workers + 1);
    uint64_t w = atomic_load_explicit(&p->next, memory_order_acquire);
    for (;;) {
        int64_t i, chunk;
        do {
            i = (int64_t)(w & INDEX_MASK);
            if (w >> INDEX_BITS != tag || i >= n)
                return; /* another loop's word, or nothing left of this one */
            chunk = (n - i) / parts;
            chunk = chunk < 1 ? 1 : chunk;
        } while (!atomic_compare_exchange_weak_explicit(
            &p->next, &w, w + (uint64_t)chunk, memory_order_acquire, memory_order_acquire));
        for (int64_t e = i + chunk; i < e; i++)
            fn(ctx, i);
        if (atomic_fetch_add_explicit(&p->done, chunk, memory_order_acq_rel) + chunk == n &&
            worker) {
            pthread_mutex_lock(&p->mu); /* the caller may be asleep: wake it under the mutex */
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
        w = atomic_load_explicit(&p->next, memory_order_acquire);
    }
}

static uint64_t tag_of(uint64_t gen) {
    return gen & (((uint64_t)1 << TAG_BITS) - 1);
}

static void *worker(void *arg) {
    pool *p = arg;
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(new_gen, p, seen)) {
            pthread_mutex_lock(&p->mu);
            while (!p->stop && atomic_load(&p->gen) == seen)
                pthread_cond_wait(&p->cv_work, &p->mu);
            int stop = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stop)
                break;
        }
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (seen == UINT64_MAX) /* rt_pool_shutdown's generation */
            break;
        /* read for loop `seen`; used only if the hand-out word still carries its tag */
        run_tasks(p, tag_of(seen), atomic_load_explicit(&p->fn, memory_order_relaxed),
                  atomic_load_explicit(&p->ctx, memory_order_relaxed),
                  atomic_load_explicit(&p->n_tasks, memory_order_relaxed), 1);
    }
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

/* Contention. A worker that another process preempts while it holds a task holds up the loop
 * for a scheduler slice (milliseconds), where a small loop's work is microseconds: beside one
 * busy process on 2 cores, the MLP step took 0.4 ms on 1 thread and up to 1.8 ms on 2. When the
 * caller waits for its workers far longer than it took to run its own share (STALL_NS and 4x),
 * twice in a row, the next SOLO_LOOPS loops run inline on the caller (within SOLO_MAX_NS), a
 * window that doubles up to SOLO_MAX_LOOPS while the stalls go on; the loop after a window probes
 * the workers again, and one without a stall forgets the history. On an idle machine the waits
 * are a few microseconds and nothing changes. All under g_submit. */
enum { STALL_NS = 200000, SOLO_LOOPS = 64, SOLO_MAX_LOOPS = 4096 };
static const int64_t SOLO_MAX_NS = 1000000000;
static int64_t g_solo_left, g_solo_n, g_solo_deadline;
static int g_stalls;

static void note_wait(int64_t own, int64_t wait, int64_t now) {
    if (wait > STALL_NS && wait > 4 * own) {
        if (++g_stalls >= 2) {
            g_solo_n = !g_solo_n ? SOLO_LOOPS : g_solo_n < SOLO_MAX_LOOPS ? 2 * g_solo_n : g_solo_n;
            g_solo_left = g_solo_n, g_solo_deadline = now + SOLO_MAX_NS;
            g_stalls = 0;
        }
    } else if (wait <= STALL_NS) {
        g_stalls = 0, g_solo_n = 0;
    }
}

/* Whether this loop runs inline on its caller: a window of contention (note_wait) is open. */
static int solo(void) {
    if (g_solo_left <= 0)
        return 0;
    if (now_ns() >= g_solo_deadline) {
        g_solo_left = 0;
        return 0;
    }
    g_solo_left--;
    return 1;
}

int rt_pool_solo_loops(void) {
    pthread_mutex_lock(&g_submit);
    int n = (int)g_solo_left;
    pthread_mutex_unlock(&g_submit);
    return n;
}

void rt_parallel_for(int64_t n_tasks, rt_task_fn fn, void *ctx) {
    if (n_tasks <= 0)
        return;
    if (n_tasks == 1 || (uint64_t)n_tasks > INDEX_MASK || pthread_mutex_trylock(&g_submit) != 0) {
        for (int64_t i = 0; i < n_tasks; i++)
            fn(ctx, i);
        return;
    }
    pool *p = pool_get();
    if (!p || solo()) {
        pthread_mutex_unlock(&g_submit);
        for (int64_t i = 0; i < n_tasks; i++)
            fn(ctx, i);
        return;
    }
    int64_t t0 = now_ns();
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n_tasks, n_tasks, memory_order_relaxed);
    atomic_store(&p->done, 0);
    uint64_t gen = atomic_load(&p->gen) + 1;
    atomic_store_explicit(&p->next, tag_of(gen) << INDEX_BITS, memory_order_release);
    atomic_store_explicit(&p->gen, gen, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);

    run_tasks(p, tag_of(gen), fn, ctx, n_tasks, 0);

    int64_t t1 = now_ns();
    if (!spin_until(all_done, p, (uint64_t)n_tasks)) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->done) < n_tasks)
            pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    int64_t t2 = now_ns();
    note_wait(t1 - t0, t2 - t1, t2);
    pthread_mutex_unlock(&g_submit);
}

void rt_pool_shutdown(void) {
    pthread_mutex_lock(&g_submit);
    pool *p = g_pool;
    g_pool = NULL;
    if (p) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        atomic_store_explicit(&p->gen, UINT64_MAX, memory_order_release); /* wakes spinners */
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
