/* handles.c — where tj_function headers live, so that a stale handle is reported, never followed.
 * Headers are carved from one reserved address range (mapped on demand, MAP_NORESERVE) and an
 * address is never handed out twice: a freed header keeps FN_DEAD in its magic, and once every
 * header of a page is dead the page is returned to the kernel (MADV_DONTNEED), after which it
 * reads as zeros. Either way a call through a freed handle reads a magic that is not FN_MAGIC and
 * gets an error, for any number of freed functions, while the memory kept is bounded by the live
 * functions (at most one page per live function). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "jit/jit.h"

#define SLOT 512 /* a power of two dividing the page size */
_Static_assert(sizeof(tj_function) <= SLOT, "tj_function outgrew its handle slot");

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *region;
static size_t region_size, next_off;

/* Reserves the range: 64 GiB of address space (2^27 functions) where the kernel allows it,
 * less where it does not (strict overcommit). Nothing is committed until written. */
static int reserve(void) {
    for (size_t sz = (size_t)1 << 36; sz >= ((size_t)1 << 26); sz >>= 2) {
        void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            region = p;
            region_size = sz;
            return 1;
        }
    }
    return 0;
}

tj_function *jit_fn_alloc(void) {
    pthread_mutex_lock(&mu);
    tj_function *f = NULL;
    if ((region || reserve()) && next_off + SLOT <= region_size) {
        f = (tj_function *)(region + next_off);
        next_off += SLOT;
    }
    pthread_mutex_unlock(&mu);
    if (!f)
        ir_errorf(TJ_ERR_OOM, "function_new: no room for another function handle (%zu created)",
                  region_size / SLOT);
    return f; /* fresh pages read as zeros */
}

int jit_fn_state(const tj_function *f) {
    if (!f)
        return JIT_FN_NONE;
    const char *p = (const char *)f;
    if (region && p >= region && p < region + region_size) {
        if ((size_t)(p - region) % SLOT != 0)
            return JIT_FN_NONE;
        return f->magic == FN_MAGIC ? JIT_FN_ALIVE : JIT_FN_FREED;
    }
    return JIT_FN_NONE;
}

void jit_fn_release(tj_function *f) {
    long page = sysconf(_SC_PAGESIZE);
    if (page < SLOT)
        page = SLOT;
    char *p = (char *)f;
    size_t pg_off = (size_t)(p - region) / (size_t)page * (size_t)page;
    pthread_mutex_lock(&mu);
    memset(f, 0, sizeof *f);
    f->magic = FN_DEAD;
    /* the page goes back once every slot in it was handed out and has died */
    int all_dead = pg_off + (size_t)page <= next_off;
    for (size_t o = pg_off; all_dead && o < pg_off + (size_t)page; o += SLOT)
        all_dead = ((tj_function *)(region + o))->magic == FN_DEAD;
    if (all_dead)
        madvise(region + pg_off, (size_t)page, MADV_DONTNEED);
    pthread_mutex_unlock(&mu);
}
