/* s23_nonstrict.c — S23 non-strict execution at the pass level: an op whose result is unused is
 * pruned, even one that would fail (a gather of index 1 on a 1-element tensor); an evaluator
 * failure while folding leaves the node unfolded (it errors at run time only if live); side
 * effects are never pruned. */
#include "check.h"
#include "ptest.h"

static uint32_t gather(ir_graph *g, uint32_t x, uint32_t idx) {
    uint32_t in[2] = {x, idx};
    return b_i0(g, IR_OP_GATHER, 2, in, 0);
}

int main(void) {
    int64_t one[1] = {1};
    /* 1. f(x) = { gather(x, 1); return x; } with x a 1-element param: the gather is pruned. */
    {
        ir_graph *g = ir_graph_new("s23");
        uint32_t x = b_param(g, 0, TJ_F32, 1, one);
        uint32_t gi = gather(g, x, b_i32(g, 1));
        CHECK(gi != IR_NONE);
        ir_add_output(g, x);
        pass_options o = ptest_opts(NULL);
        pass_stats s;
        ir_graph *r = pass_pipeline_run(g, &o, &s);
        CHECK_MSG(r != NULL, "%s", ir_last_error());
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_GATHER), 0);
            CHECK_EQ_INT(r->n_nodes, 1);
            CHECK_EQ_INT(r->n_outputs, 1);
            CHECK_EQ_INT(r->nodes[r->outputs[0]].op, IR_OP_PARAM);
            CHECK_EQ_INT(r->n_params, 1);
            CHECK(s.pass[PASS_PRUNE].removed >= 2); /* gather and its index */
            CHECK_EQ_INT(s.nodes_in, 3);
            CHECK_EQ_INT(s.nodes_out, 1);
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* 2. The same with a constant operand: folding fails (index out of range), the node stays
     *    under "fold" alone, and the default pipeline prunes it because it is dead. */
    {
        ir_graph *g = ir_graph_new("s23c");
        float v = 5.0f;
        uint32_t c = b_const(g, TJ_F32, 1, one, &v);
        uint32_t gi = gather(g, c, b_i32(g, 1));
        CHECK(gi != IR_NONE);
        uint32_t x = b_param(g, 0, TJ_F32, 1, one);
        ir_add_output(g, b_bin(g, IR_OP_ADD, x, c));

        pass_options o = ptest_opts("fold");
        pass_stats s;
        ptest_eval_calls = 0;
        ir_graph *r = pass_pipeline_run(g, &o, &s);
        CHECK_MSG(r != NULL, "%s", ir_last_error());
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_GATHER), 1);
            CHECK(s.pass[PASS_FOLD].fold_failed >= 1);
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 0);
            CHECK(ptest_eval_calls >= 1);
            CHECK_EQ_INT(ir_last_code(), TJ_OK); /* the evaluator's error was cleared */
        }
        ir_graph_free(r);

        o = ptest_opts(NULL);
        r = pass_pipeline_run(g, &o, &s);
        CHECK_MSG(r != NULL, "%s", ir_last_error());
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_GATHER), 0);
            CHECK_EQ_INT(r->n_nodes, 3); /* const, param, add */
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 1);
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* 3. A live failing node is kept (it fails at run time, not at compile time). */
    {
        ir_graph *g = ir_graph_new("s23live");
        float v = 5.0f;
        uint32_t c = b_const(g, TJ_F32, 1, one, &v);
        uint32_t gi = gather(g, c, b_i32(g, 1));
        ir_add_output(g, gi);
        uint32_t dz = b_bin(g, IR_OP_DIV, b_i32(g, 4), b_i32(g, 0)); /* int division by zero */
        ir_add_output(g, dz);
        uint32_t ok = b_bin(g, IR_OP_DIV, b_i32(g, 8), b_i32(g, 2)); /* folds to 4 */
        ir_add_output(g, ok);
        pass_options o = ptest_opts(NULL);
        pass_stats s;
        ir_graph *r = pass_pipeline_run(g, &o, &s);
        CHECK_MSG(r != NULL, "%s", ir_last_error());
        if (r) {
            CHECK_EQ_INT(r->nodes[r->outputs[0]].op, IR_OP_GATHER);
            CHECK_EQ_INT(r->nodes[r->outputs[1]].op, IR_OP_DIV);
            const ir_node *k = &r->nodes[r->outputs[2]];
            CHECK_EQ_INT(k->op, IR_OP_CONST);
            if (k->op == IR_OP_CONST)
                CHECK_EQ_INT(*(const int32_t *)ir_blob_get(r, k->a.blob)->data, 4);
            CHECK(s.pass[PASS_FOLD].fold_failed >= 2);
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 1);
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* 4. Side effects survive with nothing using them, in program order; the dead op between
     *    them goes. */
    {
        ir_graph *g = ir_graph_new("s23fx");
        uint32_t x = b_param(g, 0, TJ_F32, 1, one);
        uint32_t p1 = b_print(g, x, "first");
        uint32_t dead = b_un(g, IR_OP_EXP, x);
        uint32_t p2 = b_print(g, b_un(g, IR_OP_NEG, x), "second");
        CHECK(p1 != IR_NONE && p2 != IR_NONE && dead != IR_NONE);
        pass_options o = ptest_opts(NULL);
        ir_graph *r = pass_pipeline_run(g, &o, NULL);
        CHECK_MSG(r != NULL, "%s", ir_last_error());
        if (r) {
            CHECK_EQ_INT(r->n_effects, 2);
            CHECK_EQ_INT(count_op(r, IR_OP_EXP), 0);
            CHECK_EQ_INT(count_op(r, IR_OP_NEG), 1);
            CHECK_EQ_INT(r->n_outputs, 0);
            if (r->n_effects == 2) {
                const ir_node *a = &r->nodes[r->effects[0]], *b = &r->nodes[r->effects[1]];
                CHECK(r->effects[0] < r->effects[1]);
                const ir_blob *ba = ir_blob_get(r, a->a.blob), *bb = ir_blob_get(r, b->a.blob);
                CHECK(ba && ba->size == 5 && !memcmp(ba->data, "first", 5));
                CHECK(bb && bb->size == 6 && !memcmp(bb->data, "second", 6));
            }
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    return check_done();
}
