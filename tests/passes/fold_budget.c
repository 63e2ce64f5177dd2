/* fold_budget.c — the constant-folding budget: expanding ops (broadcast_to, eye, range) are not
 * folded into larger constants, results over fold_max_bytes (default 1 MiB) are not folded
 * except transposes (the same bytes reordered),
 * random and side-effect ops are neither folded nor merged, param-dependent nodes are not
 * folded, and with no evaluator nothing is folded. */
#include <stdlib.h>

#include "check.h"
#include "ptest.h"

static ir_graph *run(const ir_graph *g, const char *passes, size_t max_bytes, pass_stats *s) {
    pass_options o = ptest_opts(passes);
    o.fold_max_bytes = max_bytes;
    ir_graph *r = pass_pipeline_run(g, &o, s);
    CHECK_MSG(r != NULL, "%s", ir_last_error());
    return r;
}

int main(void) {
    pass_stats s;
    /* broadcast_to(scalar const, [1000]) stays: folding would expand 4 bytes into 4000. */
    {
        ir_graph *g = ir_graph_new("expand");
        int64_t d[1] = {1000};
        uint32_t b = b_shaped(g, IR_OP_BROADCAST_TO, b_f32(g, 2), 1, d);
        ir_add_output(g, b_un(g, IR_OP_NEG, b));
        ptest_eval_calls = 0;
        ir_graph *r = run(g, NULL, 0, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_BROADCAST_TO), 1);
            CHECK_EQ_INT(count_op(r, IR_OP_NEG), 1); /* its input is not a const */
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 0);
            CHECK_EQ_INT(ptest_eval_calls, 0); /* never even tried */
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* eye and range are sources that expand: never folded (and nothing above them). */
    {
        ir_graph *g = ir_graph_new("eye_range");
        ir_node p;
        memset(&p, 0, sizeof p);
        p.op = IR_OP_EYE;
        p.dtype = TJ_F32;
        p.rank = 2;
        p.dims[0] = p.dims[1] = 3;
        uint32_t e = ir_add(g, &p, NULL, 0);
        memset(&p, 0, sizeof p);
        p.op = IR_OP_RANGE;
        p.dtype = TJ_F32;
        p.a.f[0] = 0, p.a.f[1] = 3, p.a.f[2] = 1;
        uint32_t rg = ir_add(g, &p, NULL, 0);
        CHECK(e != IR_NONE && rg != IR_NONE);
        ir_add_output(g, b_bin(g, IR_OP_ADD, e, rg));
        ir_graph *r = run(g, NULL, 0, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_EYE), 1);
            CHECK_EQ_INT(count_op(r, IR_OP_RANGE), 1);
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 1);
            CHECK_EQ_INT(count_op(r, IR_OP_CONST), 0);
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* Size: 300,000 f32 (1.2 MB) is over the default 1 MiB; with a 2 MiB budget it folds. */
    {
        ir_graph *g = ir_graph_new("big");
        int64_t d[1] = {300000};
        float *z = calloc(300000, sizeof *z);
        uint32_t big = b_const(g, TJ_F32, 1, d, z);
        free(z);
        uint32_t add = b_bin(g, IR_OP_ADD, big, b_f32(g, 1.5f));
        ir_add_output(g, add);
        ir_graph *r = run(g, "fold,prune", 0, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 1);
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 0);
        }
        ir_graph_free(r);
        r = run(g, "fold,prune", 2u << 20, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 0);
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 1);
            const float *v = const_f32(r, r->outputs[0]);
            CHECK(v && v[0] == 1.5f && v[299999] == 1.5f);
        }
        ir_graph_free(r);
        /* and a budget just below the result size refuses it */
        r = run(g, "fold,prune", 300000 * 4 - 1, &s);
        if (r)
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 1);
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* A transpose folds whatever its size: its result is its input reordered (an ONNX filter
     * turned HWIO), and the source constant is pruned when nothing else reads it. */
    {
        ir_graph *g = ir_graph_new("big_transpose");
        int64_t d[2] = {600, 500};
        float *z = malloc(600 * 500 * sizeof *z);
        for (int i = 0; i < 600 * 500; i++)
            z[i] = (float)i;
        uint32_t big = b_const(g, TJ_F32, 2, d, z);
        free(z);
        ir_add_output(g, b_listed(g, IR_OP_TRANSPOSE, big, 2, (int64_t[]){1, 0}));
        ir_graph *r = run(g, "fold,prune", 0, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_TRANSPOSE), 0);
            CHECK_EQ_INT(count_op(r, IR_OP_CONST), 1);
            const float *v = const_f32(r, r->outputs[0]);
            CHECK(v && v[1] == 500.0f && v[600] == 1.0f); /* [500, 600]: v[j][i] = z[i][j] */
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* Random ops: not folded (neg of a random stays), not merged (two identical draws stay). */
    {
        ir_graph *g = ir_graph_new("rand");
        int64_t d[1] = {4};
        uint32_t r1 = b_random(g, 7, 1, d), r2 = b_random(g, 7, 1, d);
        CHECK(r1 != r2);
        ir_add_output(g, b_bin(g, IR_OP_ADD, b_un(g, IR_OP_NEG, r1), r2));
        ir_graph *r = run(g, NULL, 0, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_RANDOM_UNIFORM), 2);
            CHECK_EQ_INT(count_op(r, IR_OP_NEG), 1);
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 0);
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* Prints of the same constant with the same prefix: both kept, in order, unfolded. */
    {
        ir_graph *g = ir_graph_new("print");
        uint32_t c = b_bin(g, IR_OP_ADD, b_f32(g, 1), b_f32(g, 2));
        uint32_t p1 = b_print(g, c, "v"), p2 = b_print(g, c, "v");
        CHECK(p1 != p2);
        ir_graph *r = run(g, NULL, 0, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_PRINT), 2);
            CHECK_EQ_INT(r->n_effects, 2);
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 0); /* its input did fold: 3 */
            if (r->n_effects == 2) {
                const uint32_t *in = ir_inputs(r, &r->nodes[r->effects[0]]);
                const float *v = const_f32(r, in[0]);
                CHECK(v && *v == 3.0f);
            }
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    /* Param-dependent: x + (1 + 2) folds only the constant part. */
    {
        ir_graph *g = ir_graph_new("param");
        uint32_t x = b_param(g, 0, TJ_I32, 0, NULL);
        ir_add_output(g, b_bin(g, IR_OP_ADD, x, b_bin(g, IR_OP_ADD, b_i32(g, 1), b_i32(g, 2))));
        ir_graph *r = run(g, NULL, 0, &s);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 1);
            CHECK_EQ_INT(count_op(r, IR_OP_PARAM), 1);
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 1);
            CHECK_EQ_INT(r->n_nodes, 3);
        }
        ir_graph_free(r);
        /* no evaluator: nothing folds, the pipeline still runs */
        pass_options o = ptest_opts(NULL);
        o.eval = NULL;
        r = pass_pipeline_run(g, &o, &s);
        CHECK(r != NULL);
        if (r) {
            CHECK_EQ_INT(count_op(r, IR_OP_ADD), 2);
            CHECK_EQ_INT(s.pass[PASS_FOLD].folded, 0);
        }
        ir_graph_free(r);
        ir_graph_free(g);
    }
    return check_done();
}
