/* lifetime.c — how tensors die: reference counts, scopes (a scope releases what was made inside
 * it), tj_keep, and the quarantine that turns the commonest C mistake, releasing a tensor a scope
 * also owns, into a reported misuse instead of heap corruption. */
#include <stdlib.h>

#include "runtime/runtime.h"

/* ---- reference counting ---------------------------------------------------------------------- */
/* A released header is poisoned (kind RT_FREED) and waits in a per-thread FIFO quarantine of
 * QUARANTINE headers before free(), so the commonest misuse, releasing a tensor a scope also
 * owns, meets a poisoned header when the scope ends and is reported instead of corrupting the
 * heap. A header released by one thread and released again by another, or released again after
 * QUARANTINE later releases on its thread, is not detected. */
#define QUARANTINE 1024
typedef struct quarantine {
    tj_tensor *ring[QUARANTINE];
    unsigned next;
} quarantine;
static _Thread_local quarantine *quar;
static pthread_key_t quar_key;
static pthread_once_t quar_once = PTHREAD_ONCE_INIT;

static atomic_int exiting; /* after the main thread's flush: headers are freed at once */

static void quarantine_flush(void *p) {
    quarantine *q = p;
    for (unsigned i = 0; i < QUARANTINE; i++)
        free(q->ring[i]);
    free(q);
}
static void quarantine_key(void) {
    pthread_key_create(&quar_key, quarantine_flush);
}
__attribute__((destructor)) static void quarantine_exit(void) {
    atomic_store(&exiting, 1);
    if (quar) /* the main thread's: thread-exit destructors do not run for it */
        quarantine_flush(quar);
    quar = NULL;
}

static void header_free(tj_tensor *t) {
    t->kind = RT_FREED;
    if (atomic_load_explicit(&exiting, memory_order_relaxed)) {
        free(t);
        return;
    }
    if (!quar) {
        pthread_once(&quar_once, quarantine_key);
        if (!(quar = calloc(1, sizeof *quar))) {
            free(t);
            return;
        }
        pthread_setspecific(quar_key, quar);
    }
    tj_tensor *old = quar->ring[quar->next];
    quar->ring[quar->next] = t;
    quar->next = (quar->next + 1) % QUARANTINE;
    free(old);
}

int rt_is_freed(const tj_tensor *t, const char *what) {
    if (!t || t->kind != RT_FREED)
        return 0;
    ir_errorf(TJ_ERR_STATE,
              "%s: tensor %p was already released (released by hand and by its "
              "scope, or twice by hand?)",
              what, (const void *)t);
    rt_log(RT_LOG_MISUSE, "%s", ir_last_error());
    return 1;
}

tj_tensor *rt_retain(tj_tensor *t) {
    if (t && !rt_is_freed(t, "retain"))
        atomic_fetch_add(&t->rc, 1);
    return t;
}

void rt_release(tj_tensor *t) {
    if (!t || rt_is_freed(t, "release"))
        return;
    if (atomic_fetch_sub(&t->rc, 1) != 1)
        return;
    rt_buffer_release(t->buf);
    free(t->msg);
    for (int i = 0; i < t->n_items; i++)
        rt_release(t->items[i]);
    free(t->items);
    header_free(t);
}

/* ---- references user code hands back --------------------------------------------------------
 * A traced function, a control-flow body or a switch branch returns "a new reference, or one its
 * scope owns". Which one is told by the user's own tj_retain/tj_release calls: while user code
 * runs (rt_user_enter .. rt_user_leave, nested per thread) each public tj_retain is logged and
 * each public tj_release cancels the latest logged retain of the same tensor. A returned tensor
 * with a retain left in its section's part of the log is a reference the code handed over:
 * rt_user_leave gives it to the innermost scope, so the callers' usual rule (the scope owns the
 * result; tj_keep moves it out) holds for both kinds. The library itself uses rt_retain and
 * rt_release, which are never logged. A full log stops logging: a returned reference is then
 * taken as scope-owned (at worst a leak, never a double release). */
