/* image.c — the program image container (image.h): the envelope every backend's images share,
 * its checks, and the regions' nested images. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/image.h"
#include "runtime/objload.h"
#include "runtime/plan.h"

/* ---- bytes ----------------------------------------------------------------------------------- */
void rt_put(rt_wbuf *w, const void *src, size_t n) {
    if (w->oom || n == 0)
        return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n)
            cap *= 2;
        unsigned char *q = realloc(w->p, cap);
        if (!q) {
            w->oom = 1;
            return;
        }
        w->p = q, w->cap = cap;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}
void rt_put_u8(rt_wbuf *w, uint8_t v) {
    rt_put(w, &v, 1);
}
void rt_put_u32(rt_wbuf *w, uint32_t v) {
    rt_put(w, &v, 4);
}
void rt_put_i64(rt_wbuf *w, int64_t v) {
    rt_put(w, &v, 8);
}
void rt_put_str(rt_wbuf *w, const char *s) {
    rt_put_u32(w, (uint32_t)strlen(s));
    rt_put(w, s, strlen(s));
}
void rt_put_ids(rt_wbuf *w, const uint32_t *ids, uint32_t n) {
    rt_put_u32(w, n);
    rt_put(w, ids, (size_t)n * 4);
}

const void *rt_get(rt_rbuf *r, size_t n) {
    if (r->bad || n > r->n - r->at) {
        r->bad = 1;
        return NULL;
    }
    const void *q = r->p + r->at;
    r->at += n;
    return q;
}
uint8_t rt_get_u8(rt_rbuf *r) {
    const uint8_t *q = rt_get(r, 1);
    return q ? *q : 0;
}
uint32_t rt_get_u32(rt_rbuf *r) {
    uint32_t v = 0;
    const void *q = rt_get(r, 4);
    if (q)
        memcpy(&v, q, 4);
    return v;
}
int64_t rt_get_i64(rt_rbuf *r) {
    int64_t v = 0;
    const void *q = rt_get(r, 8);
    if (q)
        memcpy(&v, q, 8);
    return v;
}
void rt_get_str(rt_rbuf *r, char *buf, size_t cap) {
    uint32_t n = rt_get_u32(r);
    const char *q = n < cap ? rt_get(r, n) : NULL;
    if (!q) {
        r->bad = 1;
        buf[0] = 0;
        return;
    }
    memcpy(buf, q, n);
    buf[n] = 0;
}
uint32_t *rt_get_ids(rt_rbuf *r, uint32_t limit, uint32_t *n_out) {
    uint32_t n = rt_get_u32(r);
    const unsigned char *q = (size_t)n <= (r->n - r->at) / 4 ? rt_get(r, (size_t)n * 4) : NULL;
    uint32_t *ids = q ? malloc(((size_t)n + 1) * 4) : NULL;
    if (!ids) {
        r->bad = 1;
        return NULL;
    }
    memcpy(ids, q, (size_t)n * 4);
    for (uint32_t k = 0; k < n; k++)
        if (ids[k] >= limit) {
            r->bad = 1;
            free(ids);
            return NULL;
        }
    *n_out = n;
    return ids;
}

/* ---- writing --------------------------------------------------------------------------------- */
const char *rt_image_target(void) {
#if defined(__x86_64__)
#define IMG_ARCH "x86_64"
#elif defined(__aarch64__)
#define IMG_ARCH "aarch64"
#else
#define IMG_ARCH "unknown"
#endif
#if defined(__linux__)
#define IMG_SYS "linux-gnu"
#else
#define IMG_SYS "unknown"
#endif
    return IMG_ARCH "-" IMG_SYS;
}

/* A section: u64 size, then its bytes. */
static void put_section(rt_wbuf *w, const void *p, size_t n) {
    rt_put_i64(w, (int64_t)n);
    rt_put(w, p, n);
}

