/* fuzz_image.c — libFuzzer target for program images (runtime/image.c, jit/cpu/image.c) and the
 * object loader behind them (runtime/objload.c): what a saved module's <function>.cpu.<target>.tjx
 * holds. The graph
 * is fixed (a small function compiled once at start-up); the input is an image's body and the
 * harness puts the header in front of it (magic, format, this build's code generator id, the
 * backend, no CPU feature required, the graph's hash and size), so every input reaches the plan and
 * object parsers whatever build made the corpus. Running saved code means trusting its author, so a
 * program that loads runs only when its code is the genuine object (the input holds the seed's
 * object bytes unchanged): then whatever else was mutated (the plan: work units, buffers,
 * symbols, groups) must have been refused or be harmless, and the results must equal the genuine
 * program's bit for bit; anything else aborts. The runtime's own reader (rt_image_read_steps, what
 * the runtime-only library loads) parses every input too, and runs the genuine one. The seed input
 * (the body of the function's own image) is written to $FUZZ_IMAGE_SEED when set. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"
#include "jit/jit.h"
#include "runtime/image.h"
#include "runtime/objload.h"
#include "tj_codegen_id.h"
#include <tracejit.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static ir_graph *graph;       /* the compiled function's graph, kept; the function is freed */
static unsigned char *object; /* the genuine program's object (its code), and its size */
static size_t object_size;
static tj_tensor *args[2], *want; /* fixed inputs and the genuine program's result */
static unsigned char *seed_body;  /* the genuine image's body (what the seed holds) */
static size_t seed_size;
static int ready;

static tj_tensor *model(tj_tensor *x, tj_tensor *w) {
    tj_tensor *h = tj_relu(tj_add(tj_matmul(x, w), tj_scalar_f32(0.5f)));
    return tj_sum(tj_softmax(tj_mul(h, h), -1), 1, (int[]){1}, 0);
}

/* The header the harness writes: the envelope (runtime/image.h) up to the plan section. */
static size_t header(unsigned char *p, const ir_graph *g) {
    size_t n = 0, cl = strlen(TJ_CODEGEN_ID);
    uint32_t v = RT_IMAGE_VERSION, len = (uint32_t)cl, cpu[RT_CPU_WORDS] = {0}, bl = 3;
    ir_hash128 h = ir_graph_layout_hash(g);
    memcpy(p + n, "TJX1", 4), n += 4;
    memcpy(p + n, &v, 4), n += 4;
    memcpy(p + n, &len, 4), n += 4;
    memcpy(p + n, TJ_CODEGEN_ID, cl), n += cl;
    memcpy(p + n, &bl, 4), n += 4;
    memcpy(p + n, "cpu", 3), n += 3;
    const char *target = rt_image_target();
    uint32_t tl = (uint32_t)strlen(target);
    memcpy(p + n, &tl, 4), n += 4;
    memcpy(p + n, target, tl), n += tl;
    memcpy(p + n, cpu, sizeof cpu), n += sizeof cpu;
    memcpy(p + n, &h.hi, 8), n += 8;
    memcpy(p + n, &h.lo, 8), n += 8;
    memcpy(p + n, &g->n_nodes, 4), n += 4;
    return n;
}

static void teardown(void) {
    ir_graph_free(graph);
    free(object);
    free(seed_body);
    tj_release(args[0]);
    tj_release(args[1]);
    tj_release(want);
}

/* The object inside an image: the ELF file after the plan (its u64 size right before it). */
static void find_object(const unsigned char *img, size_t size) {
    for (size_t i = 8; i + 4 <= size; i++)
        if (!memcmp(img + i,
                    "\x7f"
                    "ELF",
                    4)) {
            uint64_t n;
            memcpy(&n, img + i - 8, 8);
            if (n <= size - i && (object = malloc(n))) {
                memcpy(object, img + i, n);
                object_size = n;
            }
            return;
        }
}

