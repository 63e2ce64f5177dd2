/* graphs.c — runs of a CUDA program's generated kernels replayed as CUDA graphs (program.h:
 * graph_seg): recorded on a run's second call, made into a chain of kernel nodes, and from then
 * on the nodes whose buffers moved set and the graph launched. */
#include <stdlib.h>
#include <string.h>

#include "jit/cuda/program.h"

static __thread struct {
    cuda_prog *cp;
    graph_seg *seg;
    uint32_t i; /* kernels recorded */
} rec;

/* The recorded kernels launched one by one (no graph could be made). */
static tj_status launch_recorded(cuda_prog *cp, graph_seg *seg) {
    tj_status st = TJ_OK;
    for (uint32_t i = 0; i < seg->n && !st; i++) {
        void *params[] = {&seg->now[i]};
        st = rt_cuda_launch(cp->rp.dev, seg->nodes[i].fn, seg->nodes[i].grid, seg->nodes[i].block,
                            0, params, cp->k[seg->kernel[i]].name, cp->rp.base.g->name);
    }
    return st;
}

/* The end of a recording: the graph made (second run) or its moved nodes set, and launched. */
static tj_status flush_seg(cuda_prog *cp, graph_seg *seg) {
    const char *f = cp->rp.base.g->name;
    tj_status st = TJ_OK;
    if (!seg->graph) {
        void **pp = malloc(seg->n * sizeof *pp);
        if (!pp) {
            st = ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
        } else {
            for (uint32_t i = 0; i < seg->n; i++)
                pp[i] = &seg->now[i], seg->nodes[i].params = &pp[i];
            st = rt_cuda_graph_new(cp->rp.dev, seg->nodes, seg->n, f, &seg->graph);
            free(pp);
        }
        if (st) { /* no graph: these kernels go one by one, now and from now on */
            ir_clear_error();
            st = launch_recorded(cp, seg);
            seg->failed = true;
            return st;
        }
        memcpy(seg->set, seg->now, seg->n * sizeof *seg->set);
    } else {
        for (uint32_t i = 0; i < seg->n && !st; i++)
            if (memcmp(seg->set[i].p, seg->now[i].p, seg->used[i] * sizeof(void *))) {
                void *pi = &seg->now[i];
                seg->nodes[i].params = &pi;
                if (!(st = rt_cuda_graph_set(seg->graph, i, &seg->nodes[i], f)))
                    seg->set[i] = seg->now[i];
            }
    }
    return st ? st : rt_cuda_graph_launch(seg->graph, f);
}

/* Ends this thread's recording of cp, launched (flush) or dropped (a failed run: nothing of it
 * was queued, and its held frees go back). */
static tj_status end_recording(cuda_prog *cp, bool launch_it) {
    graph_seg *seg = rec.seg;
    tj_status st = launch_it ? flush_seg(cp, seg) : TJ_OK;
    rec.seg = NULL;
    rec.cp = NULL;
    rt_cuda_release_deferred(cp->rp.dev);
    pthread_mutex_unlock(&seg->mu);
    return st;
}

/* Kernel k of step s in segment seg: recorded, or launched now (returns false: the caller
 * launches it). */
bool jit_cuda_record(cuda_prog *cp, graph_seg *seg, uint32_t s, const kernel_args *args, void *fn,
                     const jit_cuda_kernel *k, tj_status *st) {
    const rt_config *cfg = rt_config_get();
    if (s == seg->first) {
        if (rec.seg || !cfg->cuda_graphs || cfg->cuda_sync || RT_PROFILING() ||
            RT_CHECKING_NUMERICS() || pthread_mutex_trylock(&seg->mu))
            return false;
        /* the first run one by one: a function called once pays for no graph */
        if (seg->failed || seg->runs++ < 1) {
            pthread_mutex_unlock(&seg->mu);
            return false;
        }
        rec.cp = cp, rec.seg = seg, rec.i = 0;
        rt_cuda_defer_frees(cp->rp.dev);
    }
    if (rec.seg != seg)
        return false;
    seg->used[rec.i] = k->n_in + k->n_out; /* the rest stay 0 */
    memcpy(seg->now[rec.i].p, args->p, seg->used[rec.i] * sizeof(void *));
    seg->nodes[rec.i] = (rt_cuda_node){fn, {k->grid[0], k->grid[1], k->grid[2]}, k->block, NULL};
    seg->kernel[rec.i] = (uint32_t)(k - cp->k);
    rec.i++;
    *st = s == seg->last ? end_recording(cp, true) : TJ_OK;
    return true;
}

