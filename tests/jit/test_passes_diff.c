/* Differential test of the pass pipeline (issue 3, S24): random graphs are evaluated by the
 * interpreter before and after simplify/fold/cse/prune; results must be bit-identical (folding
 * runs the same reference kernels) and the verifier must accept every intermediate graph.
 * TJ_SEED=n reproduces a run; TJ_GRAPHS=n sets the count (default 1000). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jit/jit.h"

static uint64_t rng;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static const int64_t shapes[][3] = {{0}, {4}, {2, 4}, {1, 4}, {3, 2, 4}};
static const int ranks[] = {0, 1, 2, 2, 3};

static uint32_t add_const(ir_graph *g, int dt, int s) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_CONST;
    p.dtype = (uint8_t)dt;
    p.rank = (uint8_t)ranks[s];
    memcpy(p.dims, shapes[s], sizeof shapes[s]);
    int64_t n = ir_numel(p.rank, p.dims);
    char buf[24 * 8];
    for (int64_t i = 0; i < n; i++) {
        int v = (int)rnd(7) - 3; /* plenty of 0 and 1 for the simplifier */
        if (dt == TJ_F32)
            ((float *)buf)[i] = rnd(5) ? (float)v : (float)v * 0.37f;
        else
            ((int32_t *)buf)[i] = v;
    }
    p.a.blob = ir_add_blob(g, buf, (size_t)n * 4);
    return ir_add(g, &p, NULL, 0);
}

static const int unary_f[] = {IR_OP_NEG,     IR_OP_ABS,   IR_OP_EXP, IR_OP_TANH, IR_OP_RELU,
                              IR_OP_SIGMOID, IR_OP_FLOOR, IR_OP_SIN, IR_OP_SIGN};
static const int unary_i[] = {IR_OP_NEG, IR_OP_ABS, IR_OP_RELU, IR_OP_SIGN};
static const int binary[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_MAXIMUM, IR_OP_MINIMUM};

/* Builds one random graph with two params (f32 [2,4] and i32 [2,4]). */
static ir_graph *random_graph(int n_ops) {
    ir_graph *g = ir_graph_new("rand");
    uint32_t ids[256];
    int n = 0;
    for (int k = 0; k < 2; k++) {
        ir_node p;
        memset(&p, 0, sizeof p);
        p.op = IR_OP_PARAM;
        p.dtype = k ? TJ_I32 : TJ_F32;
        p.rank = 2;
        p.dims[0] = 2;
        p.dims[1] = 4;
        p.a.i[0] = k;
        ids[n++] = ir_add(g, &p, NULL, 0);
    }
    for (int step = 0; step < n_ops && n < 250; step++) {
        ir_node p;
        memset(&p, 0, sizeof p);
        uint32_t a = ids[rnd((uint32_t)n)], b = ids[rnd((uint32_t)n)];
        int dt = g->nodes[a].dtype;
        uint32_t in[3] = {a, b, 0}, n_in = 1;
        switch (rnd(9)) {
        case 0:
            ids[n++] = add_const(g, rnd(2) ? TJ_F32 : TJ_I32, (int)rnd(5));
            continue;
        case 1:
            p.op = (uint16_t)(dt == TJ_F32 ? unary_f[rnd(9)] : unary_i[rnd(4)]);
            break;
        case 2:
        case 3:
        case 4:
            p.op = (uint16_t)binary[rnd(5)];
            if (g->nodes[b].dtype != dt)
                in[1] = add_const(g, dt, (int)rnd(5));
            n_in = 2;
            break;
        case 5:
            p.op = IR_OP_CAST;
            p.dtype = dt == TJ_F32 ? TJ_I32 : TJ_F32;
            break;
        case 6: {
            ir_node c;
            memset(&c, 0, sizeof c);
            c.op = IR_OP_GT;
            uint32_t z = add_const(g, dt, 0), cin[2] = {a, z};
            uint32_t cond = ir_add(g, &c, cin, 2);
            if (cond == IR_NONE)
                continue;
            p.op = IR_OP_WHERE;
            in[0] = cond;
            in[1] = a;
            in[2] = g->nodes[b].dtype == dt ? b : add_const(g, dt, 0);
            n_in = 3;
            break;
        }
        case 7:
            if (g->nodes[a].rank == 0)
                continue;
            p.op = IR_OP_SUM;
            p.a.n_list = 1;
            p.a.list[0] = (int64_t)rnd(g->nodes[a].rank);
            p.a.i[0] = (int64_t)rnd(2);
            break;
        default:
            if (g->nodes[a].rank != 2)
                continue;
            p.op = IR_OP_TRANSPOSE;
            p.a.n_list = 2;
            p.a.list[0] = 1;
            p.a.list[1] = 0;
            break;
        }
        uint32_t id = ir_add(g, &p, in, n_in);
        if (id != IR_NONE)
            ids[n++] = id;
        else
            ir_clear_error();
    }
    /* two or three outputs, including the last node */
    ir_add_output(g, ids[n - 1]);
    ir_add_output(g, ids[2 + rnd((uint32_t)(n - 2))]);
    if (rnd(2))
        ir_add_output(g, ids[rnd((uint32_t)n)]);
    return g;
}

