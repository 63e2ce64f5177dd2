/* alloc.c — the caching allocator behind tensor buffers. Sizes are rounded to classes (four per
 * power of two, multiples of 64 bytes); freed blocks stay in a per-class free list and are handed
 * out again, so a compiled function called in a loop stops calling malloc. Blocks of 2 MiB and
 * more are mmap'd in 2 MiB multiples with MADV_HUGEPAGE, and a large request may take a cached
 * block of up to twice its size. One mutex guards the lists; the cache is
 * bounded (rt_alloc_set_cache_limit) and rt_alloc_trim empties it. Under AddressSanitizer nothing
 * is cached, so use-after-free stays detectable. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/rt_pool.h"

#define LARGE ((size_t)2 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define NO_CACHE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_CACHE 1
#endif
#endif
#ifndef NO_CACHE
#define NO_CACHE 0
#endif

typedef struct bin {
    size_t size;
    void *head; /* free blocks, linked through their first word */
} bin;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static bin *g_bins;
static size_t g_n_bins, g_cap_bins;
static size_t g_limit = (size_t)1 << 30;
static rt_alloc_stats g_st;

static size_t round_size(size_t s) {
    if (s <= 64)
        return 64;
    if (s >= LARGE)
        return (s + LARGE - 1) & ~(LARGE - 1);
    int k = 63 - __builtin_clzll((unsigned long long)(s - 1)); /* 2^k < s <= 2^(k+1) */
    size_t step = (size_t)1 << (k - 2);
    if (step < 64)
        step = 64;
    return (s + step - 1) & ~(step - 1);
}

static void *sys_alloc(size_t r) {
    if (r >= LARGE) {
        void *p = mmap(NULL, r, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, r, MADV_HUGEPAGE);
#endif
        return p;
    }
    return aligned_alloc(64, r);
}

static void sys_free(void *p, size_t r) {
    if (r >= LARGE)
        munmap(p, r);
    else
        free(p);
}

static bin *find_bin(size_t r, int create) {
    for (size_t i = 0; i < g_n_bins; i++)
        if (g_bins[i].size == r)
            return &g_bins[i];
    if (!create)
        return NULL;
    if (g_n_bins == g_cap_bins) {
        size_t cap = g_cap_bins ? 2 * g_cap_bins : 64;
        bin *nb = realloc(g_bins, cap * sizeof *nb);
        if (!nb)
            return NULL;
        g_bins = nb;
        g_cap_bins = cap;
    }
    g_bins[g_n_bins] = (bin){r, NULL};
    return &g_bins[g_n_bins++];
}

/* A large request with no cached block of its class takes a cached block of up to twice its
 * size (a model's activations shrink layer by layer: the 6 MiB block of the first layer serves
 * the 4 MiB of the second) instead of fresh memory, whose first touch is the dearest thing a
 * first call pays for. The block's real size is kept here until it comes back; few large
 * blocks are out at once. */
typedef struct grant {
    void *p;
    size_t size;
} grant;
static grant *g_grants;
static size_t g_n_grants, g_cap_grants;

static bin *larger_bin(size_t r) {
    bin *best = NULL;
    for (size_t i = 0; i < g_n_bins; i++)
        if (g_bins[i].head && g_bins[i].size > r && g_bins[i].size <= 2 * r &&
            (!best || g_bins[i].size < best->size))
            best = &g_bins[i];
    if (best && g_n_grants == g_cap_grants) {
        size_t cap = g_cap_grants ? 2 * g_cap_grants : 16;
        grant *ng = realloc(g_grants, cap * sizeof *ng);
        if (!ng)
            return NULL; /* fresh memory instead */
        g_grants = ng;
        g_cap_grants = cap;
    }
    if (best)
        g_grants[g_n_grants++] = (grant){best->head, best->size};
    return best;
}

/* The real size of large block p (rounded request r), forgetting its grant. */
static size_t real_size(void *p, size_t r) {
    for (size_t i = 0; r >= LARGE && i < g_n_grants; i++)
        if (g_grants[i].p == p) {
            r = g_grants[i].size;
            g_grants[i] = g_grants[--g_n_grants];
            break;
        }
    return r;
}

/* *fresh = 1 when the block comes straight from mmap (already zero). */
static void *alloc_impl(size_t size, int *fresh) {
    size_t r = round_size(size);
    *fresh = 0;
    pthread_mutex_lock(&g_mu);
    g_st.n_alloc++;
    bin *b = find_bin(r, 0);
    if ((!b || !b->head) && r >= LARGE)
        b = larger_bin(r);
    void *p = b ? b->head : NULL;
    if (p) { /* a hit: one lock for the whole call */
        r = b->size;
        b->head = *(void **)p;
        g_st.bytes_cached -= r;
        g_st.n_reused++;
        g_st.bytes_in_use += r;
        if (g_st.bytes_in_use > g_st.peak_in_use)
            g_st.peak_in_use = g_st.bytes_in_use;
        pthread_mutex_unlock(&g_mu);
        return p;
    }
    pthread_mutex_unlock(&g_mu);
    p = sys_alloc(r);
    if (!p) {
        rt_alloc_trim(); /* give the cache back and try once more */
        p = sys_alloc(r);
    }
    if (!p)
        return NULL;
    *fresh = r >= LARGE;
    pthread_mutex_lock(&g_mu);
    g_st.bytes_in_use += r;
    if (g_st.bytes_in_use > g_st.peak_in_use)
        g_st.peak_in_use = g_st.bytes_in_use;
    pthread_mutex_unlock(&g_mu);
    return p;
}

void *rt_alloc(size_t size) {
    int fresh;
    return alloc_impl(size, &fresh);
}

void *rt_alloc_zeroed(size_t size) {
    int fresh;
    void *p = alloc_impl(size, &fresh);
    if (p && !fresh)
        memset(p, 0, round_size(size));
    return p;
}

void rt_free(void *p, size_t size) {
    if (!p)
        return;
    pthread_mutex_lock(&g_mu);
    size_t r = real_size(p, round_size(size));
    g_st.bytes_in_use -= r;
    bin *b = NULL;
    if (!NO_CACHE && g_st.bytes_cached + r <= g_limit)
        b = find_bin(r, 1);
    if (b) {
        *(void **)p = b->head;
        b->head = p;
        g_st.bytes_cached += r;
    }
    pthread_mutex_unlock(&g_mu);
    if (!b)
        sys_free(p, r);
}

void rt_alloc_trim(void) {
    pthread_mutex_lock(&g_mu);
    bin *bins = g_bins;
    size_t n = g_n_bins;
    g_bins = NULL;
    g_n_bins = g_cap_bins = 0;
    g_st.bytes_cached = 0;
    pthread_mutex_unlock(&g_mu);
    for (size_t i = 0; i < n; i++) {
        void *p = bins[i].head;
        while (p) {
            void *next = *(void **)p;
            sys_free(p, bins[i].size);
            p = next;
        }
    }
    free(bins);
}

rt_alloc_stats rt_alloc_get_stats(void) {
    pthread_mutex_lock(&g_mu);
    rt_alloc_stats s = g_st;
    pthread_mutex_unlock(&g_mu);
    return s;
}

void rt_alloc_set_cache_limit(size_t bytes) {
    pthread_mutex_lock(&g_mu);
    g_limit = bytes;
    int over = g_st.bytes_cached > bytes;
    pthread_mutex_unlock(&g_mu);
    if (over)
        rt_alloc_trim();
}