void jit_cuda_recording_drop(cuda_prog *cp) {
    if (rec.cp == cp)
        end_recording(cp, false);
}

/* Whether step s is a generated kernel a graph may hold (not a library's call, not the
 * cross-entropy with its label read), or a source step (no inputs: nothing is queued or read
 * back), which a segment may span. */
static bool graphable(const cuda_prog *cp, uint32_t s) {
    int32_t ki = cp->kernel_of_step[s];
    const jit_cuda_kernel *k = ki >= 0 ? &cp->k[ki] : NULL;
    return k && !k->conv && !k->lt && !jit_cuda_by_blas(cp, k) && !jit_cuda_checked(k) &&
           k->src_len;
}

static bool spannable(const cuda_prog *cp, uint32_t s) {
    return cp->kernel_of_step[s] < 0 && cp->rp.steps[s].n_in == 0;
}

/* The graph segments: maximal runs of graphable kernels (sources between them), two or more. */
tj_status jit_cuda_make_segments(cuda_prog *cp) {
    const rt_plan *p = &cp->rp;
    if (!rt_cuda_graphs() || !(cp->seg_of_step = malloc((p->n_steps + 1) * sizeof(int32_t))))
        return cp->seg_of_step || !rt_cuda_graphs() ? TJ_OK
                                                    : ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    for (uint32_t s = 0; s < p->n_steps; s++)
        cp->seg_of_step[s] = -1;
    for (uint32_t s = 0; s < p->n_steps;) {
        if (!graphable(cp, s)) {
            s++;
            continue;
        }
        uint32_t first = s, last = s, n = 0;
        for (uint32_t t = s; t < p->n_steps && (graphable(cp, t) || spannable(cp, t)); t++)
            if (graphable(cp, t))
                last = t, n++;
        s = last + 1;
        if (n < 2)
            continue;
        graph_seg *v = realloc(cp->segs, (cp->n_segs + 1) * sizeof *v);
        if (!v)
            return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
        cp->segs = v;
        graph_seg *g = &v[cp->n_segs];
        *g = (graph_seg){.first = first, .last = last, .n = n};
        g->set = calloc(n, sizeof *g->set);
        g->now = calloc(n, sizeof *g->now);
        g->nodes = calloc(n, sizeof *g->nodes);
        g->kernel = calloc(n, sizeof *g->kernel);
        g->used = calloc(n, sizeof *g->used);
        pthread_mutex_init(&g->mu, NULL);
        cp->n_segs++;
        if (!g->set || !g->now || !g->nodes || !g->kernel || !g->used)
            return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
        for (uint32_t t = first; t <= last; t++)
            if (graphable(cp, t))
                cp->seg_of_step[t] = (int32_t)(cp->n_segs - 1);
    }
    return TJ_OK;
}

void jit_cuda_segs_free(cuda_prog *cp) {
    for (uint32_t i = 0; i < cp->n_segs; i++) {
        rt_cuda_graph_free(cp->segs[i].graph);
        pthread_mutex_destroy(&cp->segs[i].mu);
        free(cp->segs[i].set);
        free(cp->segs[i].now);
        free(cp->segs[i].nodes);
        free(cp->segs[i].kernel);
        free(cp->segs[i].used);
    }
    free(cp->segs);
    free(cp->seg_of_step);
}