static int run_graph(const ir_graph *g, tj_tensor **args, tj_tensor **outs) {
    rt_program *p = rt_interp_new(g);
    if (!p)
        return -1;
    tj_status st = p->vt->run(p, args, 2, NULL, outs);
    p->vt->free(p);
    return st;
}

static int same(const tj_tensor *a, const tj_tensor *b) {
    return a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->dims, b->dims, a->rank * sizeof(int64_t)) == 0 &&
           memcmp(a->data, b->data, (size_t)a->numel * ir_dtype_size(a->dtype)) == 0;
}

int main(void) {
    const char *s = getenv("TJ_SEED"), *ng = getenv("TJ_GRAPHS");
    uint64_t seed = s ? strtoull(s, NULL, 10) : 12345;
    int n_graphs = ng ? atoi(ng) : 1000;
    printf("test_passes_diff: seed %llu (TJ_SEED), %d graphs\n", (unsigned long long)seed,
           n_graphs);
    rng = seed * 2654435761u + 1;
    float xf[8];
    int32_t xi[8];
    for (int i = 0; i < 8; i++) {
        xf[i] = (float)i * 0.75f - 2.5f;
        xi[i] = i - 3;
    }
    int64_t d[2] = {2, 4};
    tj_tensor *args[2] = {tj_tensor_from_data(TJ_F32, 2, d, xf),
                          tj_tensor_from_data(TJ_I32, 2, d, xi)};
    uint64_t folded = 0, merged = 0, simplified = 0, removed = 0, nodes_in = 0, nodes_out = 0;
    for (int gi = 0; gi < n_graphs; gi++) {
        ir_graph *g = random_graph(8 + (int)rnd(40));
        CHECK_MSG(ir_verify(g) == TJ_OK, "graph %d: %s", gi, ir_last_error());
        pass_options po;
        memset(&po, 0, sizeof po);
        po.verify = 1;
        po.eval = jit_fold_eval;
        pass_stats st;
        ir_graph *opt = pass_pipeline_run(g, &po, &st);
        CHECK_MSG(opt != NULL, "graph %d: pipeline failed: %s", gi, ir_last_error());
        if (opt) {
            folded += st.pass[PASS_FOLD].folded;
            for (int k = 0; k < PASS_N; k++)
                merged += st.pass[k].merged; /* interning merges during any rebuild */
            simplified += st.pass[PASS_SIMPLIFY].simplified;
            removed += st.pass[PASS_PRUNE].removed;
            nodes_in += st.nodes_in;
            nodes_out += st.nodes_out;
            tj_tensor *a[4] = {0}, *b[4] = {0};
            int ra = run_graph(g, args, a), rb = run_graph(opt, args, b);
            CHECK_MSG(ra == rb, "graph %d: status %d before, %d after", gi, ra, rb);
            CHECK_EQ_INT(g->n_outputs, opt->n_outputs);
            for (uint32_t k = 0; !ra && !rb && k < g->n_outputs; k++) {
                int ok = same(a[k], b[k]);
                CHECK_MSG(ok, "graph %d output %u differs after the passes (seed %llu)", gi, k,
                          (unsigned long long)seed);
                if (!ok) {
                    char *t = ir_print(g);
                    fprintf(stderr, "%s\n", t);
                    free(t);
                }
            }
            for (int k = 0; k < 4; k++) {
                tj_release(a[k]);
                tj_release(b[k]);
            }
            ir_graph_free(opt);
        }
        ir_graph_free(g);
    }
    printf("nodes %llu -> %llu; folded %llu, merged %llu, simplified %llu, removed %llu\n",
           (unsigned long long)nodes_in, (unsigned long long)nodes_out, (unsigned long long)folded,
           (unsigned long long)merged, (unsigned long long)simplified, (unsigned long long)removed);
    CHECK(folded > 0 && merged > 0 && simplified > 0 && removed > 0); /* the passes did work */
    tj_release(args[0]);
    tj_release(args[1]);
    return check_done();
}
