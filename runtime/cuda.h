/* cuda.h — NVIDIA GPUs as runtime devices (runtime/device.h), through the CUDA driver API opened
 * with dlopen (runtime/cuda.c): the library builds and runs where CUDA is absent, and says why a
 * GPU is not there. TJ_CUDA_DRIVER names another driver library to open instead of libcuda.so.1
 * (the tests' fake driver; like LD_PRELOAD, it loads code: set it only to a library you trust).
 * A device's memory comes from a caching allocator (size classes; freed blocks kept for reuse
 * instead of cuMemFree per call, as PyTorch's and JAX's allocators do; on out-of-memory the cache
 * is released and the allocation tried once more). Copies to a device go through a ring of pinned
 * buffers and return while the GPU copies (in order with the kernels: one stream, the default);
 * copies to the host wait for the device. */
#ifndef TJ_RUNTIME_CUDA_H
#define TJ_RUNTIME_CUDA_H

#include "runtime/device.h"

/* NULL when the driver is loaded and has at least one GPU; otherwise why not, a sentence naming
 * the library or the driver's error ("no NVIDIA driver: libcuda.so.1 not found", "cuInit failed:
 * CUDA_ERROR_NO_DEVICE (100)"). Static. */
const char *rt_cuda_unavailable(void);
/* The number of GPUs (0 when unavailable). */
int rt_cuda_count(void);
/* GPU `ordinal` as a device ("cuda:N"), made on first use and kept for the process; NULL with the
 * error set (TJ_ERR_UNSUPPORTED: no GPU, with rt_cuda_unavailable's reason; TJ_ERR_INVALID: no
 * such ordinal). */
rt_device *rt_cuda_device(int ordinal);
/* Whether d is one of these devices. */
bool rt_is_cuda(const rt_device *d);

/* A CUDA library's entry point to resolve: where its address goes, and its name. */
typedef struct rt_cuda_sym {
    void **slot;
    const char *name;
} rt_cuda_sym;
/* Resolves the n entry points of lib (dlopen's handle; the driver, NVRTC): NULL when every one
 * was found, else the name of the first missing one. */
const char *rt_cuda_resolve(void *lib, const rt_cuda_sym *syms, size_t n);

/* What a device's allocator has done (for tests and profiles). */
typedef struct rt_cuda_mem_stats {
    uint64_t driver_allocs; /* cuMemAlloc calls that succeeded */
    uint64_t reuses;        /* allocations served from the cache */
    uint64_t released;      /* cached blocks given back to the driver (cuMemFree) */
    size_t cached_bytes;    /* bytes held in the cache now */
    size_t in_use_bytes;    /* bytes handed out and not freed */
    uint64_t staged_copies; /* pieces copied to the device through pinned staging, asynchronously */
} rt_cuda_mem_stats;
rt_cuda_mem_stats rt_cuda_mem_stats_of(rt_device *d);
/* Gives every cached block of d back to the driver. */
void rt_cuda_empty_cache(rt_device *d);
/* The size class a request of size bytes is served from: 512-byte steps up to 1 MiB, 2 MiB steps
 * above (PyTorch's rounding). */
size_t rt_cuda_round(size_t size);

/* ---- modules and launches (the CUDA backend's) ---------------------------------------------- */
/* d's compute capability as major * 10 + minor (90 for sm_90); 0 when unknown. */
int rt_cuda_arch(rt_device *d);
/* Loads a module (a cubin, PTX text or fatbin, as cuModuleLoadData takes) on d into *mod; an
 * error naming `what` and the driver's answer. */
tj_status rt_cuda_module_load(rt_device *d, const void *image, const char *what, void **mod);
void rt_cuda_module_unload(rt_device *d, void *mod);
/* A read of up to 16 bytes of d's memory at src, queued after the work before it without waiting
 * for it: *slot names the read for rt_cuda_read_finish, which waits for it and copies the bytes
 * to dst. Where no slot is free, the read is done at once into dst and *slot is -1 (finish then
 * only returns). An error names d. */
tj_status rt_cuda_read_start(rt_device *d, const void *src, size_t n, void *dst, int *slot);
tj_status rt_cuda_read_finish(rt_device *d, int slot, void *dst, size_t n);
/* ---- graphs: a run of kernels replayed with one launch ------------------------------------- */
/* Whether the driver has graphs (CUDA 12's kernel nodes). */
bool rt_cuda_graphs(void);
/* A kernel of a graph: as rt_cuda_launch takes it (the parameters are copied when the graph is
 * made or a node set). */
typedef struct rt_cuda_node {
    void *fn;
    unsigned grid[3], block;
    void **params;
} rt_cuda_node;
typedef struct rt_cuda_graph rt_cuda_graph;
/* A graph of the n kernels k, each after the one before (a stream's order), instantiated; an
 * error names the function and the driver's answer. */
tj_status rt_cuda_graph_new(rt_device *d, const rt_cuda_node *k, uint32_t n, const char *function,
                            rt_cuda_graph **out);
/* Node i's kernel parameters replaced (its buffers moved), for the graph's next launches. */
tj_status rt_cuda_graph_set(rt_cuda_graph *g, uint32_t i, const rt_cuda_node *k,
                            const char *function);
/* Queues the graph on d's default stream, as its kernels' launches would be. */
tj_status rt_cuda_graph_launch(rt_cuda_graph *g, const char *function);
void rt_cuda_graph_free(rt_cuda_graph *g);
/* While a graph's launches are recorded on this thread, d's frees on this thread are held back
 * (the kernels reading those blocks are not queued yet, so no copy or kernel may be queued into
 * them); released to the cache, in order, by rt_cuda_release_deferred once the graph is queued. */
void rt_cuda_defer_frees(rt_device *d);
void rt_cuda_release_deferred(rt_device *d);
/* Makes d's context current on this thread, before a CUDA library (cuBLAS, cuDNN) is called on
 * it; an error names d and `what`. */
tj_status rt_cuda_use(rt_device *d, const char *what);
/* The kernel called name in mod. */
tj_status rt_cuda_function(rt_device *d, void *mod, const char *name, void **fn);
/* Queues fn on d's default stream, grid blocks of `block` threads (x only) with `shared` bytes of
 * dynamic shared memory, parameters as cuLaunchKernel takes them. Launches are asynchronous: a
 * fault in a kernel is reported by a later copy or sync, or at the launch itself under
 * TJ_CUDA_SYNC=1. An error names the kernel, the function and the driver's answer. */
tj_status rt_cuda_launch(rt_device *d, void *fn, const unsigned grid[3], unsigned block,
                         unsigned shared, void **params, const char *kernel, const char *function);

#endif /* TJ_RUNTIME_CUDA_H */
