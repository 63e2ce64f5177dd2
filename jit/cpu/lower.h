/* lower.h — private to the CPU backend: what its code generator lowers and how each kernel's
 * work splits into units (lower_*.c), decided without LLVM so that a plan is made, saved and
 * checked by a library without the code generator (libtracejit_rt) exactly as by one with it.
 * The generator (llvm/) emits what these accept. */
#ifndef TJ_JIT_CPU_LOWER_H
#define TJ_JIT_CPU_LOWER_H

#include "jit/cpu/cpu.h"

/* f32 or f64: the float dtypes generated kernels compute in. */
static inline bool jit_cpu_flt(int dt) {
    return dt == TJ_F32 || dt == TJ_F64;
}

/* Fills L with fused group gr's loop: rt_ew_layout_of its inputs over its loop shape
 * (rt_ew_layout_free frees it). */
tj_status jit_cpu_ew_layout(const ir_graph *g, const pass_group *gr, rt_ew_layout *L);

/* Reduced-axes geometry of reduction n (rt_red_geometry). */
bool jit_cpu_red_geometry(const ir_graph *g, const ir_node *n, int64_t *outer, int64_t *len,
                          int64_t *inner);

/* Kept axes after the reduced ones: a unit is a block of up to JIT_CPU_RED_BLOCK consecutive i of
 * one o, whose accumulators live in a stack array updated row by row over k, so the i loop is
 * contiguous (it vectorizes) and every output element still accumulates in input order, as the
 * reference kernel does. */
enum { JIT_CPU_RED_BLOCK = RT_RED_BLOCK };

enum { JIT_CPU_VIEW_BLOCK = 16 }; /* output rows per unit of a gather (a cache line of f32) */
/* Units of view node id: output rows; a gather along the last axis (transposes) takes blocks of
 * JIT_CPU_VIEW_BLOCK rows (*blocked). base and s: the view's element offset and strides. */
tj_status jit_cpu_view_plan(const ir_graph *g, uint32_t id, rt_units *plan, bool *blocked,
                            int64_t *base, int64_t *s);

#endif /* TJ_JIT_CPU_LOWER_H */
