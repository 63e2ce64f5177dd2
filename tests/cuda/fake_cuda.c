/* fake_cuda.c — a stand-in for libcuda.so.1 where there is no GPU (loaded by the runtime through
 * TJ_CUDA_DRIVER): the driver API entry points runtime/cuda.c resolves, over host memory, so the
 * device code, its caching allocator and its error paths run in CI. FAKE_CUDA selects a fault:
 * "no_device" (cuInit fails with CUDA_ERROR_NO_DEVICE), "stub" (CUDA_ERROR_STUB_LIBRARY, as the
 * toolkit's stub library answers), "cap=N" (device memory of N bytes: cuMemAlloc beyond it fails
 * with CUDA_ERROR_OUT_OF_MEMORY), "copy_fail" (every copy fails with CUDA_ERROR_ILLEGAL_ADDRESS,
 * as after a kernel's bad write), "launch_fail" (every launch fails with
 * CUDA_ERROR_LAUNCH_FAILED), "noop_launch" (launches succeed and run nothing: what a call costs
 * the host, for bench_gpu's call_10op_hit row here). Modules: an image "TJEMU\n<path>" is a shared
 * object the CUDA backend's emulation built from its kernels' source (jit/cuda/emulate.c); the fake
 * opens it and runs each launch's grid with the object's tj_emu_launch. Any other image (a cubin,
 * PTX) is refused with CUDA_ERROR_INVALID_IMAGE, except under FAKE_CUDA=cubin: an ELF cubin is then
 * kept and its kernels found by name (NVRTC's real output reaches the driver), and launching one
 * fails with CUDA_ERROR_NO_BINARY_FOR_GPU. fake_cuda_counts reports the calls made. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

static size_t cap = (size_t)1 << 40, used;
static int copy_fail, launch_fail, noop_launch;
static int allocs, frees, htod, dtoh, dtod, syncs, launches;
static int ctx_token;

/* A block remembers its size in front of it, as the driver knows each allocation's. */
static size_t size_of(CUdeviceptr p) {
    return p ? ((size_t *)(uintptr_t)p)[-2] : 0;
}

CUresult cuInit(unsigned flags) {
    const char *m = getenv("FAKE_CUDA");
    (void)flags;
    if (m && !strcmp(m, "no_device"))
        return 100;
    if (m && !strcmp(m, "stub"))
        return 34;
    copy_fail = m && !strcmp(m, "copy_fail");
    launch_fail = m && !strcmp(m, "launch_fail");
    noop_launch = m && !strcmp(m, "noop_launch");
    if (m && !strncmp(m, "cap=", 4))
        cap = (size_t)strtoull(m + 4, NULL, 10);
    return 0;
}
CUresult cuDeviceGetCount(int *n) {
    *n = 2;
    return 0;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    *d = ordinal;
    return ordinal >= 0 && ordinal < 2 ? 0 : 101;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    (void)d;
    strncpy(name, "fake GPU", (size_t)len);
    return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    (void)d;
    *v = attr == 75 ? 9 : 0; /* compute capability 9.0 */
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    (void)d;
    *c = (CUcontext)&ctx_token;
    return 0;
}
CUresult cuCtxSetCurrent(CUcontext c) {
    return c == (CUcontext)&ctx_token ? 0 : 201;
}
CUresult cuCtxSynchronize(void) {
    __atomic_add_fetch(&syncs, 1, __ATOMIC_RELAXED);
    return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size) {
    if (__atomic_add_fetch(&used, size, __ATOMIC_RELAXED) > cap) {
        __atomic_sub_fetch(&used, size, __ATOMIC_RELAXED);
        return 2;
    }
    size_t *b = malloc(size + 16);
    if (!b)
        return 2;
    b[0] = size;
    *p = (CUdeviceptr)(uintptr_t)(b + 2);
    __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (!p)
        return 1;
    __atomic_sub_fetch(&used, size_of(p), __ATOMIC_RELAXED);
    free((size_t *)(uintptr_t)p - 2);
    __atomic_add_fetch(&frees, 1, __ATOMIC_RELAXED);
    return 0;
}
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
    *free_b = cap - used;
    *total = cap;
    return 0;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    if (copy_fail)
        return 700;
    memcpy((void *)(uintptr_t)dst, src, n);
    __atomic_add_fetch(&htod, 1, __ATOMIC_RELAXED);
    return 0;
}
/* Pinned memory and asynchronous copies: plain memory and copies done at once (in order, as a
 * single stream runs them); events are tokens whose waits return at once. */
