/* test_cpu_random.c — 600 random elementwise graphs (mixed dtypes, casts, comparisons, where,
 * broadcasting params, scalar constants, empty and odd sizes, one or two outputs) compiled by the
 * CPU JIT with FMA contraction off and exact math (libm transcendentals; the approximations are
 * tested in test_cpu_approx.c) and compared bit for bit with the interpreter (reference kernels).
 * The seed is printed; TJ_TEST_SEED=<n> replays a run. */
#include <time.h>

#include "check.h"
#include "test_cpu_util.h"

#define N_GRAPHS 600

typedef struct val {
    uint32_t id;
    int dt;
} val;

static const int un_float[] = {
    IR_OP_NEG,  IR_OP_ABS,   IR_OP_SIGN,  IR_OP_RELU, IR_OP_FLOOR, IR_OP_CEIL,    IR_OP_ROUND,
    IR_OP_SQRT, IR_OP_RSQRT, IR_OP_EXP,   IR_OP_LOG,  IR_OP_TANH,  IR_OP_SIGMOID, IR_OP_SIN,
    IR_OP_COS,  IR_OP_ISNAN, IR_OP_ISINF, IR_OP_ATAN, IR_OP_ASIN,  IR_OP_ACOS,    IR_OP_ERF};
static const int un_int[] = {IR_OP_NEG,  IR_OP_ABS,   IR_OP_SIGN,
                             IR_OP_RELU, IR_OP_FLOOR, IR_OP_ISNAN};
static const int bin_float[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL,     IR_OP_DIV,     IR_OP_FLOORDIV,
                                IR_OP_MOD, IR_OP_POW, IR_OP_MAXIMUM, IR_OP_MINIMUM, IR_OP_LT,
                                IR_OP_GE,  IR_OP_EQ,  IR_OP_NE};
static const int bin_int[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_MAXIMUM, IR_OP_MINIMUM,
                              IR_OP_LT,  IR_OP_LE,  IR_OP_GT,  IR_OP_EQ,      IR_OP_NE};
static const int bin_bool[] = {IR_OP_LOGICAL_AND, IR_OP_LOGICAL_OR, IR_OP_EQ,
                               IR_OP_NE,          IR_OP_MAXIMUM,    IR_OP_LT};
#define PICK(arr) arr[tu_rand((int)(sizeof arr / sizeof arr[0]))]

static int random_dt(void) {
    return tu_rand(5);
}

/* A value of dtype dt: an existing one, or a cast of one. */
static uint32_t value_of(ir_graph *g, val *vs, int *nv, int dt) {
    int cands[64], nc = 0;
    for (int i = 0; i < *nv && nc < 64; i++)
        if (vs[i].dt == dt)
            cands[nc++] = i;
    if (nc && tu_rand(4) != 0)
        return vs[cands[tu_rand(nc)]].id;
    uint32_t y = tu_cast(g, vs[tu_rand(*nv)].id, dt);
    if (y != IR_NONE)
        vs[(*nv)++] = (val){y, dt};
    return y;
}

static ir_graph *random_graph(int *n_params, int *pdt, int *prank, int64_t (*pdims)[3]) {
    ir_graph *g = ir_graph_new("random");
    static const int64_t sizes[] = {1, 2, 3, 5, 8, 16, 31, 64, 100, 257};
    int rank = tu_rand(4);
    int64_t base[3];
    for (int d = 0; d < rank; d++)
        base[d] = sizes[tu_rand(rank == 1 ? 10 : 7)];
    if (rank && tu_rand(30) == 0)
        base[tu_rand(rank)] = 0;
    val vs[256];
    int nv = 0;
    *n_params = 1 + tu_rand(3);
    for (int k = 0; k < *n_params; k++) {
        /* a sub-shape of base: leading dims dropped, some dims set to 1 */
        int r = rank - (tu_rand(3) == 0 ? tu_rand(rank + 1) : 0);
        int64_t d[3];
        for (int j = 0; j < r; j++)
            d[j] = tu_rand(4) == 0 ? 1 : base[rank - r + j];
        pdt[k] = random_dt();
        prank[k] = r;
        memcpy(pdims[k], d, sizeof d);
        vs[nv++] = (val){tu_param(g, k, pdt[k], r, d), pdt[k]};
    }
    if (tu_rand(2)) {
        int dt = tu_rand(4);
        vs[nv++] = (val){tu_const_f64(g, dt, tu_rand(7) - 3 + 0.5 * tu_rand(2)), dt};
    }
    int n_ops = 2 + tu_rand(11);
    for (int i = 0; i < n_ops && nv < 200; i++) {
        val v = vs[nv - 1 - tu_rand(nv < 4 ? nv : 4)]; /* mostly recent values: chains */
        uint32_t y = IR_NONE;
        int kind = tu_rand(10);
        bool fl = v.dt == TJ_F32 || v.dt == TJ_F64, bo = v.dt == TJ_BOOL;
        if (kind < 3) {
            int op = bo ? IR_OP_LOGICAL_NOT : fl ? PICK(un_float) : PICK(un_int);
            y = tu_un(g, op, v.id);
        } else if (kind < 8) {
            int op = bo ? PICK(bin_bool) : fl ? PICK(bin_float) : PICK(bin_int);
            uint32_t w = value_of(g, vs, &nv, v.dt);
            if (w != IR_NONE)
                y = tu_rand(2) ? tu_bin(g, op, v.id, w) : tu_bin(g, op, w, v.id);
        } else if (kind < 9) {
            y = tu_cast(g, v.id, random_dt());
        } else {
            uint32_t c = value_of(g, vs, &nv, TJ_BOOL);
            uint32_t w = value_of(g, vs, &nv, v.dt);
            if (c != IR_NONE && w != IR_NONE)
                y = tu_op(g, IR_OP_WHERE, c, v.id, w);
        }
        if (y == IR_NONE) {
            ir_clear_error();
            continue;
        }
        vs[nv++] = (val){y, ir_node_get(g, y)->dtype};
    }
    ir_add_output(g, vs[nv - 1].id);
    if (tu_rand(2) && nv > *n_params)
        ir_add_output(g, vs[*n_params + tu_rand(nv - *n_params)].id);
    return g;
}

