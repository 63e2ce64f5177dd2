/* cuda.c — NVIDIA GPUs as runtime devices (cuda.h). The driver API is opened with dlopen and its
 * few entry points resolved by their versioned names (cuMemAlloc_v2: what cuda.h's macros name),
 * so no CUDA header or library is needed to build. The driver is loaded once, on the first
 * question; its answer (the devices, or why there are none) is kept. Each device uses its
 * primary context, made current on the calling thread before every driver call, and a caching
 * allocator under the device's lock. Copies to the device are staged through pinned buffers
 * and asynchronous on the default stream (the host's memory may be reused at once: it was copied
 * into the ring); copies to the host wait for the work queued before them; sync waits for the
 * context's queued work. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda.h"

/* The driver API's types, as the driver's ABI has them (cuda.h). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CU_ATTR_CC_MAJOR = 75,
    CU_ATTR_CC_MINOR = 76,
};

enum { MAX_GPUS = 16 };

typedef struct block { /* a cached block of device memory */
    CUdeviceptr p;
    size_t size;
    struct block *next;
} block;

typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct { /* CUDA_KERNEL_NODE_PARAMS_v2 */
    CUfunction func;
    unsigned grid[3], block[3], shared;
    void **params, **extra;
    void *kern;
    CUcontext ctx;
} kernel_node_params;
/* Pinned staging for copies to the device: a ring of page-locked buffers, each with the event
 * that says when the GPU has read it. A copy in goes through the next buffer (waiting for its
 * event only if the GPU has not consumed it yet) and returns while the GPU copies: the host is
 * not held up behind the kernels queued before it (a pageable cuMemcpyHtoD waits for them). */
enum { STAGE_SLOTS = 4, STAGE_BYTES = 4 << 20, READ_SLOTS = 64, READ_BYTES = 16 };
typedef struct stage_slot {
    void *host;
    CUevent done;
} stage_slot;

typedef struct gpu {
    rt_device dev; /* first: a gpu is an rt_device */
    char name[16];
    CUdevice cu;
    CUcontext ctx;
    pthread_mutex_t mu; /* the cache and the stats */
    block *cache;
    block *spare; /* records of blocks handed out, kept for the next free: no malloc per call */
    rt_cuda_mem_stats st;
    pthread_mutex_t stage_mu; /* the ring */
    stage_slot stage[STAGE_SLOTS];
    int stage_next, stage_off; /* 1: pinned memory could not be had: pageable copies */
    /* small reads waited for later (rt_cuda_read_start): pinned slots of 16 bytes, an event
     * each, a bit per slot in use (under stage_mu) */
    unsigned char *reads;
    CUevent read_done[READ_SLOTS];
    uint64_t reads_busy;
    int reads_off;
} gpu;

static struct {
    pthread_once_t once;
    const char *why; /* NULL: usable */
    char why_buf[384];
    void *lib;
    int count;
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    /* graphs (optional: a driver without them runs every launch on its own) */
    CUresult (*GraphCreate)(CUgraph *, unsigned);
    CUresult (*GraphAddKernelNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                   const kernel_node_params *);
    CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const kernel_node_params *);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
    int graphs; /* all of the above resolved */
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    pthread_mutex_t mu; /* making devices */
    gpu *gpus[MAX_GPUS];
} D = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

/* "CUDA_ERROR_NO_DEVICE (100)" into buf: the driver's name for r, else ours for the errors that
 * say there is no usable GPU (the toolkit's stub library names none). */
static const char *err_name(CUresult r, char *buf, size_t n) {
    const char *s = NULL;
    if (!D.GetErrorName || D.GetErrorName(r, &s) != CUDA_SUCCESS || !s)
        s = r == 2     ? "CUDA_ERROR_OUT_OF_MEMORY"
            : r == 3   ? "CUDA_ERROR_NOT_INITIALIZED"
            : r == 34  ? "CUDA_ERROR_STUB_LIBRARY"
            : r == 35  ? "CUDA_ERROR_INSUFFICIENT_DRIVER"
            : r == 100 ? "CUDA_ERROR_NO_DEVICE"
            : r == 200 ? "CUDA_ERROR_INVALID_IMAGE"
            : r == 209 ? "CUDA_ERROR_NO_BINARY_FOR_GPU"
            : r == 500 ? "CUDA_ERROR_NOT_FOUND"
            : r == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
            : r == 701 ? "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
            : r == 719 ? "CUDA_ERROR_LAUNCH_FAILED"
                       : "CUDA error";
    snprintf(buf, n, "%s (%d)", s, r);
    return buf;
}

