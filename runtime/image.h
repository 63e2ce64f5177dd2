/* image.h — compiled programs as bytes (what saved modules keep, so a library without a compiler
 * runs them), in one container for every backend. The runtime writes and checks the envelope:
 * the format and the build's code generator id, the backend and the target its code runs on, the
 * CPU features that code needs, and the graph it was compiled for. Inside are four sections: the
 * backend's plan (its own encoding, which the backend checks against the graph by deciding the
 * plan again), the steps as the runtime runs them (plan_image.c: what a library without that
 * backend reads, rt_image_read_steps), one code blob (an object the runtime's loader maps,
 * runtime/objload.c; symbols named by both) and the images of the control-flow regions.
 * Little-endian:
 *
 *   "TJX1" u32 version | str codegen id | str backend | str target | u32 cpu[RT_CPU_WORDS] |
 *   u64 graph hash hi, lo | u32 n_nodes | u64 plan size, plan | u64 steps size, steps |
 *   u64 code size, code | u32 region slots (0, or 2 per node), per slot u8 kind (0 none,
 *   1 interpreted, 2 an image: u64 size, image)
 *
 * Strings are u32 length + bytes; id lists u32 count + u32 ids. The byte helpers below serve the
 * backends' plan sections too. A damaged image is TJ_ERR_CORRUPT naming what is wrong; one this
 * build or machine cannot run (another build, target or backend, missing CPU features) is
 * TJ_ERR_UNSUPPORTED, and the caller compiles or interprets the graph instead. */
#ifndef TJ_RUNTIME_IMAGE_H
#define TJ_RUNTIME_IMAGE_H

#include "runtime/runtime.h"

enum { RT_IMAGE_VERSION = 9, RT_IMAGE_MAX_DEPTH = 16 };

/* ---- bytes ----------------------------------------------------------------------------------- */
typedef struct rt_wbuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} rt_wbuf;
void rt_put(rt_wbuf *w, const void *src, size_t n);
void rt_put_u8(rt_wbuf *w, uint8_t v);
void rt_put_u32(rt_wbuf *w, uint32_t v);
void rt_put_i64(rt_wbuf *w, int64_t v);
void rt_put_str(rt_wbuf *w, const char *s);
void rt_put_ids(rt_wbuf *w, const uint32_t *ids, uint32_t n);

/* Reading never passes the end: a read that would sets bad and gives zeros (or NULL). */
typedef struct rt_rbuf {
    const unsigned char *p;
    size_t n, at;
    int bad;
} rt_rbuf;
const void *rt_get(rt_rbuf *r, size_t n);
uint8_t rt_get_u8(rt_rbuf *r);
uint32_t rt_get_u32(rt_rbuf *r);
int64_t rt_get_i64(rt_rbuf *r);
/* A string into buf (cap bytes with the NUL); too long is bad. */
void rt_get_str(rt_rbuf *r, char *buf, size_t cap);
/* An id list, each id below limit; malloc'd (at least one element), NULL when bad. */
uint32_t *rt_get_ids(rt_rbuf *r, uint32_t limit, uint32_t *n_out);

/* ---- the container --------------------------------------------------------------------------- */
/* "x86_64-linux-gnu": the architecture and system this build's images run on. */
const char *rt_image_target(void);

typedef struct rt_image_in rt_image_in;
/* What a backend puts into and takes out of the container. A reader for any backend (the
 * runtime's, plan_image.c) leaves backend and codegen_id NULL: the format version alone then
 * says whether the steps and the kernels' calling convention are this build's. */
typedef struct rt_image_ops {
    const char *backend;    /* "cpu" */
    const char *codegen_id; /* the build's code generator id: images of another are refused */
    /* the symbol of step s's kernel in the code blob (p an rt_plan); NULL: the program's steps
     * are not written for the runtime alone (an empty steps section) */
    const char *(*symbol)(const rt_program *p, uint32_t s);
    /* whether p is one of the backend's programs (a region of another kind is interpreted) */
    bool (*is_own)(const rt_program *p);
    /* p's plan section into w, and its code blob (borrowed; NULL, 0: none) */
    tj_status (*plan)(rt_wbuf *w, const rt_program *p);
    const void *(*code)(const rt_program *p, size_t *size);
    /* the program for graph g (borrowed) from a checked envelope: in->plan, in->code; its
     * regions come from rt_image_region (rt_regions_new's callback) and are checked with
     * rt_image_regions_done. NULL with the error set. */
    rt_program *(*read)(const ir_graph *g, rt_image_in *in);
} rt_image_ops;

struct rt_image_in {
    char backend[64]; /* the backend that wrote it */
    rt_rbuf plan;     /* the plan section */
    rt_rbuf steps;    /* the steps section (empty: none) */
    const void *code; /* the code blob, code_size bytes */
    size_t code_size;
    rt_rbuf regions; /* the region slots */
    uint32_t slots;  /* 0, or 2 per node */
    const rt_image_ops *ops;
    int depth;
};

/* p (one of ops' backend's programs, an rt_plan) as an image: malloc'd, *size bytes; NULL with
 * the error set. */
unsigned char *rt_image_write(const rt_program *p, const rt_image_ops *ops, size_t *size);
/* The program an image holds for graph g (borrowed: it must outlive the program). */
rt_program *rt_image_read(const ir_graph *g, const void *img, size_t size, const rt_image_ops *ops);
/* rt_regions_new's callback for ops->read: the next region of the image (ctx: the rt_image_in),
 * interpreted or read as it was saved. */
rt_program *rt_image_region(const ir_graph *sub, void *ctx);
/* After the regions: TJ_OK when the image had region slots exactly if the program has regions,
 * and nothing but empty slots is left; TJ_ERR_CORRUPT otherwise. */
tj_status rt_image_regions_done(rt_image_in *in, bool has_regions);

/* ---- the steps, for the runtime alone (plan_image.c) ----------------------------------------- */
struct rt_plan;
/* p's steps section into w, each kernel named by symbol(p, s). */
tj_status rt_plan_write_steps(rt_wbuf *w, const struct rt_plan *p,
                              const char *(*symbol)(const rt_program *, uint32_t));
/* The program an image of any backend holds for graph g, read from its steps section without
 * that backend (the runtime-only library's saved modules): the envelope checked as
 * rt_image_read does (the format, target and CPU features, the graph; not the code generator),
 * the steps by rt_plan_check, the code mapped by objload. The plan is not decided again: the
 * image is trusted to compute what its graph asks, as native code is. */
rt_program *rt_image_read_steps(const ir_graph *g, const void *img, size_t size);
/* Whether p was read by rt_image_read_steps. */
bool rt_is_saved_program(const rt_program *p);
/* The structure of plan p against its graph: indices, each step's node and operands, every value
 * made once before it is read, every output made (TJ_ERR_CORRUPT naming the step). */
tj_status rt_plan_check(const struct rt_plan *p);

#endif /* TJ_RUNTIME_IMAGE_H */
