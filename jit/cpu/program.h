/* program.h — private to program.c (running), plan.c (building) and image.c (saving and
 * loading): the CPU program's steps. plan.c turns the fusion partition into steps (generated
 * kernels, chains of small kernels, OpenBLAS products with their epilogues, reference-kernel
 * nodes), emits and compiles the module and fills each step's kernel address; program.c runs the
 * steps in order; image.c writes a program as bytes and makes one from them without LLVM. Only
 * plan.c needs LLVM. */
#ifndef TJ_JIT_CPU_PROGRAM_H
#define TJ_JIT_CPU_PROGRAM_H

#include "jit/cpu/cpu.h"

/* How a step runs. STEP_GEN: a generated kernel (an elementwise group, a reduce group, a matmul,
 * a softmax, or a chain of those run as one function); STEP_BLAS: OpenBLAS's gemm, then the fused
 * consumer group (the epilogue) block by block while the product is in cache; STEP_NODE: the
 * reference kernel (or a source / side effect, as the interpreter runs it); STEP_CF: a scalar
 * branch or loop lowered natively whole (codegen_cf.c; fn is a jit_cpu_cf_fn), which hands back
 * to the executor (the node's region programs) when it meets an error. STEP_CONV: an f32
 * convolution on the direct kernels (runtime/kernels/conv_direct.c) by bands of output rows, each
 * band's fused consumer group (the epilogue: bias, activation) and then a max pool consuming it
 * run while the band is in cache, so neither the convolution's output nor the activation's is
 * ever written to memory. */
enum { STEP_NODE, STEP_GEN, STEP_BLAS, STEP_CF, STEP_CONV };
enum { SUB_EW, SUB_RED, SUB_MM, SUB_SOFTMAX, SUB_VIEW, SUB_CHAIN };

typedef struct step step;
struct step {
    int kind, sub;
    uint32_t id; /* NODE, BLAS: the node; GEN: the group (SUB_EW/RED) or the node */
    uint32_t n_in, n_out;
    uint32_t *in, *out; /* node ids: the kernel's buffers, inputs then outputs */
    jit_cpu_kernel_fn fn;
    jit_cpu_ew_plan plan;
    char name[64];
    uint32_t alias; /* 1 + an earlier step whose code this one's is (the same but for its name):
                       it calls that step's symbol; 0: its own */
    /* STEP_BLAS */
    jit_cpu_mm mm;
    const rt_blas *blas;
    const pass_group *epi;      /* the fused consumer of the product; NULL: none (also STEP_CONV) */
    uint32_t src[2];            /* the nodes the product reads: its operands, or what a 2-D
                                   transpose of one read (folded into the call's trans flag);
                                   STEP_CONV: the input and the filter */
    uint32_t pool;              /* STEP_CONV: 1 + the max pool fused behind it; 0: none */
    struct rt_packed_b *packed; /* STEP_BLAS with a constant f32 B: B packed at the first run
                                   (runtime/kernels/gemm.h; atomic, owned by the step) */
    int packs;   /* STEP_BLAS: B is a constant the packed kernels take (set by prog_finish) */
    int no_pack; /* packing was tried and failed (atomic): OpenBLAS it is */
    /* STEP_BLAS: the epilogue is + bias and/or relu, applied by the gemm tiles (set by
     * prog_finish): the bias's index among the epilogue's buffers (-1: none), relu */
    int epi_simple, epi_relu;
    int32_t epi_bias;
    uint8_t trans[2];
    /* STEP_CF in the raw form: the scratch offsets of its results */
    int64_t *raw_res;
    /* SUB_CHAIN: the nodes its members computed (pictures and profiles); the members, as they
     * were steps (plan_decide.c; not kept by images) */
    uint32_t *chain_nodes, n_chain_nodes;
    struct step *members;
    uint32_t n_members;
    uint32_t kidx; /* its kernel's number: the name's suffix (kN, or cN for a chain) */
};