static void load(void) {
    const rt_config *cfg = rt_config_get();
    const char *path = cfg->cuda_driver && *cfg->cuda_driver ? cfg->cuda_driver : "libcuda.so.1";
    D.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!D.lib) {
        const char *e = dlerror();
        snprintf(D.why_buf, sizeof D.why_buf, "no NVIDIA driver: %s could not be opened (%s)", path,
                 e ? e : "?");
        D.why = D.why_buf;
        return;
    }
    const rt_cuda_sym syms[] = {
        {(void **)&D.Init, "cuInit"},
        {(void **)&D.DeviceGetCount, "cuDeviceGetCount"},
        {(void **)&D.DeviceGet, "cuDeviceGet"},
        {(void **)&D.DeviceGetName, "cuDeviceGetName"},
        {(void **)&D.DeviceGetAttribute, "cuDeviceGetAttribute"},
        {(void **)&D.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
        {(void **)&D.CtxSetCurrent, "cuCtxSetCurrent"},
        {(void **)&D.CtxSynchronize, "cuCtxSynchronize"},
        {(void **)&D.MemAlloc, "cuMemAlloc_v2"},
        {(void **)&D.MemFree, "cuMemFree_v2"},
        {(void **)&D.MemGetInfo, "cuMemGetInfo_v2"},
        {(void **)&D.MemcpyHtoD, "cuMemcpyHtoD_v2"},
        {(void **)&D.MemcpyDtoH, "cuMemcpyDtoH_v2"},
        {(void **)&D.MemcpyDtoD, "cuMemcpyDtoD_v2"},
        {(void **)&D.GetErrorName, "cuGetErrorName"},
        {(void **)&D.ModuleLoadData, "cuModuleLoadData"},
        {(void **)&D.ModuleUnload, "cuModuleUnload"},
        {(void **)&D.ModuleGetFunction, "cuModuleGetFunction"},
        {(void **)&D.LaunchKernel, "cuLaunchKernel"},
        {(void **)&D.MemHostAlloc, "cuMemHostAlloc"},
        {(void **)&D.MemFreeHost, "cuMemFreeHost"},
        {(void **)&D.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
        {(void **)&D.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
        {(void **)&D.EventCreate, "cuEventCreate"},
        {(void **)&D.EventRecord, "cuEventRecord"},
        {(void **)&D.EventSynchronize, "cuEventSynchronize"},
    };
    const char *missing = rt_cuda_resolve(D.lib, syms, sizeof syms / sizeof *syms);
    if (missing) {
        snprintf(D.why_buf, sizeof D.why_buf,
                 "the CUDA driver %s lacks %s (a driver older than CUDA 11?)", path, missing);
        D.why = D.why_buf;
        return;
    }
    const rt_cuda_sym graph_syms[] = {
        {(void **)&D.GraphCreate, "cuGraphCreate"},
        {(void **)&D.GraphAddKernelNode, "cuGraphAddKernelNode_v2"},
        {(void **)&D.GraphInstantiate, "cuGraphInstantiateWithFlags"},
        {(void **)&D.GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2"},
        {(void **)&D.GraphLaunch, "cuGraphLaunch"},
        {(void **)&D.GraphExecDestroy, "cuGraphExecDestroy"},
        {(void **)&D.GraphDestroy, "cuGraphDestroy"},
    };
    D.graphs = !rt_cuda_resolve(D.lib, graph_syms, sizeof graph_syms / sizeof *graph_syms);
    char e[96];
    CUresult r = D.Init(0);
    if (r != CUDA_SUCCESS) {
        snprintf(D.why_buf, sizeof D.why_buf, "no GPU: cuInit failed: %s (driver %s)",
                 err_name(r, e, sizeof e), path);
        D.why = D.why_buf;
        return;
    }
    int n = 0;
    r = D.DeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n <= 0) {
        snprintf(D.why_buf, sizeof D.why_buf, "no GPU: %s",
                 r != CUDA_SUCCESS ? err_name(r, e, sizeof e) : "the driver counts 0 devices");
        D.why = D.why_buf;
        return;
    }
    D.count = n < MAX_GPUS ? n : MAX_GPUS;
}

const char *rt_cuda_resolve(void *lib, const rt_cuda_sym *syms, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(*syms[i].slot = dlsym(lib, syms[i].name)))
            return syms[i].name;
    return NULL;
}

const char *rt_cuda_unavailable(void) {
    pthread_once(&D.once, load);
    return D.why;
}

int rt_cuda_count(void) {
    return rt_cuda_unavailable() ? 0 : D.count;
}

/* ---- the allocator (under g->mu) ------------------------------------------------------------- */
size_t rt_cuda_round(size_t size) {
    const size_t small = 1 << 20, step = 512, large = 2 << 20;
    size = size ? size : 1;
    return size <= small ? (size + step - 1) / step * step : (size + large - 1) / large * large;
}

static size_t release_cache(gpu *g) {
    size_t n = 0;
    while (g->cache) {
        block *b = g->cache;
        g->cache = b->next;
        D.MemFree(b->p);
        g->st.cached_bytes -= b->size;
        g->st.released++;
        free(b);
        n++;
    }
    return n;
}

static tj_status use(gpu *g, const char *what) {
    CUresult r = D.CtxSetCurrent(g->ctx);
    char e[96];
    return r == CUDA_SUCCESS ? TJ_OK
                             : ir_errorf(TJ_ERR_RUNTIME, "%s: %s: cuCtxSetCurrent failed: %s",
                                         g->name, what, err_name(r, e, sizeof e));
}

tj_status rt_cuda_use(rt_device *d, const char *what) {
    return use((gpu *)d, what);
}

static void *g_alloc(rt_device *d, size_t size) {
    gpu *g = (gpu *)d;
    size_t want = rt_cuda_round(size);
    pthread_mutex_lock(&g->mu);
    /* the cached block of the class lowest in memory: a call that starts from the same free
     * blocks is handed the same ones in the same order, whatever order they were freed in (a
     * CUDA graph's nodes keep their buffers from call to call) */
    block **best = NULL;
    for (block **pp = &g->cache; *pp; pp = &(*pp)->next)
        if ((*pp)->size == want && (!best || (*pp)->p < (*best)->p))
            best = pp;
    if (best) {
        block *b = *best;
        *best = b->next;
        void *p = (void *)(uintptr_t)b->p;
        g->st.cached_bytes -= want;
        g->st.in_use_bytes += want;
        g->st.reuses++;
        b->next = g->spare;
        g->spare = b;
        pthread_mutex_unlock(&g->mu);
        return p;
    }
    CUdeviceptr p = 0;
    if (use(g, "alloc")) {
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    CUresult r = D.MemAlloc(&p, want);
    bool retried = false;
    if (r == CUDA_ERROR_OUT_OF_MEMORY && g->cache) { /* the cache back to the driver, once */
        release_cache(g);
        retried = true;
        r = D.MemAlloc(&p, want);
    }
    if (r != CUDA_SUCCESS) {
        size_t free_b = 0, total = 0;
        char e[96];
        D.MemGetInfo(&free_b, &total);
        ir_errorf(r == CUDA_ERROR_OUT_OF_MEMORY ? TJ_ERR_OOM : TJ_ERR_RUNTIME,
                  "%s: out of memory allocating %zu bytes (%s; %zu of %zu bytes free%s)", g->name,
                  size, err_name(r, e, sizeof e), free_b, total,
                  retried ? "; the allocator's cache released and the allocation retried" : "");
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    g->st.driver_allocs++;
    g->st.in_use_bytes += want;
    pthread_mutex_unlock(&g->mu);
    return (void *)(uintptr_t)p;
}

/* Frees held back on this thread while a graph's launches are recorded (rt_cuda_defer_frees):
 * the kernels that read those blocks are not queued yet, so nothing may be queued into them. */
static __thread struct {
    gpu *g;
    struct deferred {
        void *p;
        size_t size;
    } * v;
    size_t n, cap;
} held;

static void g_free(rt_device *d, void *p, size_t size) {
    gpu *g = (gpu *)d;
    if (held.g == g && p) {
        if (held.n == held.cap) {
            size_t cap = held.cap ? 2 * held.cap : 64;
            struct deferred *v = realloc(held.v, cap * sizeof *v);
            if (v)
                held.v = v, held.cap = cap;
        }
        if (held.n < held.cap) {
            held.v[held.n++] = (struct deferred){p, size};
            return;
        }
        /* no memory to hold it: the block is leaked, never reused too soon */
        return;
    }
    size_t have = rt_cuda_round(size);
    pthread_mutex_lock(&g->mu);
    block *b = g->spare;
    if (b)
        g->spare = b->next;
    else
        b = malloc(sizeof *b); /* the first frees of a class only */
    g->st.in_use_bytes -= have;
    if (b) { /* kept for the next request of its class */
        *b = (block){(CUdeviceptr)(uintptr_t)p, have, g->cache};
        g->cache = b;
        g->st.cached_bytes += have;
    } else if (!use(g, "free")) { /* no memory to remember it by: back to the driver */
        D.MemFree((CUdeviceptr)(uintptr_t)p);
    } else {
        ir_clear_error(); /* a free reports nothing */
    }
    pthread_mutex_unlock(&g->mu);
}

static tj_status copy_status(gpu *g, CUresult r, const char *what, size_t size) {
    char e[96];
    return r == CUDA_SUCCESS ? TJ_OK
                             : ir_errorf(TJ_ERR_RUNTIME, "%s: %s of %zu bytes failed: %s", g->name,
                                         what, size, err_name(r, e, sizeof e));
}

/* The ring's buffers, made on the first copy in (under stage_mu); false: pageable copies. */
static bool stage_ready(gpu *g) {
    if (g->stage_off)
        return false;
    if (g->stage[0].host)
        return true;
    for (int i = 0; i < STAGE_SLOTS; i++)
        if (D.MemHostAlloc(&g->stage[i].host, STAGE_BYTES, 0) != CUDA_SUCCESS ||
            D.EventCreate(&g->stage[i].done, 2 /* CU_EVENT_DISABLE_TIMING */) != CUDA_SUCCESS) {
            g->stage[i].host = NULL;
            g->stage_off = 1; /* what was made stays until the process ends */
            return false;
        }
    return true;
}

static tj_status g_copy_in(rt_device *d, void *dst, const void *src, size_t size) {
    gpu *g = (gpu *)d;
    tj_status st = use(g, "copy to the device");
    if (st || !size)
        return st;
    pthread_mutex_lock(&g->stage_mu);
    if (!stage_ready(g)) {
        pthread_mutex_unlock(&g->stage_mu);
        return copy_status(g, D.MemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, size),
                           "copy to the device", size);
    }
    CUresult r = CUDA_SUCCESS;
    for (size_t at = 0; at < size && r == CUDA_SUCCESS;) {
        stage_slot *sl = &g->stage[g->stage_next];
        g->stage_next = (g->stage_next + 1) % STAGE_SLOTS;
        size_t n = size - at < STAGE_BYTES ? size - at : STAGE_BYTES;
        r = D.EventSynchronize(sl->done); /* the GPU has read what it held before */
        if (r == CUDA_SUCCESS) {
            memcpy(sl->host, (const char *)src + at, n);
            r = D.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst + at, sl->host, n, NULL);
        }
        if (r == CUDA_SUCCESS)
            r = D.EventRecord(sl->done, NULL);
        at += n;
        g->st.staged_copies++;
    }
    pthread_mutex_unlock(&g->stage_mu);
    return copy_status(g, r, "copy to the device", size);
}

/* The read slots, made on the first read (under stage_mu); false: reads are done at once. */
static bool reads_ready(gpu *g) {
    if (g->reads_off)
        return false;
    if (g->reads)
        return true;
    void *host = NULL;
    if (D.MemHostAlloc(&host, READ_SLOTS * READ_BYTES, 0) != CUDA_SUCCESS) {
        g->reads_off = 1;
        return false;
    }
    for (int i = 0; i < READ_SLOTS; i++)
        if (D.EventCreate(&g->read_done[i], 2 /* CU_EVENT_DISABLE_TIMING */) != CUDA_SUCCESS) {
            g->reads_off = 1; /* what was made stays until the process ends */
            return false;
        }
    g->reads = host;
    return true;
}

tj_status rt_cuda_read_start(rt_device *d, const void *src, size_t n, void *dst, int *slot) {
    gpu *g = (gpu *)d;
    *slot = -1;
    tj_status st = use(g, "read from the device");
    if (st)
        return st;
    int s = -1;
    pthread_mutex_lock(&g->stage_mu);
    if (n <= READ_BYTES && reads_ready(g) && ~g->reads_busy)
        s = __builtin_ctzll(~g->reads_busy), g->reads_busy |= 1ull << s;
    pthread_mutex_unlock(&g->stage_mu);
    if (s < 0) /* no slot: read now */
        return copy_status(g, D.MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n), "copy to the host",
                           n);
    CUresult r = D.MemcpyDtoHAsync(g->reads + s * READ_BYTES, (CUdeviceptr)(uintptr_t)src, n, NULL);
    if (r == CUDA_SUCCESS)
        r = D.EventRecord(g->read_done[s], NULL);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&g->stage_mu);
        g->reads_busy &= ~(1ull << s);
        pthread_mutex_unlock(&g->stage_mu);
        return copy_status(g, r, "copy to the host", n);
    }
    *slot = s;
    return TJ_OK;
}

