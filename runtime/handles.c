/* handles.c — where long-lived handles (tj_function, tj_variable) live, so that a stale handle is
 * reported, never followed. An arena carves fixed-size slots from one reserved address range
 * (mapped on demand, MAP_NORESERVE) and never hands an address out twice. A freed object keeps
 * RT_DEAD_MAGIC in its first word; once every slot of a page is dead the page is returned to the
 * kernel (MADV_DONTNEED) and reads as zeros. Either way a call through a freed handle reads a
 * magic that is not the live one and gets an error, for any number of freed handles, while the
 * memory kept stays bounded by the live ones (at most one page each). */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/runtime.h"

/* Reserves 64 GiB of address space where the kernel allows it, less where it does not (strict
 * overcommit). Nothing is committed until written. */
static int reserve(rt_arena *a) {
    for (size_t sz = (size_t)1 << 36; sz >= ((size_t)1 << 26); sz >>= 2) {
        void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            a->region = p;
            a->size = sz;
            return 1;
        }
    }
    return 0;
}

void *rt_arena_alloc(rt_arena *a) {
    pthread_mutex_lock(&a->mu);
    void *p = NULL;
    if ((a->region || reserve(a)) && a->next + a->slot <= a->size) {
        p = a->region + a->next;
        a->next += a->slot;
    }
    pthread_mutex_unlock(&a->mu);
    if (!p)
        ir_errorf(TJ_ERR_OOM, "out of handle space (%zu handles of %zu bytes created)",
                  a->size / a->slot, a->slot);
    return p; /* fresh pages read as zeros */
}

int rt_arena_holds(const rt_arena *a, const void *p) {
    const char *c = p;
    return a->region && c >= a->region && c < a->region + a->size &&
           (size_t)(c - a->region) % a->slot == 0;
}

void rt_arena_release(rt_arena *a, void *p, size_t obj_size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (page < a->slot)
        page = a->slot;
    char *c = p;
    size_t pg_off = (size_t)(c - a->region) / page * page;
    pthread_mutex_lock(&a->mu);
    memset(p, 0, obj_size);
    *(uint32_t *)p = RT_DEAD_MAGIC;
    /* the page goes back once every slot in it was handed out and has died */
    int all_dead = pg_off + page <= a->next;
    for (size_t o = pg_off; all_dead && o < pg_off + page; o += a->slot)
        all_dead = *(const uint32_t *)(a->region + o) == RT_DEAD_MAGIC;
    if (all_dead)
        madvise(a->region + pg_off, page, MADV_DONTNEED);
    pthread_mutex_unlock(&a->mu);
}
