/* spec.c — the pipeline's interface: pass selection strings ("fold,cse,-simplify"), their
 * errors, the stats log line, the fixed-point bound, NULL options, and the error paths (NULL
 * graph, a graph the verifier rejects). */
#include <stdlib.h>

#include "check.h"
#include "ptest.h"

#define B(p) PASS_BIT(PASS_##p)

int main(void) {
    unsigned m = 0;
    CHECK(pass_parse_spec(NULL, &m) == TJ_OK && m == PASS_DEFAULT_MASK);
    CHECK(pass_parse_spec("", &m) == TJ_OK && m == PASS_DEFAULT_MASK);
    CHECK(pass_parse_spec("fold,cse,-simplify", &m) == TJ_OK);
    CHECK_EQ_INT(m, B(FOLD) | B(CSE));
    CHECK(pass_parse_spec("-simplify", &m) == TJ_OK);
    CHECK_EQ_INT(m, PASS_DEFAULT_MASK & ~B(SIMPLIFY));
    CHECK(pass_parse_spec(" fold , prune ", &m) == TJ_OK);
    CHECK_EQ_INT(m, B(FOLD) | B(PRUNE));
    CHECK(pass_parse_spec("+fold", &m) == TJ_OK && m == PASS_DEFAULT_MASK);
    CHECK(pass_parse_spec("none", &m) == TJ_OK && m == 0);
    CHECK(pass_parse_spec("none,cse", &m) == TJ_OK && m == B(CSE));
    CHECK(pass_parse_spec("all,-fusion", &m) == TJ_OK);
    CHECK_EQ_INT(m, PASS_DEFAULT_MASK & ~B(FUSION));
    m = 1234;
    CHECK_EQ_INT(pass_parse_spec("fold,bogus", &m), TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "bogus");
    CHECK_HAS(ir_last_error(), "fold,bogus");
    CHECK_EQ_INT(m, 1234); /* untouched on error */
    CHECK_EQ_INT(pass_parse_spec("-", &m), TJ_ERR_INVALID);
    CHECK(strcmp(pass_name(PASS_CSE), "cse") == 0 && strcmp(pass_name(PASS_N), "?") == 0);

    /* y = neg(neg(x)) * 1 + (2 * 3), outputs y */
    ir_graph *g = ir_graph_new("spec");
    int64_t d[1] = {3};
    uint32_t x = b_param(g, 0, TJ_F32, 1, d);
    uint32_t nn = b_un(g, IR_OP_NEG, b_un(g, IR_OP_NEG, x));
    uint32_t six = b_bin(g, IR_OP_MUL, b_f32(g, 2), b_f32(g, 3));
    uint32_t y = b_bin(g, IR_OP_ADD, b_bin(g, IR_OP_MUL, nn, b_f32(g, 1)), six);
    ir_add_output(g, y);

    /* "-fold": nothing folds, the rest runs */
    pass_options o = ptest_opts("-fold");
    pass_stats s;
    ir_graph *r = pass_pipeline_run(g, &o, &s);
    CHECK_MSG(r != NULL, "%s", ir_last_error());
    if (r) {
        CHECK_EQ_INT(s.pass[PASS_FOLD].runs, 0);
        CHECK_EQ_INT(count_op(r, IR_OP_NEG), 0);
        CHECK_EQ_INT(count_op(r, IR_OP_MUL), 1); /* 2 * 3 stays */
        CHECK(s.pass[PASS_SIMPLIFY].simplified >= 2);
    }
    ir_graph_free(r);

    /* default: x + 6 */
    o = ptest_opts(NULL);
    r = pass_pipeline_run(g, &o, &s);
    CHECK_MSG(r != NULL, "%s", ir_last_error());
    if (r) {
        CHECK_EQ_INT(r->n_nodes, 3);
        const uint32_t *in = ir_inputs(r, &r->nodes[r->outputs[0]]);
        const float *six_v = const_f32(r, in[0]) ? const_f32(r, in[0]) : const_f32(r, in[1]);
        CHECK(six_v && *six_v == 6.0f);
        /* the last iteration changed nothing: a fixed point within the bound */
        CHECK(s.iterations >= 2 && s.iterations <= PASS_DEFAULT_MAX_ITERS);
        char buf[600];
        const char *line = buf;
        int len = pass_stats_format(&s, buf, sizeof buf);
        CHECK(len > 0 && (size_t)len == strlen(buf));
        CHECK_HAS(line, "passes: 9 -> 3 nodes");
        CHECK_HAS(line, "fold 1 folded");
        CHECK_HAS(line, "simplify ");
        CHECK_HAS(line, "prune ");
        CHECK_HAS(line, " ms");
        char tiny[8];
        pass_stats_format(&s, tiny, sizeof tiny);
        CHECK_EQ_INT(strlen(tiny), 7); /* truncated, terminated */
    }
    ir_graph_free(r);

    /* max_iters = 1: one iteration only */
    o.max_iters = 1;
    r = pass_pipeline_run(g, &o, &s);
    CHECK(r != NULL && s.iterations == 1);
    ir_graph_free(r);

    /* "none": an unchanged copy; NULL options: defaults without folding */
    o = ptest_opts("none");
    r = pass_pipeline_run(g, &o, &s);
    CHECK(r != NULL && r != g && r->n_nodes == g->n_nodes);
    if (r)
        CHECK(ir_graph_hash(r).lo == ir_graph_hash(g).lo &&
              ir_graph_hash(r).hi == ir_graph_hash(g).hi);
    ir_graph_free(r);
    r = pass_pipeline_run(g, NULL, NULL);
    CHECK(r != NULL);
    if (r)
        CHECK_EQ_INT(count_op(r, IR_OP_MUL), 1);
    ir_graph_free(r);

    /* errors */
    o = ptest_opts("fold,nosuchpass");
    CHECK(pass_pipeline_run(g, &o, NULL) == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "nosuchpass");
    CHECK(pass_pipeline_run(NULL, NULL, NULL) == NULL);
    CHECK_HAS(ir_last_error(), "NULL");

    /* a broken input graph (an output past the end) is rejected by the verifier */
    ir_graph *bad = ir_graph_clone(g);
    bad->outputs[0] = 999;
    o = ptest_opts(NULL);
    CHECK(pass_pipeline_run(bad, &o, NULL) == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "invalid graph");
    CHECK_HAS(ir_last_error(), "output");
    ir_graph_free(bad);

    /* a subgraph no node refers to does not survive the rebuild (the regions a node uses are
     * copied when it is: tests/passes/regions_inside.tjir, inline_cond.tjir) */
    ir_graph *withsub = ir_graph_clone(g);
    ir_graph *body = ir_graph_new("body");
    ir_add_output(body, b_param(body, 0, TJ_F32, 0, NULL));
    CHECK_EQ_INT(ir_add_sub(withsub, body), 1);
    o = ptest_opts(NULL);
    r = pass_pipeline_run(withsub, &o, NULL);
    CHECK_MSG(r != NULL, "%s", ir_last_error());
    if (r) {
        CHECK_EQ_INT(r->n_subs, 0);
        CHECK_EQ_INT(r->n_nodes, 3);
    }
    ir_graph_free(r);
    ir_graph_free(withsub);

    /* the individual passes leave their input alone and keep params */
    ir_graph *p = pass_prune(g, NULL, NULL);
    CHECK(p != NULL && p->n_params == 1 && g->n_nodes == 9);
    ir_graph_free(p);
    ir_graph_free(g);
    return check_done();
}