static tj_status write_image(rt_wbuf *w, const rt_program *p, const rt_image_ops *ops, int depth) {
    const ir_graph *g = p->g;
    if (depth > RT_IMAGE_MAX_DEPTH)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "%s image: regions nested deeper than %d",
                         ops->backend, RT_IMAGE_MAX_DEPTH);
    rt_put(w, "TJX1", 4);
    rt_put_u32(w, RT_IMAGE_VERSION);
    rt_put_str(w, ops->codegen_id);
    rt_put_str(w, ops->backend);
    rt_put_str(w, rt_image_target());
    uint32_t cpu[RT_CPU_WORDS];
    rt_cpu_features(cpu);
    rt_put(w, cpu, sizeof cpu);
    ir_hash128 h = ir_graph_layout_hash(g); /* a plan's indices are node positions */
    rt_put(w, &h.hi, 8);
    rt_put(w, &h.lo, 8);
    rt_put_u32(w, g->n_nodes);
    rt_wbuf plan = {0};
    tj_status st = ops->plan(&plan, p);
    if (!st && plan.oom)
        st = ir_errorf(TJ_ERR_OOM, "%s image: out of memory", ops->backend);
    if (!st)
        put_section(w, plan.p, plan.n);
    free(plan.p);
    rt_wbuf steps = {0}; /* the steps for the runtime alone, when the backend names its kernels */
    if (!st && ops->symbol)
        st = rt_plan_write_steps(&steps, (const rt_plan *)p, ops->symbol);
    if (!st && steps.oom)
        st = ir_errorf(TJ_ERR_OOM, "%s image: out of memory", ops->backend);
    if (!st)
        put_section(w, steps.p, steps.n);
    free(steps.p);
    if (st)
        return st;
    size_t code_size = 0;
    const void *code = ops->code(p, &code_size);
    put_section(w, code, code ? code_size : 0);
    /* the regions: a kind byte per slot, a nested image for the backend's own */
    rt_program *const *regions = ((const rt_plan *)p)->regions;
    rt_put_u32(w, regions ? 2 * g->n_nodes : 0);
    for (uint32_t i = 0; regions && i < 2 * g->n_nodes; i++) {
        const rt_program *r = regions[i];
        rt_put_u8(w, !r ? 0 : ops->is_own(r) ? 2 : 1);
        if (!r || !ops->is_own(r))
            continue;
        size_t at = w->n;
        rt_put_i64(w, 0); /* the nested image's size, filled in below */
        if ((st = write_image(w, r, ops, depth + 1)))
            return st;
        int64_t len = (int64_t)(w->n - at - 8);
        if (!w->oom)
            memcpy(w->p + at, &len, 8);
    }
    return TJ_OK;
}

unsigned char *rt_image_write(const rt_program *p, const rt_image_ops *ops, size_t *size) {
    *size = 0;
    rt_wbuf w = {0};
    tj_status st = write_image(&w, p, ops, 0);
    if (!st && w.oom)
        st = ir_errorf(TJ_ERR_OOM, "%s image: out of memory", ops->backend);
    if (st) {
        free(w.p);
        return NULL;
    }
    *size = w.n;
    return w.p;
}

/* ---- reading --------------------------------------------------------------------------------- */
/* A section of r: its bytes (NULL when it lies past the end). */
static const void *get_section(rt_rbuf *r, size_t *n) {
    int64_t len = rt_get_i64(r);
    const void *q =
        !r->bad && len >= 0 && (uint64_t)len <= r->n - r->at ? rt_get(r, (size_t)len) : NULL;
    *n = q ? (size_t)len : 0;
    return q;
}

