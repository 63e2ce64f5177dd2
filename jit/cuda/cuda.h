/* cuda.h — the CUDA backend's own header (jit/cuda/): kernels as CUDA C generated from the
 * fusion groups (source.c), compiled by NVRTC (nvrtc/) or, for the tests' fake driver, by the
 * host's C compiler through a small shim (emulate.c), and a program that launches them on one
 * stream of a GPU (program.c, backend.c). The jit core reaches it only through jit/backend.h. */
#ifndef TJ_JIT_CUDA_CUDA_H
#define TJ_JIT_CUDA_CUDA_H

#ifdef TJ_JIT_CORE
#error "the jit core reaches backends through jit/backend.h only"
#endif

#include <stdbool.h>

#include "jit/backend.h"
#include "runtime/device.h"
#include "runtime/plan.h"

/* The kernel ABI: every generated kernel takes one tj_args by value: its buffers (inputs then
 * outputs, device pointers) and a few counts. A group with more buffers runs on the host. */
enum { JIT_CUDA_MAX_BUFS = 32, JIT_CUDA_BLOCK = 256, JIT_CUDA_MAX_PARTS = 8 };

/* What a kernel computes (each kind one emitter in source.c). */
enum {
    JIT_CK_EW,      /* a fused elementwise group: a grid-stride loop over its elements */
    JIT_CK_RED_ROW, /* a reduction over contiguous rows: a block per row, a tree in shared memory */
    JIT_CK_RED_COL, /* a reduction over strided columns: a thread per output, in order */
    JIT_CK_SOFTMAX, /* softmax or log-softmax along the last axis: a block per row */
    JIT_CK_MM,      /* a matrix product: 16x16 tiles in shared memory, batches on the grid's z */
    JIT_CK_COPY,    /* a strided copy: transpose, slice, broadcast_to, reshape, (un)squeeze */
    JIT_CK_CONV,    /* a convolution or one of its gradients: a thread per output (source_nn.c) */
    JIT_CK_POOL,    /* max or average pooling, the max pool's gradient: a thread per output */
    JIT_CK_ONE_HOT, /* one-hot rows */
    JIT_CK_XENT,    /* sparse softmax cross-entropy: a block per row; bad labels flagged */
    JIT_CK_GATHER,  /* rows of params picked by indices: a thread per output; bad indices flagged */
    JIT_CK_N
};

typedef struct jit_cuda_kernel {
    char name[24]; /* "tjk<step>" */
    int kind;
    uint32_t n_in, n_out;
    uint32_t *in, *out;       /* node ids: its buffers, inputs then outputs (owned) */
    uint32_t *nodes, n_nodes; /* the nodes it computes (owned) */
    unsigned grid[3], block;
    bool sync; /* uses __syncthreads (the emulation runs its threads together) */
    rt_mm mm;  /* JIT_CK_MM: the product (cuBLAS takes it where it is there) */
    /* JIT_CK_CONV through cuDNN: the kernel is the filter's layout swap (HWIO to cuDNN's KRSC on
     * the way in; a filter gradient's KRSC to HWIO on the way out), conv the call (NULL in a
     * source made for the tests). dnn asks the emitter for that, and stays set when it fits. */
    bool dnn;
    struct jit_cudnn_conv *conv;
    /* JIT_CK_MM with its bias add as cuBLASLt's epilogue: inputs (a, b, bias), the output the
     * add's; no generated source. */
    struct jit_lt_mm *lt;
    size_t src_off, src_len; /* its text in the module's source */
} jit_cuda_kernel;

/* Whether node id may join a fused group / start a reduce group in this backend's kernels. */
bool jit_cuda_fusable(const ir_graph *g, uint32_t id, void *user);
bool jit_cuda_reducible(const ir_graph *g, uint32_t id, void *user);