tj_status rt_cuda_read_finish(rt_device *d, int slot, void *dst, size_t n) {
    gpu *g = (gpu *)d;
    if (slot < 0 || slot >= READ_SLOTS)
        return TJ_OK;
    tj_status st = use(g, "read from the device");
    CUresult r = st ? CUDA_SUCCESS : D.EventSynchronize(g->read_done[slot]);
    if (!st && r == CUDA_SUCCESS)
        memcpy(dst, g->reads + slot * READ_BYTES, n);
    pthread_mutex_lock(&g->stage_mu);
    g->reads_busy &= ~(1ull << slot);
    pthread_mutex_unlock(&g->stage_mu);
    return st ? st : copy_status(g, r, "copy to the host", n);
}

static tj_status g_copy_out(rt_device *d, void *dst, const void *src, size_t size) {
    gpu *g = (gpu *)d;
    tj_status st = use(g, "copy to the host");
    return st ? st
              : copy_status(g, size ? D.MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, size) : 0,
                            "copy to the host", size);
}

static tj_status g_copy(rt_device *d, void *dst, const void *src, size_t size) {
    gpu *g = (gpu *)d;
    tj_status st = use(g, "copy on the device");
    return st ? st
              : copy_status(g,
                            size ? D.MemcpyDtoD((CUdeviceptr)(uintptr_t)dst,
                                                (CUdeviceptr)(uintptr_t)src, size)
                                 : 0,
                            "copy on the device", size);
}

