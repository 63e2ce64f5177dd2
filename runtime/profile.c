/* profile.c — a run traced as Chrome trace / Perfetto JSON (S28): complete events ("ph":"X")
 * with microsecond start and duration, the thread that ran them and arguments, loaded by
 * chrome://tracing and ui.perfetto.dev. Kinds ("cat"): "call" (a function call), "kernel" (one
 * step of a compiled program: its label names the fused ops), "op" (a node the interpreter or
 * the executor runs, an eager op), "trace", "passes", "compile". Off, the hooks cost one relaxed
 * load of rt_profiling; on, events are kept in memory (a mutex per event) and written by
 * tj_profile_stop, or at exit for TJ_PROFILE=file.json. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"

atomic_int rt_profiling;

typedef struct event {
    char *name, *args; /* args: a JSON object's members, or NULL */
    const char *cat;
    double ts, dur; /* microseconds */
    long tid;
} event;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static event *evs;
static size_t n_evs, cap_evs;
static char *out_path;
static double t_origin;
static int dropped; /* events lost to a failed allocation: said in the file */

double rt_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static long thread_id(void) {
    static _Thread_local long tid;
    if (!tid)
        tid = (long)syscall(SYS_gettid);
    return tid;
}

void rt_profile_event(const char *cat, const char *name, double t0, const char *args_fmt, ...) {
    double t1 = rt_profile_now();
    char *args = NULL;
    if (args_fmt) {
        va_list ap;
        va_start(ap, args_fmt);
        if (vasprintf(&args, args_fmt, ap) < 0)
            args = NULL;
        va_end(ap);
    }
    char *nm = strdup(name ? name : "?");
    pthread_mutex_lock(&mu);
    if (!atomic_load_explicit(&rt_profiling, memory_order_relaxed)) { /* stopped meanwhile */
        pthread_mutex_unlock(&mu);
        free(nm);
        free(args);
        return;
    }
    if (n_evs == cap_evs) {
        size_t cap = cap_evs ? 2 * cap_evs : 1024;
        event *ne = realloc(evs, cap * sizeof *ne);
        if (ne)
            evs = ne, cap_evs = cap;
    }
    if (!nm || n_evs == cap_evs) {
        dropped++;
        pthread_mutex_unlock(&mu);
        free(nm);
        free(args);
        return;
    }
    evs[n_evs++] = (event){nm, args, cat, t0 - t_origin, t1 - t0, thread_id()};
    pthread_mutex_unlock(&mu);
}

/* The length of the valid UTF-8 sequence at s (1 to 4), 0 when it is not one. */
static int utf8_len(const unsigned char *s) {
    int n = s[0] < 0x80             ? 1
            : (s[0] & 0xe0) == 0xc0 ? 2
            : (s[0] & 0xf0) == 0xe0 ? 3
            : (s[0] & 0xf8) == 0xf0 ? 4
                                    : 0;
    if (n == 2 && s[0] < 0xc2) /* overlong */
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

const char *rt_profile_json(char *buf, size_t n, const char *s) {
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p && k + 7 < n) {
        int len = utf8_len(p);
        if (*p == '"' || *p == '\\')
            k += (size_t)snprintf(buf + k, n - k, "\\%c", *p);
        else if (*p < 32)
            k += (size_t)snprintf(buf + k, n - k, "\\u%04x", *p);
        else if (len == 0) /* not UTF-8: the replacement character, as JSON must be UTF-8 */
            k += (size_t)snprintf(buf + k, n - k, "\\ufffd");
        else {
            memcpy(buf + k, p, (size_t)len);
            k += (size_t)len;
        }
        p += len ? len : 1;
    }
    buf[k < n ? k : n - 1] = 0;
    return buf;
}

/* s as a JSON string's contents */
static void put_json(FILE *f, const char *s) {
    size_t n = 6 * strlen(s) + 8;
    char stack[512], *buf = n <= sizeof stack ? stack : malloc(n);
    if (!buf)
        return;
    fputs(rt_profile_json(buf, n, s), f);
    if (buf != stack)
        free(buf);
}

static void free_events(void) {
    for (size_t i = 0; i < n_evs; i++) {
        free(evs[i].name);
        free(evs[i].args);
    }
    free(evs);
    evs = NULL;
    n_evs = cap_evs = 0;
}

tj_status tj_profile_start(const char *path) {
    if (!path || !*path)
        return ir_errorf(TJ_ERR_INVALID, "profile_start: the path is NULL or empty");
    char *p = strdup(path);
    if (!p)
        return ir_errorf(TJ_ERR_OOM, "profile_start: out of memory");
    pthread_mutex_lock(&mu);
    if (out_path) {
        pthread_mutex_unlock(&mu);
        free(p);
        return ir_errorf(TJ_ERR_INVALID,
                         "profile_start: a profile is already being recorded (for %s); "
                         "tj_profile_stop it first",
                         out_path);
    }
    out_path = p;
    free_events();
    dropped = 0;
    t_origin = rt_profile_now();
    atomic_store(&rt_profiling, 1);
    pthread_mutex_unlock(&mu);
    return TJ_OK;
}

tj_status tj_profile_stop(void) {
    pthread_mutex_lock(&mu);
    if (!out_path) {
        pthread_mutex_unlock(&mu);
        return ir_errorf(TJ_ERR_INVALID, "profile_stop: no profile is being recorded");
    }
    atomic_store(&rt_profiling, 0);
    char *path = out_path;
    out_path = NULL;
    FILE *f = fopen(path, "w");
    tj_status st = TJ_OK;
    if (!f) {
        st = ir_errorf(TJ_ERR_IO, "profile_stop: cannot write %s", path);
    } else {
        fprintf(f,
                "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tracejit\":\"%s\","
                "\"dropped_events\":%d},\n\"traceEvents\":[\n",
                tj_version(), dropped);
        fprintf(f,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"args\":{\"name\":"
                "\"tracejit\"}}",
                (long)getpid());
        for (size_t i = 0; i < n_evs; i++) {
            const event *e = &evs[i];
            fprintf(f, ",\n{\"name\":\"");
            put_json(f, e->name);
            fprintf(f,
                    "\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%ld,"
                    "\"tid\":%ld",
                    e->cat, e->ts, e->dur, (long)getpid(), e->tid);
            if (e->args)
                fprintf(f, ",\"args\":{%s}", e->args);
            fputc('}', f);
        }
        fprintf(f, "\n]}\n");
        if (fclose(f) != 0)
            st = ir_errorf(TJ_ERR_IO, "profile_stop: writing %s failed", path);
    }
    free_events();
    pthread_mutex_unlock(&mu);
    free(path);
    return st;
}

static void stop_at_exit(void) {
    if (atomic_load(&rt_profiling) && tj_profile_stop() != TJ_OK)
        fprintf(stderr, "tracejit: TJ_PROFILE: %s\n", tj_last_error());
}

void rt_profile_from_env(const char *path) {
    if (!path || !*path)
        return;
    if (tj_profile_start(path) != TJ_OK) {
        fprintf(stderr, "tracejit: TJ_PROFILE=%s: %s\n", path, tj_last_error());
        return;
    }
    atexit(stop_at_exit);
}

/* "[50,28,28,32]" into buf */
const char *rt_profile_dims(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < rank && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? "," : "", (long long)dims[d]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}