/* A string being built (source.c); on OOM `oom` is set and appends do nothing. */
typedef struct jit_sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} jit_sbuf;
void jit_sbuf_printf(jit_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What every module's source starts with: the ABI, the shim under TJ_EMULATE, and the scalar
 * semantics both compilers share (runtime/kernels/scalar.h). */
void jit_cuda_prelude(jit_sbuf *b);
/* Emits the kernel for group gr of g (a fused or reduce group) or singleton node `id` (a
 * softmax, product or view) as k->name, filling k (its buffers, launch shape). TJ_ERR_UNSUPPORTED
 * (error cleared) when this backend does not generate it: the node runs on the host. */
tj_status jit_cuda_emit_group(jit_sbuf *b, const ir_graph *g, const pass_group *gr,
                              jit_cuda_kernel *k);
tj_status jit_cuda_emit_node(jit_sbuf *b, const ir_graph *g, uint32_t id, jit_cuda_kernel *k);
void jit_cuda_kernel_release(jit_cuda_kernel *k);

/* For the emitters (source.c, source_nn.c): a dtype's C type in the kernels ("float", "int64_t";
 * f16/bf16 as their uint16_t storage; NULL for strings); the blocks for `work` items of `block`
 * each (at least 1, at most TJ_CUDA_MAX_BLOCKS: the kernels loop grid-stride over the rest);
 * the kernel's buffer declarations (i<k> inputs, o<k> outputs, typed by their nodes); the network
 * ops' kernels (convolutions, pooling, one-hot), TJ_ERR_UNSUPPORTED for what they do not take. */
const char *jit_cuda_ctype(int dt);
unsigned jit_cuda_grid(int64_t work, unsigned block);
void jit_cuda_declare_bufs(jit_sbuf *b, const ir_graph *g, const jit_cuda_kernel *k);
tj_status jit_cuda_emit_nn(jit_sbuf *b, const ir_graph *g, uint32_t id, jit_cuda_kernel *k);
/* The geometry of convolution node n (or a gradient) as rt_conv_geom_of gives it, in the
 * forward's terms; false when the generated kernels do not take it (dtype, rank, groups). */
bool jit_cuda_conv_geom(const ir_graph *g, const ir_node *n, struct rt_conv_geom *c);
/* scalar.h's suffix of a dtype ("f32", "i64"; NULL for others); n ids copied (malloc'd, n + 1). */
const char *jit_cuda_sfx(int dt);
uint32_t *jit_cuda_ids_dup(const uint32_t *a, uint32_t n);
/* Opens kernel k of `kind`: its marker and signature, its buffers declared, its launch shape
 * set. threads: a thread per item of `work`, the grid-stride loop over e_ opened (the caller
 * closes it: "    }\n}\n"); blocks: a block per row of `work` rows, synchronizing (the caller
 * writes its block loop). */
void jit_cuda_open_threads(jit_sbuf *b, const ir_graph *g, jit_cuda_kernel *k, int kind,
                           int64_t work);
void jit_cuda_open_blocks(jit_sbuf *b, const ir_graph *g, jit_cuda_kernel *k, int kind,
                          int64_t rows);
/* The values of group gr's elementwise nodes at element index `idx` (a C expression), each input
 * read at the offset L gives it (coordinates c0.. when L is not flat), up to node `stop`
 * (IR_NONE: all); false when a node is not generated. */
bool jit_cuda_emit_ew_body(jit_sbuf *b, const ir_graph *g, const pass_group *gr,
                           const rt_ew_layout *L, const char *idx, uint32_t stop);
/* Whether kernel k flags bad input in a word after its buffers (a label, an index): the
 * program reads it back and makes it the call's error (backend.c). */
static inline bool jit_cuda_checked(const jit_cuda_kernel *k) {
    return k->kind == JIT_CK_XENT || k->kind == JIT_CK_GATHER;
}
/* source_red.c: a reduce group's kernel; a single reduction over any axes. */
tj_status jit_cuda_emit_red(jit_sbuf *b, const ir_graph *g, const pass_group *gr,
                            jit_cuda_kernel *k);
tj_status jit_cuda_emit_red_any(jit_sbuf *b, const ir_graph *g, const ir_node *r,
                                jit_cuda_kernel *k);

/* The module source the backend makes for optimized graph g, as its compile would (backend.c):
 * malloc'd, NULL with the error set; *n_kernels: the kernels in it. For tests (every kernel
 * through NVRTC and ptxas; the emulation against the reference kernels). cudnn_layouts: the
 * convolutions cuDNN takes as the filter swaps emitted for it (cuda.h: dnn). */
char *jit_cuda_source_of(const ir_graph *g, uint32_t *n_kernels, bool cudnn_layouts);

/* ---- cublas.c ---------------------------------------------------------------------------------
 */
typedef struct jit_cublas jit_cublas;
/* cuBLAS for GPU `ordinal` (device dev), or NULL with *why saying why not (not installed,
 * TJ_CUBLAS=0, no handle on this driver: the fake one). Kept for the process. */
const jit_cublas *jit_cublas_get(rt_device *dev, int ordinal, const char **why);
int jit_cublas_version(const jit_cublas *c);
/* C = A x B for product mm (f32, f64; batches as rt_mm_batch places them), device pointers, on
 * the default stream. An error names the kernel, the function and cuBLAS's status. */
tj_status jit_cublas_gemm(const jit_cublas *c, const rt_mm *mm, const void *A, const void *B,
                          void *C, const char *kernel, const char *function);

/* ---- cublaslt.c -------------------------------------------------------------------------------
 */
typedef struct jit_cublaslt jit_cublaslt;
typedef struct jit_lt_mm jit_lt_mm;
/* cuBLASLt for GPU `ordinal`, or NULL with *why saying why not; kept for the process. */
const jit_cublaslt *jit_cublaslt_get(rt_device *dev, int ordinal, const char **why);
size_t jit_cublaslt_version(void);
/* The call for 2-D f32 product mm followed by a bias add of its columns: descriptors made,
 * algorithm chosen. TJ_ERR_UNSUPPORTED (nothing set) when cuBLASLt does not take it. */
tj_status jit_lt_mm_new(const jit_cublaslt *lt, const rt_mm *mm, jit_lt_mm **out);
void jit_lt_mm_free(jit_lt_mm *p);
size_t jit_lt_mm_workspace(const jit_lt_mm *p);
/* C = A x B + bias, device pointers, on the default stream; an error names the kernel,
 * the function and cuBLASLt's status. */
tj_status jit_lt_mm_run(const jit_lt_mm *p, const void *A, const void *B, const void *bias, void *C,
                        void *ws, const char *kernel, const char *function);

/* ---- cudnn.c ----------------------------------------------------------------------------------
 */
typedef struct jit_cudnn jit_cudnn;
typedef struct jit_cudnn_conv jit_cudnn_conv;
struct rt_conv_geom;
/* cuDNN for GPU `ordinal` (device dev), or NULL with *why saying why not (not installed,
 * TJ_CUDNN=0, older than 8, no handle on this driver). Kept for the process. */
const jit_cudnn *jit_cudnn_get(rt_device *dev, int ordinal, const char **why);
/* cudnnGetVersion's (90100 for 9.1.0); 0 when not loaded. */
size_t jit_cudnn_version(void);
/* Whether cuDNN computes convolution geometry c as the reference does: extents that fit its ints,
 * pads that are symmetric as cuDNN applies them (its output extents equal c's), no empty side. */
bool jit_cudnn_fits(const struct rt_conv_geom *c);
/* The call for conv node op (IR_OP_CONV2D or a gradient) of dtype dt over geometry c: its
 * descriptors made and its algorithm chosen (the first deterministic one cuDNN's heuristics
 * offer). TJ_ERR_UNSUPPORTED (nothing set) when cuDNN does not take it. */
tj_status jit_cudnn_conv_new(const jit_cudnn *dnn, int op, int dt, const struct rt_conv_geom *c,
                             jit_cudnn_conv **out);
void jit_cudnn_conv_free(jit_cudnn_conv *cv);
size_t jit_cudnn_conv_workspace(const jit_cudnn_conv *cv);
size_t jit_cudnn_conv_filter_bytes(const jit_cudnn_conv *cv);
int jit_cudnn_conv_algo(const jit_cudnn_conv *cv);
/* Runs cv on the default stream: a, b the step's inputs as the node has them ((x, w), (dy, w),
 * (x, dy)), the filter in KRSC, out the output (a filter gradient in KRSC), ws its workspace.
 * An error names the kernel, the function and cuDNN's status. */
tj_status jit_cudnn_conv_run(const jit_cudnn_conv *cv, const void *a, const void *b, void *out,
                             void *ws, const char *kernel, const char *function);

/* ---- emulate.c ---------------------------------------------------------------------------------
 */
/* The module image for the fake driver: `source` compiled for the host by TJ_CUDA_EMULATE's C
 * compiler into a shared object, named by the image "TJEMU\n<path>" (malloc'd, NUL-terminated).
 * The fake driver (tests/cuda/fake_cuda.c) opens it and runs each launch's blocks and threads. */
tj_status jit_cuda_emulate_build(const char *compiler, const char *source, char **image);

#endif /* TJ_JIT_CUDA_CUDA_H */