static tj_status g_sync(rt_device *d) {
    gpu *g = (gpu *)d;
    tj_status st = use(g, "synchronize");
    return st ? st : copy_status(g, D.CtxSynchronize(), "synchronize", 0);
}

static const rt_device_vt gpu_vt = {g_alloc, g_free, g_copy_in, g_copy_out, g_copy, g_sync};

bool rt_is_cuda(const rt_device *d) {
    return d && d->vt == &gpu_vt;
}

rt_device *rt_cuda_device(int ordinal) {
    const char *why = rt_cuda_unavailable();
    if (why)
        return (void)ir_errorf(TJ_ERR_UNSUPPORTED, "cuda: %s", why), NULL;
    if (ordinal < 0 || ordinal >= D.count)
        return (void)ir_errorf(TJ_ERR_INVALID, "cuda: no device cuda:%d (%d GPU%s)", ordinal,
                               D.count, D.count == 1 ? "" : "s"),
               NULL;
    pthread_mutex_lock(&D.mu);
    gpu *g = D.gpus[ordinal];
    if (!g && (g = calloc(1, sizeof *g))) {
        char e[96];
        CUresult r = D.DeviceGet(&g->cu, ordinal);
        if (r == CUDA_SUCCESS)
            r = D.PrimaryCtxRetain(&g->ctx, g->cu);
        if (r != CUDA_SUCCESS) {
            ir_errorf(TJ_ERR_RUNTIME, "cuda:%d: its context could not be made: %s", ordinal,
                      err_name(r, e, sizeof e));
            free(g);
            g = NULL;
        } else {
            snprintf(g->name, sizeof g->name, "cuda:%d", ordinal);
            g->dev = (rt_device){&gpu_vt, g->name, 0};
            pthread_mutex_init(&g->mu, NULL);
            pthread_mutex_init(&g->stage_mu, NULL);
            D.gpus[ordinal] = g;
        }
    } else if (!g) {
        ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    }
    pthread_mutex_unlock(&D.mu);
    return g ? &g->dev : NULL;
}