CUresult cuMemHostAlloc(void **p, size_t size, unsigned flags) {
    (void)flags;
    return (*p = malloc(size ? size : 1)) ? 0 : 2;
}
CUresult cuMemFreeHost(void *p) {
    free(p);
    return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    (void)stream;
    return cuMemcpyHtoD_v2(dst, src, n);
}
static int event_token;
CUresult cuEventCreate(void **e, unsigned flags) {
    (void)flags;
    *e = &event_token;
    return 0;
}
CUresult cuEventRecord(void *e, void *stream) {
    (void)stream;
    return e == &event_token ? 0 : 400; /* CUDA_ERROR_INVALID_HANDLE */
}
CUresult cuEventSynchronize(void *e) {
    return e == &event_token ? 0 : 400;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    if (copy_fail)
        return 700;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    __atomic_add_fetch(&dtoh, 1, __ATOMIC_RELAXED);
    return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
    (void)stream;
    return cuMemcpyDtoH_v2(dst, src, n);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    if (copy_fail)
        return 700;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    __atomic_add_fetch(&dtod, 1, __ATOMIC_RELAXED);
    return 0;
}
CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case 0:
        *s = "CUDA_SUCCESS";
        return 0;
    case 2:
        *s = "CUDA_ERROR_OUT_OF_MEMORY";
        return 0;
    case 34:
        *s = "CUDA_ERROR_STUB_LIBRARY";
        return 0;
    case 100:
        *s = "CUDA_ERROR_NO_DEVICE";
        return 0;
    case 700:
        *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
        return 0;
    case 719:
        *s = "CUDA_ERROR_LAUNCH_FAILED";
        return 0;
    default:
        return 1;
    }
}

/* ---- modules: the emulation's shared objects ------------------------------------------------ */
typedef int (*emu_launch_fn)(void *fn, int sync, const unsigned grid[3], unsigned block,
                             void **params);
typedef struct fake_module {
    void *lib;
    emu_launch_fn launch;
    const char *elf; /* FAKE_CUDA=cubin: a cubin kept (its symbols are looked up; nothing runs) */
    size_t elf_size;
} fake_module;
typedef struct fake_function {
    fake_module *m;
    void *fn;
    int sync;
} fake_function;
/* functions live until the process ends (a CUfunction lives as long as its module) */
static fake_function *all_fns[1 << 16];
static int n_all;
static pthread_mutex_t launch_mu =
    PTHREAD_MUTEX_INITIALIZER; /* one grid at a time: the shim's
                                   state is per object, not per grid */

/* The size of an ELF64 image: its section headers end it. */
static size_t elf_size(const unsigned char *e) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, e + 0x28, 8);
    memcpy(&shentsize, e + 0x3a, 2);
    memcpy(&shnum, e + 0x3c, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

CUresult cuModuleLoadData(fake_module **mod, const void *image) {
    const char *s = image;
    const char *mode = getenv("FAKE_CUDA");
    if (mode && !strcmp(mode, "cubin") &&
        !memcmp(s,
                "\x7f"
                "ELF",
                4)) {
        fake_module *m = calloc(1, sizeof *m);
        if (!m)
            return 2;
        m->elf = s;
        m->elf_size = elf_size(image);
        *mod = m;
        return 0;
    }
    if (strncmp(s, "TJEMU\n", 6) != 0)
        return 200; /* CUDA_ERROR_INVALID_IMAGE: no GPU code runs here */
    fake_module *m = calloc(1, sizeof *m);
    if (!m)
        return 2;
    m->lib = dlopen(s + 6, RTLD_NOW | RTLD_LOCAL);
    m->launch = m->lib ? (emu_launch_fn)dlsym(m->lib, "tj_emu_launch") : NULL;
    if (!m->launch) {
        if (m->lib)
            dlclose(m->lib);
        free(m);
        return 200;
    }
    *mod = m;
    return 0;
}
CUresult cuModuleUnload(fake_module *m) {
    if (!m)
        return 1;
    if (m->lib)
        dlclose(m->lib);
    free(m);
    return 0;
}
/* Functions are kept per module name for the process (a handful in the tests). */
/* Whether the cubin's bytes hold name as a symbol's string (NUL on both sides). */
static int elf_has(const fake_module *m, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 1; i + n < m->elf_size; i++)
        if (m->elf[i - 1] == 0 && !memcmp(m->elf + i, name, n) && m->elf[i + n] == 0)
            return 1;
    return 0;
}

CUresult cuModuleGetFunction(fake_function **f, fake_module *m, const char *name) {
    if (m->elf) { /* FAKE_CUDA=cubin: found by name, never run */
        if (!elf_has(m, name))
            return 500;
        fake_function *r = calloc(1, sizeof *r);
        if (!r)
            return 2;
        r->m = m;
        pthread_mutex_lock(&launch_mu);
        if (n_all < (1 << 16))
            all_fns[n_all++] = r;
        pthread_mutex_unlock(&launch_mu);
        *f = r;
        return 0;
    }
    void *fn = dlsym(m->lib, name);
    if (!fn)
        return 500; /* CUDA_ERROR_NOT_FOUND */
    fake_function *r = malloc(sizeof *r);
    if (!r)
        return 2;
    char sync_name[128];
    snprintf(sync_name, sizeof sync_name, "%s_tj_sync", name);
    *r = (fake_function){m, fn, dlsym(m->lib, sync_name) != NULL};
    pthread_mutex_lock(&launch_mu);
    if (n_all < (1 << 16))
        all_fns[n_all++] = r;
    pthread_mutex_unlock(&launch_mu);
    *f = r;
    return 0;
}
CUresult cuLaunchKernel(fake_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra) {
    (void)shared, (void)stream, (void)extra;
    if (launch_fail)
        return 719; /* CUDA_ERROR_LAUNCH_FAILED */
    if (by != 1 || bz != 1 || bx == 0 || bx > 1024 || !gx || !gy || !gz)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    if (!f->m->launch)
        return 209;    /* a cubin: CUDA_ERROR_NO_BINARY_FOR_GPU (no GPU here to run it) */
    if (noop_launch) { /* queued and never run: the host's own cost of a call, measured alone */
        __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
        return 0;
    }
    unsigned grid[3] = {gx, gy, gz};
    pthread_mutex_lock(&launch_mu);
    int rc = f->m->launch(f->fn, f->sync, grid, bx, params);
    pthread_mutex_unlock(&launch_mu);
    __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
    return rc ? 719 : 0;
}

