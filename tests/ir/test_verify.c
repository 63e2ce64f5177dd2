/* test_verify.c — ir_verify accepts graphs built through ir_add and reports each kind of
 * corruption (order, inferred shape, payload, key, outputs, effects, params, caps, subgraphs)
 * with a message naming the node. */
#include "check.h"
#include "ir/ir.h"

static ir_graph *base(void) {
    ir_graph *g = ir_graph_new("v");
    ir_node p = {.op = IR_OP_PARAM, .dtype = TJ_F32, .rank = 2, .dims = {2, 3}};
    uint32_t x = ir_add(g, &p, NULL, 0);
    p.a.i[0] = 1;
    uint32_t y = ir_add(g, &p, NULL, 0);
    uint32_t in[2] = {x, y};
    uint32_t s = ir_add(g, &(ir_node){.op = IR_OP_ADD}, in, 2);
    float v[3] = {1, 2, 3};
    ir_node c = {.op = IR_OP_CONST, .dtype = TJ_F32, .rank = 1, .dims = {3}};
    c.a.blob = ir_add_blob(g, v, sizeof v);
    uint32_t k = ir_add(g, &c, NULL, 0);
    uint32_t in2[2] = {s, k};
    uint32_t m = ir_add(g, &(ir_node){.op = IR_OP_MUL}, in2, 2);
    ir_node pr = {.op = IR_OP_PRINT};
    ir_add(g, &pr, &m, 1);
    ir_node as = {.op = IR_OP_ASSIGN};
    as.a.i[0] = 0;
    ir_add(g, &as, &m, 1);
    ir_add_output(g, m);
    return g; /* %0 %1 params, %2 add, %3 const, %4 mul, %5 print, %6 assign */
}

#define BAD(mutation, needle)                                                                      \
    do {                                                                                           \
        ir_graph *g_ = base();                                                                     \
        mutation;                                                                                  \
        CHECK_EQ_INT(ir_verify(g_), TJ_ERR_INVALID);                                               \
        CHECK_HAS(ir_last_error(), needle);                                                        \
        ir_graph_free(g_);                                                                         \
    } while (0)

int main(void) {
    ir_graph *g = base();
    CHECK_EQ_INT(g->n_nodes, 7);
    CHECK_EQ_INT(ir_verify(g), TJ_OK);
    CHECK_EQ_INT(ir_verify(NULL), TJ_ERR_INVALID);
    ir_graph_free(g);

    BAD(g_->edges[g_->nodes[2].in_off] = 4, "node %2 (add) input 0 is %4: not topological");
    BAD(g_->nodes[2].dims[1] = 4, "node %2 (add) differs from its inferred dtype/shape/attrs");
    BAD(g_->nodes[4].dtype = TJ_F64, "node %4 (mul) differs");
    BAD(g_->nodes[2].op = IR_N_OPS + 3, "node %2 has unknown op");
    BAD(g_->nodes[3].a.blob = 9, "node %3 (const): const: invalid blob 9");
    BAD(g_->blobs[0].size = 8, "payload of 8 bytes does not match f32[3]");
    BAD(g_->nodes[2].h ^= 1, "node %2 (add) has a stale interning key");
    BAD(g_->nodes[4].n_in = 1, "node %4 (mul) does not infer: mul: expected 2 inputs, got 1");
    BAD(g_->outputs[0] = 99, "output 0 (%99) is not a value node");
    BAD(g_->outputs[0] = 5, "output 0 (%5) is not a value node");
    BAD(g_->n_effects = 1, "side-effect node %6 (assign) is not in the effect list");
    BAD(g_->effects[0] = 6, "side-effect node %5 (print) is not in the effect list");
    BAD(g_->n_params = 3, "param index 2 is missing");
    BAD(g_->n_params = 1, "param %1 has index 1 >= 1");
    BAD(g_->n_caps = 0, "capture slot 0 used but n_caps is 0");
    BAD(g_->nodes[1].a.i[0] = 0; g_->nodes[1].h = g_->nodes[0].h, "param index 0 defined twice");
    BAD(g_->nodes[2].a.i[1] = 5, "node %2 (add) differs");
    BAD(ir_add_sub(g_, ir_graph_new("s")); ir_graph *s_ = g_->subs[0];
        s_->n_params = 1, "param index 0 is missing");
    return check_done();
}