rt_cuda_mem_stats rt_cuda_mem_stats_of(rt_device *d) {
    rt_cuda_mem_stats s = {0};
    if (!rt_is_cuda(d))
        return s;
    gpu *g = (gpu *)d;
    pthread_mutex_lock(&g->mu);
    s = g->st;
    pthread_mutex_unlock(&g->mu);
    return s;
}

void rt_cuda_empty_cache(rt_device *d) {
    if (!rt_is_cuda(d))
        return;
    gpu *g = (gpu *)d;
    pthread_mutex_lock(&g->mu);
    if (!use(g, "empty the cache"))
        release_cache(g);
    else
        ir_clear_error();
    pthread_mutex_unlock(&g->mu);
}

/* ---- modules and launches -------------------------------------------------------------------- */
int rt_cuda_arch(rt_device *d) {
    if (!rt_is_cuda(d))
        return 0;
    gpu *g = (gpu *)d;
    int major = 0, minor = 0;
    if (D.DeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, g->cu) != CUDA_SUCCESS ||
        D.DeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, g->cu) != CUDA_SUCCESS)
        return 0;
    return major * 10 + minor;
}

tj_status rt_cuda_module_load(rt_device *d, const void *image, const char *what, void **mod) {
    gpu *g = (gpu *)d;
    *mod = NULL;
    if (!rt_is_cuda(d))
        return ir_errorf(TJ_ERR_INVALID, "%s: not a CUDA device", what);
    tj_status st = use(g, what);
    if (st)
        return st;
    CUmodule m = NULL;
    CUresult r = D.ModuleLoadData(&m, image);
    char e[96];
    if (r != CUDA_SUCCESS)
        return ir_errorf(TJ_ERR_RUNTIME, "%s: %s: the driver refused the kernels' module: %s", what,
                         g->name, err_name(r, e, sizeof e));
    *mod = m;
    return TJ_OK;
}