/* ---- graphs: a chain of kernel nodes, each launched in order when the graph is ------------- */
/* The parameters are copied when a node is added or set, as the driver copies them: the CUDA
 * backend's kernels take one tj_args (jit/cuda/prelude.c: 32 pointers and 4 int64s). A node's
 * handle is its place in the chain plus one (the same in the graph and its instantiation). */
enum { ARGS_BYTES = 32 * 8 + 4 * 8 };
typedef struct { /* CUDA_KERNEL_NODE_PARAMS_v2 */
    fake_function *func;
    unsigned grid[3], block[3], shared;
    void **params, **extra;
    void *kern, *ctx;
} node_params;
typedef struct fake_node {
    fake_function *f;
    unsigned grid[3], block;
    unsigned char args[ARGS_BYTES];
} fake_node;
typedef struct fake_graph {
    fake_node *nodes;
    size_t n, cap;
} fake_graph;
static int graph_launches, node_sets;

static CUresult set_node(fake_node *nd, const node_params *p) {
    if (!p || !p->func || !p->params || p->block[1] != 1 || p->block[2] != 1 || p->extra)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    nd->f = p->func;
    memcpy(nd->grid, p->grid, sizeof nd->grid);
    nd->block = p->block[0];
    memcpy(nd->args, p->params[0], ARGS_BYTES);
    return 0;
}
CUresult cuGraphCreate(fake_graph **g, unsigned flags) {
    (void)flags;
    return (*g = calloc(1, sizeof **g)) ? 0 : 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}
CUresult cuGraphAddKernelNode_v2(uintptr_t *node, fake_graph *g, const uintptr_t *deps,
                                 size_t n_deps, const node_params *p) {
    /* a chain: each node after the one added before it */
    if (n_deps != (g->n ? 1u : 0u) || (n_deps && deps[0] != g->n))
        return 1;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        fake_node *v = realloc(g->nodes, cap * sizeof *v);
        if (!v)
            return 2;
        g->nodes = v, g->cap = cap;
    }
    CUresult r = set_node(&g->nodes[g->n], p);
    if (r)
        return r;
    *node = ++g->n;
    return 0;
}
CUresult cuGraphInstantiateWithFlags(fake_graph **exec, fake_graph *g, unsigned long long flags) {
    (void)flags;
    fake_graph *e = calloc(1, sizeof *e);
    if (!e || !(e->nodes = malloc((g->n ? g->n : 1) * sizeof *e->nodes))) {
        free(e);
        return 2;
    }
    memcpy(e->nodes, g->nodes, g->n * sizeof *e->nodes);
    e->n = e->cap = g->n;
    *exec = e;
    return 0;
}
CUresult cuGraphExecKernelNodeSetParams_v2(fake_graph *exec, uintptr_t node, const node_params *p) {
    if (node < 1 || node > exec->n)
        return 400; /* CUDA_ERROR_INVALID_HANDLE */
    __atomic_add_fetch(&node_sets, 1, __ATOMIC_RELAXED);
    return set_node(&exec->nodes[node - 1], p);
}
CUresult cuGraphLaunch(fake_graph *exec, void *stream) {
    __atomic_add_fetch(&graph_launches, 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i < exec->n; i++) {
        fake_node *nd = &exec->nodes[i];
        void *params[] = {nd->args};
        CUresult r = cuLaunchKernel(nd->f, nd->grid[0], nd->grid[1], nd->grid[2], nd->block, 1, 1,
                                    0, stream, params, NULL);
        if (r)
            return r;
    }
    return 0;
}
CUresult cuGraphExecDestroy(fake_graph *exec) {
    free(exec->nodes);
    free(exec);
    return 0;
}
CUresult cuGraphDestroy(fake_graph *g) {
    free(g->nodes);
    free(g);
    return 0;
}
int fake_cuda_graph_launches(void) {
    return __atomic_load_n(&graph_launches, __ATOMIC_RELAXED);
}
int fake_cuda_graph_node_sets(void) {
    return __atomic_load_n(&node_sets, __ATOMIC_RELAXED);
}

/* What the runtime asked of the fake so far. */
void fake_cuda_counts(int out[6]) {
    int v[6] = {allocs, frees, htod, dtoh, dtod, syncs};
    memcpy(out, v, sizeof v);
}
int fake_cuda_launches(void) {
    return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}
