/* random_graphs.c — random graphs at the IR level through the pipeline with the verifier on
 * after every pass: every intermediate graph must verify, outputs keep their dtypes and shapes,
 * params keep their count, side effects keep their number and order, and a graph that reached
 * the fixed point does not change when optimized again, and (with the small interpreter in
 * interp.h as the oracle) every output that the original graph computes without error has the
 * same bits after optimization. The seed is printed; TJ_SEED=<n> reproduces a run
 * (TJ_RANDOM_GRAPHS=<n> changes the count, default 3000). The jit's differential tests repeat
 * the value check with the real reference kernels. */
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "interp.h"
#include "ptest.h"

static uint64_t rng_s;
static uint32_t rnd(uint32_t n) {
    rng_s ^= rng_s << 13;
    rng_s ^= rng_s >> 7;
    rng_s ^= rng_s << 17;
    return n ? (uint32_t)(rng_s % n) : 0;
}

static const int64_t shapes[][3] = {{0}, {3}, {2, 3}, {1, 3},    {2, 1},
                                    {4}, {1}, {2, 2}, {2, 1, 3}, {2, 3, 2}};
static const int ranks[] = {0, 1, 2, 2, 2, 1, 1, 2, 3, 3};
#define N_SHAPES 10

static uint32_t pool[256];
static int n_pool;

static uint32_t pick(const ir_graph *g, int want_dtype) {
    for (int tries = 0; tries < 8 && n_pool; tries++) {
        uint32_t v = pool[rnd((uint32_t)n_pool)];
        if (want_dtype < 0 || g->nodes[v].dtype == want_dtype)
            return v;
    }
    return IR_NONE;
}

static uint32_t rand_const(ir_graph *g, int dt, int si) {
    static const double vals[] = {0.0, 1.0, -0.0, 2.0, -1.0, 3.5, 1.0, 0.0};
    int64_t n = ir_numel(ranks[si], shapes[si]);
    unsigned char buf[12 * 8];
    double v0 = vals[rnd(8)];
    bool uniform = rnd(2);
    for (int64_t i = 0; i < n; i++) {
        double v = uniform ? v0 : vals[rnd(8)];
        switch (dt) {
        case TJ_F32:
            ((float *)buf)[i] = (float)v;
            break;
        case TJ_F64:
            ((double *)buf)[i] = v;
            break;
        case TJ_I32:
            ((int32_t *)buf)[i] = (int32_t)v;
            break;
        default:
            buf[i] = v != 0;
            break;
        }
    }
    return b_const(g, dt, ranks[si], shapes[si], buf);
}

static const int dtypes[] = {TJ_F32, TJ_F32, TJ_I32, TJ_BOOL, TJ_F64};

