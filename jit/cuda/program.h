/* program.h — private to jit/cuda/: the CUDA backend's program (a device plan and what its
 * kernels, library calls and graphs need), shared by backend.c (building and compiling it),
 * libsteps.c (the library calls: cuBLAS, cuBLASLt, cuDNN), checks.c (the kernels' input checks,
 * waited for at the call's end) and graphs.c (runs of kernels replayed as CUDA graphs). */
#ifndef TJ_JIT_CUDA_PROGRAM_H
#define TJ_JIT_CUDA_PROGRAM_H

#include <pthread.h>

#include "jit/cuda/cuda.h"
#include "runtime/cuda.h"
#include "runtime/plan.h"

/* A run of generated kernels (steps first..last, sources between them allowed) replayed as one
 * CUDA graph: the first run launches them one by one, the second records their parameters and
 * makes the graph, later runs set the nodes whose buffers moved and launch it. One run at a time
 * replays it (others launch one by one). While a run records, its frees are held back
 * (rt_cuda_defer_frees): the recorded kernels are not queued yet, so nothing may be queued into
 * the blocks they read. */
typedef struct graph_seg {
    uint32_t first, last, n; /* steps; its kernels */
    pthread_mutex_t mu;
    int runs;
    bool failed; /* no graph could be made: one by one from then on */
    rt_cuda_graph *graph;
    struct kernel_args *set, *now; /* per kernel: the parameters in the graph, and this run's */
    rt_cuda_node *nodes;           /* per kernel */
    uint32_t *kernel;              /* per kernel: its index in the program */
    uint32_t *used;                /* per kernel: its buffers (the arguments that change) */
} graph_seg;

typedef struct cuda_prog {
    rt_plan rp; /* first: a cuda_prog is an rt_plan */
    graph_seg *segs;
    uint32_t n_segs;
    int32_t *seg_of_step; /* per step: its segment, or -1 */
    pass_partition *part;
    jit_cuda_kernel *k;
    uint32_t n_k;
    int32_t *kernel_of_step; /* per step: its kernel, or -1 (a host node) */
    void **fns;
    void **mods; /* the modules the kernels were compiled in (parts, compiled at once) */
    uint32_t n_mods;
    size_t prelude_len;     /* the source's shared head */
    const jit_cublas *blas; /* products through cuBLAS; NULL: the generated kernel */
    const jit_cudnn *dnn;   /* convolutions through cuDNN where it takes them; NULL: none */
    const jit_cublaslt *lt; /* products with their bias add as cuBLASLt epilogues */
    bool dnn_layouts;       /* jit_cuda_source_of: convolutions as cuDNN's would be emitted */
    char *emu_image;        /* the emulation's shared object, removed with the program */
} cuda_prog;

/* The kernels' one parameter (prelude.c's tj_args). */
typedef struct kernel_args {
    void *p[JIT_CUDA_MAX_BUFS];
    int64_t n[4];
} kernel_args;

/* Whether kernel k is a product cuBLAS computes (f32, f64) rather than the generated one. */
static inline bool jit_cuda_by_blas(const cuda_prog *cp, const jit_cuda_kernel *k) {
    return k->kind == JIT_CK_MM && cp->blas && !k->lt && (k->mm.dt == TJ_F32 || k->mm.dt == TJ_F64);
}

/* ---- graphs.c ---- */
/* Kernel k of step s (its arguments args, its function fn) in a run that replays as a graph:
 * recorded (true, *st the run's status so far: the graph launched at the run's last kernel), or
 * false: the caller launches it now. */
bool jit_cuda_record(cuda_prog *cp, graph_seg *seg, uint32_t s, const kernel_args *args, void *fn,
                     const jit_cuda_kernel *k, tj_status *st);
/* This thread's recording of cp dropped (a run that failed inside a segment); else nothing. */
void jit_cuda_recording_drop(cuda_prog *cp);
/* The program's graph segments found (none where the driver has no graphs). */
tj_status jit_cuda_make_segments(cuda_prog *cp);
void jit_cuda_segs_free(cuda_prog *cp);

/* ---- checks.c ---- */
/* Checked kernel ki (cuda.h: jit_cuda_checked) launched with its flag word in *slot, the flag's
 * read queued; jit_cuda_finish (the plan's finish) waits for the reads and makes a bad one the
 * call's error. */
tj_status jit_cuda_launch_checked(rt_plan *p, uint32_t ki, void *fn, void **slot, void **params);
tj_status jit_cuda_finish(rt_plan *p, tj_status st);

/* ---- libsteps.c ---- */
tj_status jit_cuda_launch_cudnn(rt_plan *p, const jit_cuda_kernel *k, void *fn, void *const *bufs);
tj_status jit_cuda_dnn_conv(cuda_prog *cp, jit_sbuf *src, uint32_t id, jit_cuda_kernel *k);
/* Per node: its group (-1: none), and how many nodes and graph outputs read it (2: two or more). */
typedef struct graph_index {
    int32_t *group_of;
    uint8_t *uses;
    bool *absorbed; /* per group: run as a product's epilogue */
} graph_index;
tj_status jit_cuda_index_graph(const cuda_prog *cp, graph_index *x);
void jit_cuda_index_free(graph_index *x);
bool jit_cuda_epilogue_of(const cuda_prog *cp, const graph_index *x, uint32_t gi, uint32_t *ge,
                          uint32_t *bias, bool *relu);
tj_status jit_cuda_lt_kernel(cuda_prog *cp, uint32_t gi, uint32_t ge, uint32_t bias,
                             jit_cuda_kernel *k, size_t at);
tj_status jit_cuda_blas_kernel(cuda_prog *cp, uint32_t id, jit_cuda_kernel *k, size_t at);
tj_status jit_cuda_relu_kernel(cuda_prog *cp, jit_sbuf *src, uint32_t ge, jit_cuda_kernel *k);

#endif /* TJ_JIT_CUDA_PROGRAM_H */