void rt_cuda_module_unload(rt_device *d, void *mod) {
    if (!mod || !rt_is_cuda(d))
        return; /* nothing loaded: the error that stopped the load stays the caller's */
    if (use((gpu *)d, "unload"))
        ir_clear_error(); /* an unload reports nothing */
    else
        D.ModuleUnload((CUmodule)mod);
}

tj_status rt_cuda_function(rt_device *d, void *mod, const char *name, void **fn) {
    gpu *g = (gpu *)d;
    CUfunction f = NULL;
    tj_status st = use(g, name);
    if (st)
        return st;
    CUresult r = D.ModuleGetFunction(&f, (CUmodule)mod, name);
    char e[96];
    if (r != CUDA_SUCCESS)
        return ir_errorf(TJ_ERR_RUNTIME, "%s: kernel %s not found in its module: %s", g->name, name,
                         err_name(r, e, sizeof e));
    *fn = f;
    return TJ_OK;
}

void rt_cuda_defer_frees(rt_device *d) {
    held.g = (gpu *)d;
}

void rt_cuda_release_deferred(rt_device *d) {
    if (held.g != (gpu *)d)
        return;
    held.g = NULL;
    for (size_t i = 0; i < held.n; i++)
        g_free(d, held.v[i].p, held.v[i].size);
    held.n = 0;
    free(held.v); /* not kept: a thread that ends holds nothing */
    held.v = NULL;
    held.cap = 0;
}

struct rt_cuda_graph {
    gpu *g;
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode *nodes;
    uint32_t n;
};

bool rt_cuda_graphs(void) {
    return !rt_cuda_unavailable() && D.graphs;
}

static kernel_node_params node_params(const rt_cuda_node *k, CUcontext ctx) {
    return (kernel_node_params){(CUfunction)k->fn,
                                {k->grid[0], k->grid[1], k->grid[2]},
                                {k->block, 1, 1},
                                0,
                                k->params,
                                NULL,
                                NULL,
                                ctx};
}