static bool has(const uint32_t *v, uint32_t n, uint32_t x) {
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* Invariants of a partition: valid order, fused groups elementwise with outputs of the loop
 * shape, every value read outside its group listed among the group's outputs. */
static void check_partition(const ir_graph *g, const pass_partition *p, int it) {
    uint8_t *done = calloc(g->n_nodes + 1, 1);
    for (uint32_t gi = 0; gi < p->n_groups; gi++) {
        const pass_group *gr = &p->groups[gi];
        for (uint32_t k = 0; k < gr->n_inputs; k++)
            CHECK_MSG(done[gr->inputs[k]], "graph %d group %u reads %%%u too early", it, gi,
                      gr->inputs[k]);
        for (uint32_t k = 0; k < gr->n_nodes; k++) {
            const ir_node *n = ir_node_get(g, gr->nodes[k]);
            CHECK_EQ_INT(p->group_of[gr->nodes[k]], gi);
            if (gr->fused)
                CHECK(ir_ops[n->op].flags & IR_F_EW);
            done[gr->nodes[k]] = 1;
        }
        if (!gr->fused)
            CHECK_EQ_INT(gr->n_nodes, 1);
        for (uint32_t k = 0; k < gr->n_outputs && gr->fused; k++) {
            const ir_node *n = ir_node_get(g, gr->outputs[k]);
            CHECK(n->rank == gr->rank && !memcmp(n->dims, gr->dims, (size_t)n->rank * 8));
        }
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        if (p->group_of[i] == IR_NONE)
            continue;
        const ir_node *n = ir_node_get(g, i);
        const uint32_t *in = ir_inputs(g, n);
        for (uint32_t k = 0; k < n->n_in; k++) {
            uint32_t gi = p->group_of[in[k]];
            CHECK(gi != IR_NONE);
            if (gi != IR_NONE && gi != p->group_of[i])
                CHECK(has(p->groups[gi].outputs, p->groups[gi].n_outputs, in[k]));
        }
    }
    for (uint32_t k = 0; k < g->n_outputs; k++) {
        uint32_t gi = p->group_of[g->outputs[k]];
        CHECK(gi != IR_NONE && has(p->groups[gi].outputs, p->groups[gi].n_outputs, g->outputs[k]));
    }
    free(done);
}

int main(void) {
    /* exact math through the environment too (read once, before anything reads it), and no disk
     * cache: kernels cached in the other math mode must not be loaded */
    setenv("TJ_EXACT_MATH", "1", 1);
    setenv("TJ_CACHE", "0", 1);
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        return 77;
    }
    const char *env = getenv("TJ_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (TJ_TEST_SEED=%llu to replay)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    tu_rng = seed * 2654435761u + 1;
    int n_multi = 0, n_kernels = 0;
    for (int it = 0; it < N_GRAPHS; it++) {
        int np, pdt[3], prank[3];
        int64_t pdims[3][3];
        ir_graph *g = random_graph(&np, pdt, prank, pdims);
        rt_program *p =
            jit_cpu_compile_opts(g, &(jit_cpu_opts){.no_contract = true, .exact_math = true});
        rt_program *ref = rt_interp_new(g);
        CHECK_MSG(p && ref, "graph %d: %s", it, ir_last_error());
        if (p && ref) {
            const pass_partition *part = jit_cpu_program_partition(p);
            check_partition(g, part, it);
            for (uint32_t k = 0; k < part->n_groups; k++) {
                n_kernels += part->groups[k].fused;
                n_multi += part->groups[k].fused && part->groups[k].n_nodes > 1;
            }
            tj_tensor *args[3];
            for (int k = 0; k < np; k++)
                args[k] = tu_random(pdt[k], prank[k], pdims[k], 1);
            tj_tensor *a[2] = {0}, *b[2] = {0};
            tj_status sa = tu_run(p, args, (uint32_t)np, a);
            tj_status sb = tu_run(ref, args, (uint32_t)np, b);
            CHECK_MSG(sa == sb, "graph %d: status %d vs %d (%s)", it, sa, sb, ir_last_error());
            for (uint32_t k = 0; k < g->n_outputs && sa == TJ_OK && sb == TJ_OK; k++) {
                int64_t first = -1, bad = tu_diff(a[k], b[k], 0, &first);
                if (bad) {
                    char *txt = ir_print(g);
                    fprintf(stderr, "graph %d output %u:\n%s", it, k, txt ? txt : "");
                    free(txt);
                }
                CHECK_MSG(bad == 0, "graph %d output %u: %lld differ, first %lld: %.17g vs %.17g",
                          it, k, (long long)bad, (long long)first,
                          first >= 0 ? tu_get(a[k], first) : 0.0,
                          first >= 0 ? tu_get(b[k], first) : 0.0);
            }
            for (int k = 0; k < 2; k++) {
                tj_release(a[k]);
                tj_release(b[k]);
            }
            for (int k = 0; k < np; k++)
                tj_release(args[k]);
        }
        if (p)
            p->vt->free(p);
        if (ref)
            ref->vt->free(ref);
        ir_graph_free(g);
    }
    printf("%d graphs, %d kernels, %d of them fusing several nodes\n", N_GRAPHS, n_kernels,
           n_multi);
    CHECK(n_multi >= N_GRAPHS / 2);
    return check_done();
}
