/* checks.c — the CUDA program's kernels that check their input (the cross-entropy's labels,
 * gather's indices): their flag words read back without waiting, and waited for at the call's
 * end. */
#include <stdint.h>

#include <string.h>

#include "jit/cuda/program.h"

/* Kernels that check their input (cuda.h: jit_cuda_checked): a word on the GPU starts at
 * UINT64_MAX and the kernel lowers it to (position << 32 | value) of the first bad one: the
 * cross-entropy's row and label outside [0, C), gather's index position and index outside
 * [0, N) (the value as int32; INT32_MIN when it does not fit). The word is read back without
 * waiting (queued after the kernel into pinned memory) and waited for when the call's steps are
 * all queued (finish): the host never stops between launches, and bad input is still the call's
 * error, in the host kernel's words. Pending reads are per thread, innermost call last. */
typedef struct pending_label {
    const rt_plan *p;
    uint32_t kernel;
    int slot;
    uint64_t word; /* where a read without a slot landed */
} pending_label;
enum { MAX_PENDING = 16 };
static __thread pending_label pending[MAX_PENDING];
static __thread int n_pending;

static tj_status label_error(const rt_plan *p, const jit_cuda_kernel *k, uint64_t bad) {
    const ir_graph *g = p->base.g;
    const ir_node *lg = ir_node_get(g, k->in[0]);
    int32_t label = (int32_t)(uint32_t)bad;
    long long row = (long long)(bad >> 32), classes = (long long)lg->dims[lg->rank - 1];
    if (k->kind == JIT_CK_GATHER) { /* the host kernel's words (runtime/kernels/shape.c) */
        const ir_node *n = ir_node_get(g, k->out[0]);
        long long ax = (long long)n->a.i[0], N = (long long)lg->dims[ax];
        char ps[128];
        ir_fmt_dims(ps, sizeof ps, lg->rank, lg->dims);
        return label == INT32_MIN
                   ? ir_errorf(TJ_ERR_RUNTIME,
                               "gather: index at position %lld out of range [0, %lld) on axis "
                               "%lld of params %s",
                               row, N, ax, ps)
                   : ir_errorf(TJ_ERR_RUNTIME,
                               "gather: index %d out of range [0, %lld) on axis %lld of params %s",
                               label, N, ax, ps);
    }
    return label == INT32_MIN
               ? ir_errorf(TJ_ERR_RUNTIME,
                           "sparse_softmax_xent: the label of row %lld is outside [0, %lld) (the "
                           "number of classes)",
                           row, classes)
               : ir_errorf(TJ_ERR_RUNTIME,
                           "sparse_softmax_xent: label %d of row %lld is outside [0, %lld) (the "
                           "number of classes)",
                           label, row, classes);
}

tj_status jit_cuda_launch_checked(rt_plan *p, uint32_t ki, void *fn, void **slot, void **params) {
    const jit_cuda_kernel *k = &((cuda_prog *)p)->k[ki];
    rt_device *d = p->dev;
    uint64_t bad = UINT64_MAX;
    void *w = d->vt->alloc(d, sizeof bad);
    if (!w)
        return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    *slot = w;
    tj_status st = d->vt->copy_in(d, w, &bad, sizeof bad);
    if (!st)
        st = rt_cuda_launch(d, fn, k->grid, k->block, 0, params, k->name, p->base.g->name);
    if (!st && n_pending < MAX_PENDING) {
        pending_label *q = &pending[n_pending];
        *q = (pending_label){p, ki, -1, UINT64_MAX};
        if (!(st = rt_cuda_read_start(d, w, sizeof bad, &q->word, &q->slot)))
            n_pending++;
    } else if (!st) { /* too many in one call: wait for this one here */
        st = d->vt->copy_out(d, &bad, w, sizeof bad);
        if (!st && bad != UINT64_MAX)
            st = label_error(p, k, bad);
    }
    d->vt->free(d, w, sizeof bad); /* its reuse queues behind the read */
    return st;
}

/* The call's pending label checks, this plan's, innermost first: the first bad one is its error
 * (after a failure of the steps, the reads are only drained). */
tj_status jit_cuda_finish(rt_plan *p, tj_status st) {
    const cuda_prog *cp = (const cuda_prog *)p;
    jit_cuda_recording_drop((cuda_prog *)cp); /* a run that failed inside a segment */
    while (n_pending > 0 && pending[n_pending - 1].p == p) {
        pending_label *q = &pending[--n_pending];
        uint64_t bad = q->word;
        tj_status r = rt_cuda_read_finish(p->dev, q->slot, &bad, sizeof bad);
        if (!st && r)
            st = r;
        else if (!st && bad != UINT64_MAX)
            st = label_error(p, &cp->k[q->kernel], bad);
    }
    return st;
}