static tj_status graph_status(gpu *g, CUresult r, const char *what, const char *function) {
    char e[96];
    return r == CUDA_SUCCESS
               ? TJ_OK
               : ir_errorf(TJ_ERR_RUNTIME, "%s: %s of function '%s' failed: %s", g->name, what,
                           function && *function ? function : "?", err_name(r, e, sizeof e));
}

tj_status rt_cuda_graph_new(rt_device *d, const rt_cuda_node *k, uint32_t n, const char *function,
                            rt_cuda_graph **out) {
    gpu *g = (gpu *)d;
    *out = NULL;
    if (!D.graphs)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: the driver has no graphs", g->name);
    tj_status st = use(g, "graph");
    rt_cuda_graph *gr = st ? NULL : calloc(1, sizeof *gr);
    if (!st && (!gr || !(gr->nodes = calloc(n + 1, sizeof *gr->nodes)))) {
        free(gr);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory for a graph", g->name);
    }
    if (st)
        return st;
    gr->g = g;
    gr->n = n;
    CUresult r = D.GraphCreate(&gr->graph, 0);
    for (uint32_t i = 0; i < n && r == CUDA_SUCCESS; i++) { /* a chain: the stream's order */
        kernel_node_params kp = node_params(&k[i], g->ctx);
        r = D.GraphAddKernelNode(&gr->nodes[i], gr->graph, i ? &gr->nodes[i - 1] : NULL, i ? 1 : 0,
                                 &kp);
    }
    if (r == CUDA_SUCCESS)
        r = D.GraphInstantiate(&gr->exec, gr->graph, 0);
    if (r != CUDA_SUCCESS) {
        st = graph_status(g, r, "making the graph", function);
        rt_cuda_graph_free(gr);
        return st;
    }
    *out = gr;
    return TJ_OK;
}

tj_status rt_cuda_graph_set(rt_cuda_graph *gr, uint32_t i, const rt_cuda_node *k,
                            const char *function) {
    kernel_node_params kp = node_params(k, gr->g->ctx);
    return i < gr->n
               ? graph_status(gr->g, D.GraphExecKernelNodeSetParams(gr->exec, gr->nodes[i], &kp),
                              "updating the graph", function)
               : ir_errorf(TJ_ERR_INVALID, "%s: no graph node %u", gr->g->name, i);
}

tj_status rt_cuda_graph_launch(rt_cuda_graph *gr, const char *function) {
    tj_status st = use(gr->g, "graph");
    CUresult r = st ? CUDA_SUCCESS : D.GraphLaunch(gr->exec, NULL);
    if (!st && r == CUDA_SUCCESS && rt_config_get()->cuda_sync)
        r = D.CtxSynchronize();
    return st ? st : graph_status(gr->g, r, "the graph", function);
}

void rt_cuda_graph_free(rt_cuda_graph *gr) {
    if (!gr)
        return;
    if (gr->exec)
        D.GraphExecDestroy(gr->exec);
    if (gr->graph)
        D.GraphDestroy(gr->graph);
    free(gr->nodes);
    free(gr);
}

tj_status rt_cuda_launch(rt_device *d, void *fn, const unsigned grid[3], unsigned block,
                         unsigned shared, void **params, const char *kernel, const char *function) {
    gpu *g = (gpu *)d;
    tj_status st = use(g, kernel);
    if (st)
        return st;
    CUresult r = D.LaunchKernel((CUfunction)fn, grid[0], grid[1], grid[2], block, 1, 1, shared,
                                NULL, params, NULL);
    if (r == CUDA_SUCCESS && rt_config_get()->cuda_sync)
        r = D.CtxSynchronize(); /* TJ_CUDA_SYNC=1: a fault is found at the kernel that made it */
    char e[96];
    if (r != CUDA_SUCCESS)
        return ir_errorf(TJ_ERR_RUNTIME,
                         "%s: kernel %s of function '%s' failed: %s (grid %ux%ux%u, "
                         "%u threads a block)",
                         g->name, kernel, function && *function ? function : "?",
                         err_name(r, e, sizeof e), grid[0], grid[1], grid[2], block);
    return TJ_OK;
}
