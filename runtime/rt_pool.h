/* rt_pool.h — the runtime's thread pool (pool.c) and caching allocator (alloc.c). Kept apart
 * from runtime.h so that the executor and the jit backends can use them without touching the
 * contract header. Both are process-wide, lazily created and thread-safe. */
#ifndef TJ_RT_POOL_H
#define TJ_RT_POOL_H

#include <stddef.h>
#include <stdint.h>

/* ---- thread pool ----------------------------------------------------------------------------- */
/* A task body: runs task `i` of a parallel_for. */
typedef void (*rt_task_fn)(void *ctx, int64_t i);

/* Number of threads a parallel_for may use (the caller included): TJ_NUM_THREADS (through
 * rt_config) or, by default, the number of online cores; at least 1. */
int rt_pool_size(void);
/* Runs fn(ctx, i) for i in [0, n_tasks) on the pool, the calling thread taking part; returns when
 * every task has finished. Safe to call from any thread: a call made while the pool is busy
 * (another thread's loop, or a nested call from a task) runs its tasks inline on the caller. */
void rt_parallel_for(int64_t n_tasks, rt_task_fn fn, void *ctx);
/* Joins the worker threads (for leak checkers and tests); the next parallel_for restarts them. */
void rt_pool_shutdown(void);
/* How many of the next loops run inline on their caller because the last ones waited on a
 * preempted worker (pool.c: contention; 0 on an idle machine). For tests and profiles. */
int rt_pool_solo_loops(void);

/* ---- caching allocator ----------------------------------------------------------------------- */
/* 64-byte aligned memory of at least `size` bytes (size 0 gives a valid unique block); NULL on
 * OOM. Freed blocks are cached by size class and reused; blocks of 2 MiB and more are mmap'd
 * (MADV_HUGEPAGE). rt_free must be passed the same size. */
void *rt_alloc(size_t size);
void *rt_alloc_zeroed(size_t size);
void rt_free(void *p, size_t size); /* NULL is fine */
/* Releases every cached (free) block to the system. */
void rt_alloc_trim(void);

typedef struct rt_alloc_stats {
    size_t bytes_in_use; /* handed out and not yet freed (rounded sizes) */
    size_t bytes_cached; /* freed, kept for reuse */
    size_t peak_in_use;  /* high-water mark of bytes_in_use */
    uint64_t n_alloc;    /* rt_alloc calls */
    uint64_t n_reused;   /* served from the cache */
} rt_alloc_stats;
rt_alloc_stats rt_alloc_get_stats(void);
/* Upper bound on bytes_cached (default 1 GiB); blocks freed beyond it go back to the system. */
void rt_alloc_set_cache_limit(size_t bytes);

#endif /* TJ_RT_POOL_H */