static void add_random_node(ir_graph *g, int *n_params) {
    int dt = dtypes[rnd(5)];
    int si = (int)rnd(N_SHAPES);
    uint32_t v = pick(g, -1), id = IR_NONE;
    ir_node vcopy; /* a copy: g->nodes moves when nodes are added */
    const ir_node *vn = NULL;
    if (v != IR_NONE) {
        vcopy = g->nodes[v];
        vn = &vcopy;
    }
    switch (rnd(24)) {
    case 0:
        id = b_param(g, (*n_params)++, dt, ranks[si], shapes[si]);
        break;
    case 1:
    case 2:
        id = rand_const(g, dt, si);
        break;
    case 3:
    case 4: {
        static const int ops[] = {IR_OP_NEG,         IR_OP_ABS,  IR_OP_EXP,  IR_OP_RELU,
                                  IR_OP_LOGICAL_NOT, IR_OP_SIGN, IR_OP_CAST, IR_OP_CAST};
        int op = ops[rnd(8)];
        if (v == IR_NONE)
            break;
        if (op == IR_OP_CAST) {
            ir_node p;
            memset(&p, 0, sizeof p);
            p.op = IR_OP_CAST;
            p.dtype = (uint8_t)(rnd(2) ? vn->dtype : dt);
            id = ir_add(g, &p, &v, 1);
        } else {
            id = b_un(g, op, v);
        }
        break;
    }
    case 5:
    case 6:
    case 7:
    case 8: {
        static const int ops[] = {IR_OP_ADD,     IR_OP_SUB,      IR_OP_MUL,     IR_OP_DIV,
                                  IR_OP_MAXIMUM, IR_OP_LT,       IR_OP_EQ,      IR_OP_LOGICAL_AND,
                                  IR_OP_POW,     IR_OP_FLOORDIV, IR_OP_MINIMUM, IR_OP_MUL};
        if (v == IR_NONE)
            break;
        uint32_t b =
            rnd(3) ? rand_const(g, vn->dtype, rnd(2) ? 0 : (int)rnd(N_SHAPES)) : pick(g, vn->dtype);
        if (b == IR_NONE)
            break;
        id = rnd(2) ? b_bin(g, ops[rnd(12)], v, b) : b_bin(g, ops[rnd(12)], b, v);
        break;
    }
    case 9: {
        uint32_t c = pick(g, TJ_BOOL);
        if (c == IR_NONE || v == IR_NONE)
            break;
        uint32_t b = rnd(2) ? v : pick(g, vn->dtype), in[3] = {c, v, b};
        if (b != IR_NONE)
            id = b_op(g, IR_OP_WHERE, 3, in);
        break;
    }
    case 10: {
        if (!vn)
            break;
        int64_t n = ir_numel(vn->rank, vn->dims), d2[2] = {1, n};
        uint32_t k = rnd(3);
        id = k == 0   ? b_shaped(g, IR_OP_RESHAPE, v, vn->rank, vn->dims)
             : k == 1 ? b_shaped(g, IR_OP_RESHAPE, v, 1, &d2[1])
                      : b_shaped(g, IR_OP_RESHAPE, v, 2, d2);
        break;
    }
    case 11:
    case 20: {
        if (!vn)
            break;
        id = v;
        int rank = vn->rank;
        for (int rep = 0; rep < (rnd(2) ? 2 : 1) && id != IR_NONE; rep++) { /* often a chain */
            int64_t perm[IR_MAX_RANK];
            for (int i = 0; i < rank; i++)
                perm[i] = i;
            for (int i = rank - 1; i > 0; i--) {
                int j = (int)rnd((uint32_t)i + 1);
                int64_t t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            id = b_listed(g, IR_OP_TRANSPOSE, id, (uint32_t)rank, perm);
        }
        break;
    }
    case 12: {
        if (!vn || vn->rank >= 3)
            break;
        int64_t d[IR_MAX_RANK] = {2};
        memcpy(d + 1, vn->dims, sizeof(int64_t) * vn->rank);
        id = rnd(2) ? b_shaped(g, IR_OP_BROADCAST_TO, v, vn->rank + 1, d)
                    : b_shaped(g, IR_OP_BROADCAST_TO, v, vn->rank, vn->dims);
        break;
    }
    case 13:
        if (vn && vn->rank < 3) {
            uint32_t in[1] = {v};
            id = b_i0(g, IR_OP_EXPAND_DIMS, 1, in, (int64_t)rnd((uint32_t)vn->rank + 1));
        }
        break;
    case 14: {
        if (!vn)
            break;
        int64_t ax[IR_MAX_RANK];
        uint32_t n = 0;
        for (int i = 0; i < vn->rank; i++)
            if (vn->dims[i] == 1)
                ax[n++] = i;
        if (n)
            id = b_listed(g, IR_OP_SQUEEZE, v, n, ax);
        break;
    }
    case 15: {
        if (!vn)
            break;
        int r = vn->rank;
        int64_t l[3 * IR_MAX_RANK];
        for (int i = 0; i < r; i++) {
            bool full = rnd(2);
            l[i] = full ? 0 : 1;
            l[r + i] = full ? INT64_MAX : vn->dims[i];
            l[2 * r + i] = full || rnd(2) ? 1 : 2;
        }
        id = b_listed(g, IR_OP_SLICE, v, 3u * (uint32_t)r, l);
        break;
    }
    case 16: {
        if (!vn)
            break;
        ir_node p;
        memset(&p, 0, sizeof p);
        p.op = IR_OP_SUM;
        p.a.i[0] = rnd(2);
        if (vn->rank && rnd(2)) {
            p.a.n_list = 1;
            p.a.list[0] = rnd((uint32_t)vn->rank);
        }
        id = ir_add(g, &p, &v, 1);
        break;
    }
    case 17: {
        if (!vn || vn->rank < 1)
            break;
        uint32_t in[2] = {v, b_i32(g, (int32_t)rnd(5) - 1)};
        id = b_i0(g, IR_OP_GATHER, 2, in, 0);
        break;
    }
    case 18:
        id = b_random(g, rnd(3), ranks[si], shapes[si]);
        break;
    case 19:
        if (v != IR_NONE)
            b_print(g, v, rnd(2) ? "a" : "b");
        break;
    case 21:
    case 22: /* identity probes: x op {+0, -0, 1} on either side, where signed zeros matter */
        if (vn && vn->dtype != TJ_BOOL) {
            static const int ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV};
            static const double k[] = {0.0, -0.0, 1.0};
            unsigned char buf[8];
            double kv = k[rnd(3)];
            float kf = (float)kv;
            int32_t ki = (int32_t)kv;
            if (vn->dtype == TJ_F32)
                memcpy(buf, &kf, 4);
            else if (vn->dtype == TJ_F64)
                memcpy(buf, &kv, 8);
            else
                memcpy(buf, &ki, 4);
            uint32_t c = b_const(g, vn->dtype, 0, NULL, buf);
            int op = ops[rnd(4)];
            id = rnd(2) ? b_bin(g, op, v, c) : b_bin(g, op, c, v);
        }
        break;
    default:
        if (vn) /* an identical re-add: interned at construction */
            id = b_un(g, IR_OP_NEG, b_un(g, IR_OP_NEG, v));
        break;
    }
    if (id == IR_NONE) {
        ir_clear_error();
        return;
    }
    if (g->nodes[id].dtype != IR_VOID && n_pool < 256)
        pool[n_pool++] = id;
}