enum { USER_LOG_MAX = 4096 };
static _Thread_local tj_tensor **ulog; /* NULL entries: retains cancelled by a release */
static _Thread_local size_t ulog_n, ulog_cap, ulog_mark;
static _Thread_local int ulog_depth;

static void ulog_push(tj_tensor *t) {
    while (ulog_n > ulog_mark && !ulog[ulog_n - 1]) /* cancelled entries on top */
        ulog_n--;
    if (ulog_n == ulog_cap) {
        size_t cap = ulog_cap ? 2 * ulog_cap : 64;
        tj_tensor **l = cap <= USER_LOG_MAX ? realloc(ulog, cap * sizeof *l) : NULL;
        if (!l)
            return;
        ulog = l, ulog_cap = cap;
    }
    ulog[ulog_n++] = t;
}

/* Cancels the latest logged retain of t at or above `from`; 1 if there was one. */
static int ulog_cancel(const tj_tensor *t, size_t from) {
    for (size_t i = ulog_n; i-- > from;)
        if (ulog[i] == t) {
            ulog[i] = NULL;
            return 1;
        }
    return 0;
}

rt_user_mark rt_user_enter(void) {
    rt_user_mark m = {ulog_n, ulog_mark};
    ulog_mark = ulog_n;
    ulog_depth++;
    return m;
}

tj_tensor *rt_user_leave(tj_tensor *r, rt_user_mark m) {
    if (r && ulog_cancel(r, m.at)) /* handed over: the innermost scope owns it now */
        rt_scoped(r);
    ulog_n = m.at; /* what the section retained and kept is its own business */
    ulog_mark = m.prev;
    if (--ulog_depth == 0) {
        free(ulog);
        ulog = NULL;
        ulog_n = ulog_cap = 0;
    }
    return r;
}

tj_tensor *tj_retain(tj_tensor *t) {
    if (ulog_depth && t && t->kind != RT_FREED)
        ulog_push(t);
    return rt_retain(t);
}

void tj_release(tj_tensor *t) {
    if (ulog_depth && t)
        ulog_cancel(t, 0);
    rt_release(t);
}

/* ---- scopes ---------------------------------------------------------------------------------- */
typedef struct scope {
    tj_tensor **items;
    size_t n, cap;
} scope;

static _Thread_local scope *scopes;
static _Thread_local int n_scopes, cap_scopes;

static void scope_push_item(scope *s, tj_tensor *t) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        tj_tensor **items = realloc(s->items, cap * sizeof *items);
        if (!items)
            return; /* the reference then stays with the caller: a leak, not a crash */
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = t;
}

tj_tensor *rt_scoped(tj_tensor *t) {
    if (t && n_scopes > 0)
        scope_push_item(&scopes[n_scopes - 1], t);
    return t;
}

void tj_scope_begin(void) {
    if (n_scopes == cap_scopes) {
        int cap = cap_scopes ? cap_scopes * 2 : 8;
        scope *s = realloc(scopes, (size_t)cap * sizeof *s);
        if (!s)
            return;
        scopes = s;
        cap_scopes = cap;
    }
    scopes[n_scopes++] = (scope){0};
}

void tj_scope_end(void) {
    if (n_scopes == 0)
        return;
    scope *s = &scopes[--n_scopes];
    for (size_t i = 0; i < s->n; i++)
        rt_release(s->items[i]);
    free(s->items);
    if (n_scopes == 0) {
        free(scopes);
        scopes = NULL;
        cap_scopes = 0;
    }
}

tj_tensor *tj_keep(tj_tensor *t) {
    if (!t || n_scopes == 0)
        return t; /* no scope owns it: the caller already does */
    rt_retain(t);
    if (n_scopes > 1)
        scope_push_item(&scopes[n_scopes - 2], t);
    return t;
}