static rt_program *read_image(const ir_graph *g, rt_rbuf *r, const rt_image_ops *ops, int depth) {
    const char *be = ops->backend ? ops->backend : "program";
    const unsigned char *magic = rt_get(r, 4);
    if (!magic || memcmp(magic, "TJX1", 4) != 0) {
        ir_errorf(TJ_ERR_CORRUPT, "%s image: not a tracejit program image", be);
        return NULL;
    }
    uint32_t version = rt_get_u32(r);
    char cg[256], backend[64], target[64];
    rt_get_str(r, cg, sizeof cg);
    if (!r->bad &&
        (version != RT_IMAGE_VERSION || (ops->codegen_id && strcmp(cg, ops->codegen_id) != 0))) {
        ir_errorf(TJ_ERR_UNSUPPORTED,
                  "%s image: made by another tracejit build (format %u, code generator %s; "
                  "this build: format %d, %s)",
                  be, version, cg, RT_IMAGE_VERSION,
                  ops->codegen_id ? ops->codegen_id : "any code generator");
        return NULL;
    }
    rt_get_str(r, backend, sizeof backend);
    rt_get_str(r, target, sizeof target);
    uint32_t need[RT_CPU_WORDS], have[RT_CPU_WORDS];
    const void *words = rt_get(r, sizeof need);
    uint64_t hi = (uint64_t)rt_get_i64(r), lo = (uint64_t)rt_get_i64(r);
    uint32_t n_nodes = rt_get_u32(r);
    if (r->bad || depth > RT_IMAGE_MAX_DEPTH) {
        ir_errorf(TJ_ERR_CORRUPT, "%s image: its header is damaged", be);
        return NULL;
    }
    if (!ops->backend)
        be = backend;
    if (strcmp(backend, be) != 0) {
        ir_errorf(TJ_ERR_UNSUPPORTED, "%s image: written by the %s backend", be, backend);
        return NULL;
    }
    if (strcmp(target, rt_image_target()) != 0) {
        ir_errorf(TJ_ERR_UNSUPPORTED, "%s image: compiled for %s; this machine is %s", be, target,
                  rt_image_target());
        return NULL;
    }
    memcpy(need, words, sizeof need);
    rt_cpu_features(have);
    int word = 0;
    uint32_t bits = 0;
    if (!rt_cpu_features_cover(have, need, &word, &bits)) {
        ir_errorf(TJ_ERR_UNSUPPORTED,
                  "%s image: compiled for a CPU with features this one lacks (cpuid word %d, "
                  "bits %08x)",
                  be, word, bits);
        return NULL;
    }
    ir_hash128 h = ir_graph_layout_hash(g);
    if (h.hi != hi || h.lo != lo || n_nodes != g->n_nodes) {
        ir_errorf(TJ_ERR_CORRUPT, "%s image: compiled for another graph (%u nodes; this one %u)",
                  be, n_nodes, g->n_nodes);
        return NULL;
    }
    rt_image_in in = {.ops = ops, .depth = depth};
    snprintf(in.backend, sizeof in.backend, "%s", backend);
    size_t plan_n = 0, steps_n = 0;
    const void *plan = get_section(r, &plan_n);
    const void *steps = plan ? get_section(r, &steps_n) : NULL;
    in.code = steps ? get_section(r, &in.code_size) : NULL;
    if (!in.code) {
        ir_errorf(TJ_ERR_CORRUPT, "%s image: its %s lies past the end", be,
                  !plan    ? "plan"
                  : !steps ? "steps"
                           : "code");
        return NULL;
    }
    in.plan = (rt_rbuf){plan, plan_n, 0, 0};
    in.steps = (rt_rbuf){steps, steps_n, 0, 0};
    in.slots = rt_get_u32(r);
    if (r->bad || (in.slots != 0 && in.slots != 2 * g->n_nodes)) {
        ir_errorf(TJ_ERR_CORRUPT, "%s image: %u region slots for %u nodes", be, in.slots,
                  g->n_nodes);
        return NULL;
    }
    in.regions = (rt_rbuf){r->p + r->at, r->n - r->at, 0, 0};
    r->at = r->n; /* the rest is the regions' */
    return ops->read(g, &in);
}

rt_program *rt_image_read(const ir_graph *g, const void *img, size_t size,
                          const rt_image_ops *ops) {
    if (!g || !img) {
        ir_errorf(TJ_ERR_INVALID, "%s image: the graph or the image is NULL", ops->backend);
        return NULL;
    }
    rt_rbuf r = {img, size, 0, 0};
    return read_image(g, &r, ops, 0);
}

rt_program *rt_image_region(const ir_graph *sub, void *ctx) {
    rt_image_in *in = ctx;
    rt_rbuf *r = &in->regions;
    uint8_t kind = 0;
    while (!r->bad && (kind = rt_get_u8(r)) == 0)
        ; /* slots without a region */
    if (r->bad || kind > 2) {
        ir_errorf(TJ_ERR_CORRUPT, "%s image: the regions do not match the graph's",
                  in->ops->backend);
        return NULL;
    }
    if (kind == 1)
        return rt_interp_new(sub);
    size_t n = 0;
    const void *q = get_section(r, &n);
    if (!q) {
        ir_errorf(TJ_ERR_CORRUPT, "%s image: a region's image lies past the end", in->ops->backend);
        return NULL;
    }
    rt_rbuf nested = {q, n, 0, 0};
    return read_image(sub, &nested, in->ops, in->depth + 1);
}

tj_status rt_image_regions_done(rt_image_in *in, bool has_regions) {
    if ((in->slots != 0) != has_regions)
        return ir_errorf(TJ_ERR_CORRUPT, "%s image: the regions do not match the graph's",
                         in->ops->backend);
    rt_rbuf *r = &in->regions;
    while (r->at < r->n)
        if (rt_get_u8(r) != 0) /* only empty slots may follow the last region */
            return ir_errorf(TJ_ERR_CORRUPT, "%s image: more regions than the graph has",
                             in->ops->backend);
    return TJ_OK;
}
