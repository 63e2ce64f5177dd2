/* bench_passes.c — times the default pass pipeline (simplify, fold, cse, simplify, prune to a
 * fixed point) on synthetic graphs of 100 .. 100,000 nodes: random-ish mixes of elementwise ops
 * over params with foldable constant subexpressions, x*1 / neg(neg x) patterns, duplicates that
 * appear after folding, and dead code. Needs only the ir + passes objects; a tiny evaluator for
 * f32 add/sub/mul/neg stands in for the reference kernels. Prints a table (median of several
 * runs, ns per input node, and the ratio to building the same graph through ir_add, measured in
 * the same run; also the median CPU time per node, which a shared machine disturbs less than wall
 * time, and the load average), writes bench/out/passes.json (run from the repository root, as
 * bench/run does; $TJ_BENCH_OUT overrides the folder) and appends bench.h records to
 * $TJ_BENCH_JSON.
 * --quick: fewer runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "ir/ir.h"
#include "passes/passes.h"

#define W 16 /* every tensor is f32[16] or a scalar */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int eval(void *user, ir_graph *g, const ir_node *n, const uint32_t *in, uint32_t n_in,
                uint32_t *blob_out) {
    if (n->dtype != TJ_F32)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "bench evaluator: f32 only");
    int64_t numel = ir_numel(n->rank, n->dims);
    float out[W];
    const ir_node *a = ir_node_get(g, in[0]);
    const float *pa = ir_blob_get(g, a->a.blob)->data;
    const float *pb = NULL;
    int64_t na = ir_numel(a->rank, a->dims), nb = 1;
    if (n_in > 1) {
        const ir_node *b = ir_node_get(g, in[1]);
        pb = ir_blob_get(g, b->a.blob)->data;
        nb = ir_numel(b->rank, b->dims);
    }
    if (numel > W)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "bench evaluator: too large");
    for (int64_t i = 0; i < numel; i++) {
        float x = pa[na == 1 ? 0 : i], y = pb ? pb[nb == 1 ? 0 : i] : 0;
        switch (n->op) {
        case IR_OP_ADD:
            out[i] = x + y;
            break;
        case IR_OP_SUB:
            out[i] = x - y;
            break;
        case IR_OP_MUL:
            out[i] = x * y;
            break;
        case IR_OP_NEG:
            out[i] = -x;
            break;
        default:
            return ir_errorf(TJ_ERR_UNSUPPORTED, "bench evaluator: %s", ir_ops[n->op].name);
        }
    }
    *blob_out = ir_add_blob(g, out, sizeof(float) * (size_t)numel);
    return *blob_out ? TJ_OK : TJ_ERR_OOM;
}

static uint32_t add_node(ir_graph *g, int op, uint32_t a, uint32_t b) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    uint32_t in[2] = {a, b};
    return ir_add(g, &p, in, ir_ops[op].n_in == 1 ? 1 : 2);
}

static uint32_t add_const(ir_graph *g, float v) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_CONST;
    p.dtype = TJ_F32;
    p.a.blob = ir_add_blob(g, &v, sizeof v);
    return ir_add(g, &p, NULL, 0);
}