typedef struct cpu_prog {
    rt_program base;
    pass_partition *part;
    step *steps;
    uint32_t n_steps;
    tj_tensor **consts; /* per node: materialised CONST payloads */
    uint32_t *last_use; /* per node: last step reading it; UINT32_MAX: a graph output */
    jit_cpu_shared *shared;
    int64_t par_min;
    uint32_t max_bufs;
    int32_t *out_slot;    /* per node: the first graph output it is, or -1 */
    rt_program **regions; /* control-flow regions, compiled the same way (rt_regions_new) */
    /* the raw form (program_raw.c): scratch bytes per run (0: none) and per node where its
     * value lives: RAW_PARAM, RAW_CONST, or an offset into the scratch */
    size_t raw_bytes;
    int64_t *raw_off;
    size_t raw_hdr;       /* scratch offset of the tensor headers a reference-kernel step uses */
    int32_t *raw_inplace; /* per output: the param it may overwrite in place, or -1 */
    char **labels;        /* per step: what it runs, for pictures and profiles */
    char *key;            /* the code's cache key (codecache.c), kept for images */
    jit_cpu_opts opts;    /* complete: par_min and exact_math resolved */
} cpu_prog;

enum { RAW_NONE = -1, RAW_PARAM = -2, RAW_CONST = -3 };

/* Runs fn over [0, units), split across the runtime's pool when the work is large. */
void jit_cpu_run_units(cpu_prog *cp, jit_cpu_kernel_fn fn, const jit_cpu_ew_plan *plan,
                       void *const *bufs);
/* OpenBLAS step s: C = A x B (C of jit_cpu_blas_bytes(s)), then its epilogue on bufs (the
 * epilogue group's buffers, C in the product's place). */
void jit_cpu_blas_run(cpu_prog *cp, const step *s, const char *A, const char *B, char *C,
                      void *const *bufs);
size_t jit_cpu_blas_bytes(const step *s);
/* Whether conv node id with its epilogue epi (NULL: none) and max pool pool_id (IR_NONE: none)
 * can run as one STEP_CONV. */
bool jit_cpu_conv_fusable(const ir_graph *g, uint32_t id, const pass_group *epi, uint32_t pool_id);
/* STEP_CONV s: x (*) w, then its epilogue on bufs (the group's buffers; the convolution's entry
 * and, under a pool, the epilogue's output are set here), then its pool into pool_out. */
tj_status jit_cpu_conv_run(cpu_prog *cp, const step *s, const void *x, const void *w, void **bufs,
                           void *pool_out);
/* A concrete tensor header of node n's type over data (nothing to release). */
void jit_cpu_header(tj_tensor *h, const ir_node *n, void *data);
/* Plans cp's raw form when every step allows it (sets raw_bytes, or leaves it 0). */
tj_status jit_cpu_raw_plan(cpu_prog *cp);
size_t jit_cpu_raw_bytes(const rt_program *p);
tj_status jit_cpu_run_raw(rt_program *p, void *const *in, void *const *out, void *scratch);
int32_t jit_cpu_raw_inplace(const rt_program *p, uint32_t k);

/* The nodes step sp computes, into out (room for the graph's node count); returns how many. */
uint32_t jit_cpu_step_nodes(const cpu_prog *cp, const step *sp, uint32_t *out);
/* Partitions cp->base.g, builds cp's steps and consts, compiles (or finds cached) kernels
 * (LLVM: plan.c). o is complete (par_min and exact_math resolved). */
tj_status jit_cpu_plan(cpu_prog *cp, const jit_cpu_opts *o);
/* The plan without LLVM (plan_decide.c): partition, steps, consts, work units, chains and
 * aliases of cp (whose base.g and par_min are set). Names come after, from the key. */
tj_status jit_cpu_plan_decide(cpu_prog *cp, const jit_cpu_opts *o);
/* The code's cache key: base (jit_cpu_code_key) and what of the plan changes the code. */
void jit_cpu_plan_key(const cpu_prog *cp, const jit_cpu_opts *o, const char *base, char *key,
                      size_t n);
/* Names every kernel (and chain member) of cp from its key. */
void jit_cpu_plan_names(cpu_prog *cp, const char *key);
/* Whether steps a and b of cp run the same code (their structural keys agree). */
bool jit_cpu_same_kernel(const cpu_prog *cp, const step *a, const step *b);
/* A program of g with no steps yet (out_slot filled), or NULL (error set). */
cpu_prog *jit_cpu_prog_new(const ir_graph *g, const jit_cpu_opts *o);
/* What follows the steps: labels, last_use, max_bufs, the raw form and the control-flow regions
 * (compiled by region(sub, ctx)). */
tj_status jit_cpu_prog_finish(cpu_prog *cp, rt_program *(*region)(const ir_graph *, void *),
                              void *ctx);
void jit_cpu_prog_free(rt_program *p);

#endif /* TJ_JIT_CPU_PROGRAM_H */
