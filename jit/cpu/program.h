/* program.h — private to plan_decide.c and compile.c (deciding and compiling), the code
 * generator (llvm/generate.c), image.c (saving and loading) and program.c (the program around
 * them): the CPU backend's steps as it decides them. plan_decide.c turns the fusion partition into
 * steps (generated kernels, chains of small kernels, OpenBLAS products and direct convolutions
 * with their epilogues, reference-kernel nodes); compile.c finds their kernels in the code cache
 * or has the code generator emit them and fills each step's kernel address; program.c hands the
 * runtime the plan it runs (runtime/plan.h: each step becomes an rt_step, each epilogue group the
 * step's buffer list). image.c writes these steps and reads them back. Only llvm/ needs LLVM. */
#ifndef TJ_JIT_CPU_PROGRAM_H
#define TJ_JIT_CPU_PROGRAM_H

#include "jit/cpu/cpu.h"

/* How a step runs: STEP_GEN a generated kernel (an elementwise group, a reduce group, a matmul,
 * a softmax, a view, or a chain of those run as one function), STEP_BLAS a library product then
 * its fused consumer group (the epilogue), STEP_NODE the node as the executor runs it, STEP_CF a
 * scalar branch or loop lowered natively whole (codegen_cf.c), STEP_CONV an f32 convolution on
 * the direct kernels by bands with its epilogue and a max pool: the runtime's RT_STEP_KERNEL,
 * RT_STEP_GEMM, RT_STEP_NODE, RT_STEP_CF and RT_STEP_CONV (runtime/plan.h). */
enum { STEP_NODE, STEP_GEN, STEP_BLAS, STEP_CF, STEP_CONV };
enum { SUB_EW, SUB_RED, SUB_MM, SUB_SOFTMAX, SUB_VIEW, SUB_CHAIN };

typedef struct step step;
struct step {
    int kind, sub;
    uint32_t id; /* NODE, BLAS, CONV, CF: the node; GEN: the group (SUB_EW/RED) or the node */
    uint32_t n_in, n_out;
    uint32_t *in, *out; /* node ids: the kernel's buffers, inputs then outputs */
    rt_kernel_fn fn;
    rt_units plan;
    char name[64];
    uint32_t alias; /* 1 + an earlier step whose code this one's is (the same but for its name):
                       it calls that step's symbol; 0: its own */
    /* STEP_BLAS */
    rt_mm mm;
    const rt_blas *blas;
    const pass_group *epi; /* the fused consumer of the product; NULL: none (also STEP_CONV) */
    uint32_t src[2];       /* the nodes the product reads: its operands, or what a 2-D
                              transpose of one read (folded into the call's trans flag);
                              STEP_CONV: the input and the filter */
    uint32_t pool;         /* STEP_CONV: 1 + the max pool fused behind it; 0: none */
    uint8_t trans[2];
    /* SUB_CHAIN: the nodes its members computed (pictures and profiles); the members, as they
     * were steps (plan_decide.c; not kept by images) */
    uint32_t *chain_nodes, n_chain_nodes;
    struct step *members;
    uint32_t n_members;
    uint32_t kidx; /* its kernel's number: the name's suffix (kN, or cN for a chain) */
    /* RT_GENERIC_EW: SUB_EW, or a product's epilogue, a broadcasting elementwise kernel that
     * takes its outer extents at run time; RT_GENERIC_RED: a SUB_RED reduction over a kept
     * inner axis that takes its reduced length at run time (opts.shape_generic; never a chain's
     * member); 0: specialized */
    uint8_t generic;
    uint64_t key_h[2]; /* its kernel's structural key hashed two ways (decide_aliases), which
                          jit_cpu_kernels_hash combines; 0s: no key (no kernel, native control
                          flow) */
    uint8_t found;     /* its kernel was found in code loaded for another program (compile.c): not
                          generated */
};

/* The CPU program: the runtime's plan (what runs) and the decisions it came from. */
typedef struct cpu_prog {
    rt_plan rp; /* first: a cpu_prog is an rt_plan and an rt_program */
    pass_partition *part;
    step *steps;
    uint32_t n_steps;
    jit_cpu_shared *shared;
    char *key;         /* the code's cache key (codecache.c), kept for images */
    jit_cpu_opts opts; /* complete: par_min and exact_math resolved */
} cpu_prog;

/* Whether conv node id with its epilogue epi (NULL: none) and max pool pool_id (IR_NONE: none)
 * can run as one STEP_CONV. */
bool jit_cpu_conv_fusable(const ir_graph *g, uint32_t id, const pass_group *epi, uint32_t pool_id);

/* Whether step sp is small: its work is not split across threads and each output is at most
 * 64 KiB (what a chain may hold; plan_decide.c). */
bool jit_cpu_step_small(const cpu_prog *cp, const step *sp);
/* The nodes step sp computes, into out (room for the graph's node count); returns how many. */
uint32_t jit_cpu_step_nodes(const cpu_prog *cp, const step *sp, uint32_t *out);
/* The symbols to look up: the steps with a kernel of their own (not an alias), into names;
 * returns how many. */
uint32_t jit_cpu_symbol_names(const cpu_prog *cp, const char **names);
/* Partitions cp->rp.base.g, builds cp's steps and consts, compiles (or finds cached) kernels
 * (compile.c). o is complete (par_min and exact_math resolved). */
tj_status jit_cpu_plan(cpu_prog *cp, const jit_cpu_opts *o);
/* The plan without LLVM (plan_decide.c): partition, steps, consts, work units, chains and
 * aliases of cp (whose base.g and par_min are set). Names come after, from the key. */
tj_status jit_cpu_plan_decide(cpu_prog *cp, const jit_cpu_opts *o);
/* The structural hash of cp's kernels (after jit_cpu_plan_decide): per step with code, its
 * position and its kernel's key (step_key: op, dtypes, attributes, constants' content and the
 * extents the code bakes in, none for a flat elementwise loop, whose code serves every size), so
 * that another graph, or the same one at another shape, planning the same kernels shares their
 * code. Native control flow hashes the whole graph (its regions' code reads them whole). */
ir_hash128 jit_cpu_kernels_hash(const cpu_prog *cp);
/* The code's cache key: base (jit_cpu_code_key) and what of the plan changes the code. */
void jit_cpu_plan_key(const cpu_prog *cp, const jit_cpu_opts *o, const char *base, char *key,
                      size_t n);
/* Names every kernel (and chain member) of cp from its key. */
void jit_cpu_plan_names(cpu_prog *cp, const char *key);
/* Whether steps a and b of cp run the same code (their structural keys agree). */
bool jit_cpu_same_kernel(const cpu_prog *cp, const step *a, const step *b);
/* A program of g with no steps yet (out_slot filled), or NULL (error set). */
cpu_prog *jit_cpu_prog_new(const ir_graph *g, const jit_cpu_opts *o);
/* What follows the steps: the runtime's plan made from them (steps, labels, last uses, the raw
 * form) and the control-flow regions (compiled by region(sub, ctx)). */
tj_status jit_cpu_prog_finish(cpu_prog *cp, rt_program *(*region)(const ir_graph *, void *),
                              void *ctx);
void jit_cpu_prog_free(rt_program *p);

#endif /* TJ_JIT_CPU_PROGRAM_H */