/* A graph of about n nodes. */
static ir_graph *build(uint32_t n) {
    ir_graph *g = ir_graph_new("bench");
    uint32_t *vals = malloc(sizeof *vals * (n + 16));
    uint32_t nv = 0;
    for (int i = 0; i < 4; i++) {
        ir_node p;
        memset(&p, 0, sizeof p);
        p.op = IR_OP_PARAM;
        p.dtype = TJ_F32;
        p.rank = 1;
        p.dims[0] = W;
        p.a.i[0] = i;
        vals[nv++] = ir_add(g, &p, NULL, 0);
    }
    static const int ew[] = {IR_OP_ADD,  IR_OP_MUL, IR_OP_SUB, IR_OP_MAXIMUM,
                             IR_OP_TANH, IR_OP_EXP, IR_OP_NEG, IR_OP_ADD};
    while (g->n_nodes < n) {
        /* mostly recent values, so chains are deep and most of the graph is live */
        uint32_t x = vals[nv - 1 - rnd(nv < 8 ? nv : 8)], y = vals[rnd(nv)], id;
        switch (rnd(10)) {
        case 0: /* a foldable constant subexpression: (c1 + c2) * c3 */
            id = add_node(
                g, IR_OP_MUL,
                add_node(g, IR_OP_ADD, add_const(g, (float)rnd(8)), add_const(g, (float)rnd(8))),
                add_const(g, (float)(1 + rnd(3))));
            id = add_node(g, IR_OP_MUL, x, id);
            break;
        case 1: /* x * (c - (c - 1)): becomes x * 1, then x */
            id = add_node(g, IR_OP_SUB, add_const(g, 5.0f), add_const(g, 4.0f));
            id = add_node(g, IR_OP_MUL, x, id);
            break;
        case 2: /* neg(neg(x)) */
            id = add_node(g, IR_OP_NEG, add_node(g, IR_OP_NEG, x, 0), 0);
            break;
        case 3: /* a duplicate after folding: x + (2 + 2) next to x + (3 + 1) */
            id = add_node(g, IR_OP_ADD, x,
                          add_node(g, IR_OP_ADD, add_const(g, 3.0f), add_const(g, 1.0f)));
            vals[nv++] = add_node(g, IR_OP_ADD, x,
                                  add_node(g, IR_OP_ADD, add_const(g, 2.0f), add_const(g, 2.0f)));
            break;
        case 4: /* dead code */
            add_node(g, IR_OP_EXP, y, 0);
            id = x;
            break;
        default: {
            int op = ew[rnd(8)];
            id = add_node(g, op, x, y);
            break;
        }
        }
        if (id != IR_NONE)
            vals[nv++] = id;
    }
    for (uint32_t k = 0; k < 8 && k < nv; k++)
        ir_add_output(g, vals[nv - 1 - k]);
    free(vals);
    return g;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    static const uint32_t sizes[] = {100, 1000, 10000, 100000};
    int quick = bench_quick(argc, argv);
    enum { N_SIZES = 4, MAX_RUNS = 15 };
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) == 3)
        printf("load average %.2f %.2f %.2f (%ld cpus)\n", load[0], load[1], load[2],
               sysconf(_SC_NPROCESSORS_ONLN));
    char json[4096];
    size_t jo = 0;
    jo += (size_t)snprintf(json + jo, sizeof json - jo,
                           "{\n  \"bench\": \"passes\",\n"
                           "  \"pipeline\": \"default\",\n"
                           "  \"load_average\": %.2f,\n"
                           "  \"results\": [\n",
                           load[0]);
    printf("%10s %10s %12s %10s %10s %10s %6s %10s %12s\n", "nodes", "nodes_out", "total_ms",
           "ns/node", "cpu_ns/n", "build_ms", "iters", "x build", "folded");
    for (int si = 0; si < N_SIZES; si++) {
        uint32_t n = sizes[si];
        int runs = n >= 100000 ? 5 : n >= 10000 ? 9 : MAX_RUNS;
        if (quick)
            runs = 3;
        uint64_t t[MAX_RUNS], tb[MAX_RUNS], tc[MAX_RUNS];
        pass_options o;
        memset(&o, 0, sizeof o);
        o.eval = eval;
        pass_stats s;
        uint32_t n_in = 0, n_out = 0;
        for (int r = 0; r < runs; r++) {
            rng = 0x9e3779b97f4a7c15ull + n;
            uint64_t t0 = now_ns();
            ir_graph *g = build(n);
            tb[r] = now_ns() - t0;
            t0 = now_ns();
            uint64_t c0 = cpu_ns();
            ir_graph *out = pass_pipeline_run(g, &o, &s);
            t[r] = now_ns() - t0;
            tc[r] = cpu_ns() - c0;
            if (!out) {
                fprintf(stderr, "bench_passes: pipeline failed: %s\n", ir_last_error());
                ir_graph_free(g);
                return 1;
            }
            n_in = g->n_nodes;
            n_out = out->n_nodes;
            ir_graph_free(out);
            ir_graph_free(g);
        }
        qsort(t, (size_t)runs, sizeof *t, cmp_u64);
        qsort(tb, (size_t)runs, sizeof *tb, cmp_u64);
        qsort(tc, (size_t)runs, sizeof *tc, cmp_u64);
        double ms = (double)t[runs / 2] / 1e6, bms = (double)tb[runs / 2] / 1e6;
        double nsn = (double)t[runs / 2] / n_in, cpun = (double)tc[runs / 2] / n_in;
        printf("%10u %10u %12.3f %10.1f %10.1f %10.3f %6u %10.2f %12llu\n", n_in, n_out, ms, nsn,
               cpun, bms, s.iterations, ms / bms, (unsigned long long)s.pass[PASS_FOLD].folded);
        char line[512];
        pass_stats_format(&s, line, sizeof line);
        printf("           %s\n", line);
        char metric[64];
        snprintf(metric, sizeof metric, "ns_per_node_%u", n);
        bench_report("passes_pipeline", metric, nsn, "ns", "ir_add build (same graph)",
                     (double)tb[runs / 2] / n_in, ms / bms);
        jo += (size_t)snprintf(json + jo, sizeof json - jo,
                               "    {\"nodes\": %u, \"nodes_out\": %u, \"runs\": %d, "
                               "\"median_ms\": %.4f, \"ns_per_node\": %.1f, "
                               "\"cpu_ns_per_node\": %.1f, \"build_ms\": %.4f, "
                               "\"ratio_to_build\": %.3f, \"iterations\": %u}%s\n",
                               n_in, n_out, runs, ms, nsn, cpun, bms, ms / bms, s.iterations,
                               si + 1 < N_SIZES ? "," : "");
    }
    jo += (size_t)snprintf(json + jo, sizeof json - jo, "  ]\n}\n");
    const char *dir = getenv("TJ_BENCH_OUT") ? getenv("TJ_BENCH_OUT") : "bench/out";
    mkdir(dir, 0777);
    char path[1024];
    snprintf(path, sizeof path, "%s/passes.json", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(json, f) < 0) {
        fprintf(stderr, "bench_passes: cannot write %s\n", path);
        if (f)
            fclose(f);
        return 1;
    }
    fclose(f);
    printf("wrote %s\n", path);
    return 0;
}