static void setup(void) {
    ready = 1;
    setenv("TJ_CACHE", "0", 1);
    atexit(teardown);
    tj_function *fn = tj_function_new("fuzz_image", (void *)model, 2, NULL);
    tj_spec s[2] = {{TJ_F32, 2, {8, 96}, NULL}, {TJ_F32, 2, {96, 96}, NULL}};
    tj_concrete *c = tj_function_get_concrete(fn, 2, s);
    graph = c ? ir_graph_clone(c->graph) : NULL;
    const char *seed = getenv("FUZZ_IMAGE_SEED");
    size_t size = 0;
    unsigned char *img = c ? jit_cpu_program_image(c->prog, &size) : NULL, hdr[512];
    if (img)
        find_object(img, size);
    if (c) { /* fixed inputs, and what the genuine program makes of them */
        args[0] = tj_random_uniform(TJ_F32, 2, (int64_t[]){8, 96}, -1, 1, 1);
        args[1] = tj_random_uniform(TJ_F32, 2, (int64_t[]){96, 96}, -1, 1, 2);
        if (c->prog->vt->run(c->prog, args, 2, c->caps, &want) != TJ_OK)
            want = NULL;
    }
    size_t hn = graph ? header(hdr, graph) : 0;
    if (img && size > hn && (seed_body = malloc(size - hn))) {
        memcpy(seed_body, img + hn, size - hn);
        seed_size = size - hn;
    }
    FILE *f = seed && img && size > hn ? fopen(seed, "wb") : NULL;
    if (f) {
        fwrite(img + hn, 1, size - hn, f);
        fclose(f);
    }
    free(img);
    tj_function_free(fn);
}

/* Runs p on the fixed inputs: its results must be the genuine program's, bit for bit. */
static void expect_genuine(rt_program *p, const char *what) {
    if (!want)
        return;
    tj_tensor *got = NULL;
    tj_status st = p->vt->run(p, args, 2, NULL, &got);
    if (st != TJ_OK || !got || tj_tensor_numel(got) != tj_tensor_numel(want) ||
        memcmp(tj_tensor_data(got), tj_tensor_data(want),
               (size_t)tj_tensor_numel(want) * sizeof(float))) {
        fprintf(stderr, "fuzz_image: %s gave %s\n", what, st ? tj_last_error() : "other results");
        abort();
    }
    tj_release(got);
}

/* A refusal must be one of the statuses a damaged or foreign image gets. */
static void refused(const char *by) {
    if (ir_last_code() != TJ_ERR_CORRUPT && ir_last_code() != TJ_ERR_UNSUPPORTED &&
        ir_last_code() != TJ_ERR_OOM) {
        fprintf(stderr, "fuzz_image: %s refused it with an unexpected status %d: %s\n", by,
                ir_last_code(), ir_last_error());
        abort();
    }
}

/* libFuzzer sets up before the first input (what that input allocates must be freed by it);
 * the replay runner has no such hook: the first input sets up. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready)
        setup();
    if (!graph || size > (1u << 20))
        return 0;
    unsigned char *img = malloc(size + 512);
    if (!img)
        return 0;
    size_t hn = header(img, graph);
    memcpy(img + hn, data, size);
    rt_program *p = jit_cpu_program_from_image(graph, img, hn + size);
    /* genuine code: run it, the results must be the genuine ones */
    if (p && object && memmem(data, size, object, object_size))
        expect_genuine(p, "a loaded program with the genuine code");
    if (p)
        p->vt->free(p);
    else
        refused("the cpu backend");
    ir_clear_error();
    /* the runtime alone (its steps section): parsed and checked; run only when genuine, since it
     * trusts the image's steps as it trusts its code */
    p = rt_image_read_steps(graph, img, hn + size);
    if (p && seed_body && size == seed_size && !memcmp(data, seed_body, size))
        expect_genuine(p, "the genuine image read by the runtime alone");
    if (p)
        p->vt->free(p);
    else
        refused("the runtime alone");
    ir_clear_error();
    free(img);
    return 0;
}