static const char *const specs[] = {NULL,  NULL,    NULL,    "fold,prune", "simplify,prune",
                                    "cse", "prune", "-fold", "simplify"};

int main(void) {
    const char *env = getenv("TJ_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    const char *cnt = getenv("TJ_RANDOM_GRAPHS");
    int n_graphs = cnt ? atoi(cnt) : 3000;
    printf("random_graphs: seed %llu (reproduce with TJ_SEED=%llu), %d graphs\n",
           (unsigned long long)seed, (unsigned long long)seed, n_graphs);
    rng_s = seed * 2654435761u + 0x9e3779b97f4a7c15ull;
    int fails = 0;
    uint64_t n_value_checks = 0;
    uint64_t total_in = 0, total_out = 0, folded = 0, simplified = 0, merged = 0;
    for (int gi = 0; gi < n_graphs && fails < 5; gi++) {
        ir_graph *g = ir_graph_new("rand");
        n_pool = 0;
        int n_params = 0;
        int n = 5 + (int)rnd(50);
        for (int i = 0; i < n; i++)
            add_random_node(g, &n_params);
        for (uint32_t k = 1 + rnd(3); k-- > 0 && n_pool;) /* recent values: longer chains */
            ir_add_output(g, pool[n_pool - 1 - rnd(n_pool < 4 ? (uint32_t)n_pool : 4)]);
        CHECK_MSG(ir_verify(g) == TJ_OK, "generator made a bad graph: %s", ir_last_error());

        const char *spec = specs[rnd(9)];
        pass_options o = ptest_opts(spec);
        if (rnd(4) == 0)
            o.fold_max_bytes = 8 + rnd(24);
        pass_stats s;
        ir_graph *r = pass_pipeline_run(g, &o, &s);
        bool ok = r != NULL;
        CHECK_MSG(ok, "graph %d (seed %llu, passes %s): %s", gi, (unsigned long long)seed,
                  spec ? spec : "default", ir_last_error());
        if (ok) {
            ok = r->n_outputs == g->n_outputs && r->n_effects == g->n_effects &&
                 r->n_params == g->n_params && r->n_caps == g->n_caps;
            for (uint32_t k = 0; ok && k < g->n_outputs; k++) {
                const ir_node *a = &g->nodes[g->outputs[k]], *b = &r->nodes[r->outputs[k]];
                ok = a->dtype == b->dtype && a->rank == b->rank &&
                     !memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank);
            }
            for (uint32_t k = 0; ok && k < g->n_effects; k++)
                ok = g->nodes[g->effects[k]].op == r->nodes[r->effects[k]].op;
            if (!spec || strchr(spec, 'p'))
                ok = ok && r->n_nodes <= g->n_nodes + 8;
            CHECK_MSG(ok, "graph %d (seed %llu, passes %s): outputs/effects/params changed", gi,
                      (unsigned long long)seed, spec ? spec : "default");
            /* values: what the original computes, the optimized graph computes bit for bit */
            if (ok) {
                iv *va = interp(g), *vb = interp(r);
                for (uint32_t k = 0; ok && k < g->n_outputs; k++) {
                    iv a = va[g->outputs[k]], b = vb[r->outputs[k]];
                    if (!a.v)
                        continue; /* a live failing node: non-strict may drop it */
                    ok = b.v && a.n == b.n;
                    for (int64_t i = 0; ok && i < a.n; i++)
                        ok = same_value(a.v[i], b.v[i]);
                    CHECK_MSG(ok, "graph %d (seed %llu, passes %s): output %u values differ", gi,
                              (unsigned long long)seed, spec ? spec : "default", k);
                    n_value_checks++;
                }
                interp_free(va, g->n_nodes);
                interp_free(vb, r->n_nodes);
            }
            /* a fixed point stays fixed */
            if (ok && !spec && s.iterations < PASS_DEFAULT_MAX_ITERS) {
                ir_graph *r2 = pass_pipeline_run(r, &o, NULL);
                ir_hash128 h1 = ir_graph_hash(r), h2 = r2 ? ir_graph_hash(r2) : (ir_hash128){0, 0};
                ok = r2 && r2->n_nodes == r->n_nodes && h1.lo == h2.lo && h1.hi == h2.hi;
                CHECK_MSG(ok, "graph %d (seed %llu): not a fixed point", gi,
                          (unsigned long long)seed);
                ir_graph_free(r2);
            }
            total_in += g->n_nodes;
            total_out += r->n_nodes;
            folded += s.pass[PASS_FOLD].folded;
            simplified += s.pass[PASS_SIMPLIFY].simplified;
            for (int p = 0; p < PASS_N; p++)
                merged += s.pass[p].merged;
        }
        if (!ok) {
            fails++;
            char *t = ir_print(g), *u = r ? ir_print(r) : NULL;
            fprintf(stderr, "input graph %d:\n%s\noptimized:\n%s\n", gi, t ? t : "?", u ? u : "?");
            free(t);
            free(u);
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    printf("random_graphs: %llu -> %llu nodes; %llu folded, %llu simplified, %llu merged; "
           "%llu outputs compared by value\n",
           (unsigned long long)total_in, (unsigned long long)total_out, (unsigned long long)folded,
           (unsigned long long)simplified, (unsigned long long)merged,
           (unsigned long long)n_value_checks);
    CHECK(folded > 0 && simplified > 0 && merged > 0 && total_out < total_in);
    return check_done();
}
