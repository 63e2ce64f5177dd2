/* test_regions.c — control flow in the IR (issue 10): COND/WHILE/FOR/SCAN nodes own regions that
 * are checked against their operands when the node is built (branches agree, loop bodies keep
 * each carried value's dtype and shape, scan slices and stacks along axis 0), GET reads one
 * result, a node whose region has a side effect is itself one (listed in effects, never
 * interned), and the structural hash covers the regions. Bad regions fail with a message naming
 * the op, the region, the value and both dtype/shapes. */
#include "check.h"
#include "ir/ir.h"

#define HEAD                                                                                       \
    "graph @g {\n"                                                                                 \
    "  graph @neg {\n"                                                                             \
    "    %0 = param {index=0} : f32[3]\n"                                                          \
    "    %1 = neg %0 : f32[3]\n"                                                                   \
    "    return %1\n"                                                                              \
    "  }\n"

static void fails(const char *text, tj_status code, const char *needle) {
    ir_graph *g = ir_parse(text);
    CHECK_MSG(g == NULL, "parsed: %s", text);
    ir_graph_free(g);
    (void)code;
    CHECK_HAS(ir_last_error(), needle);
}

static ir_graph *parses(const char *text) {
    ir_graph *g = ir_parse(text);
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    if (g)
        CHECK_MSG(ir_verify(g) == TJ_OK, "%s", ir_last_error());
    return g;
}

int main(void) {
    /* a cond whose branches agree; get reads its result */
    ir_graph *g = parses(HEAD "  graph @id {\n"
                              "    %0 = param {index=0} : f32[3]\n"
                              "    return %0\n"
                              "  }\n"
                              "  %0 = param {index=0} : f32[3]\n"
                              "  %1 = param {index=1} : bool[]\n"
                              "  %2 = cond %1, %0 {sub0=1, sub1=2} : tuple[]\n"
                              "  %3 = get %2 {index=0} : f32[3]\n"
                              "  return %3\n"
                              "}\n");
    if (g) {
        CHECK_EQ_INT(ir_cf_n_results(g, &g->nodes[2]), 1);
        CHECK_EQ_INT(g->n_effects, 0);
        ir_graph_free(g);
    }
    /* branches that disagree, a non-bool predicate, a missing region, a region taking more */
    fails(HEAD "  graph @sum {\n"
               "    %0 = param {index=0} : f32[3]\n"
               "    %1 = sum %0 {axes=[0], keepdims=0} : f32[]\n"
               "    return %1\n"
               "  }\n"
               "  %0 = param {index=0} : f32[3]\n"
               "  %1 = const [1] : bool[]\n"
               "  %2 = cond %1, %0 {sub0=1, sub1=2} : tuple[]\n"
               "}\n",
          TJ_ERR_SHAPE, "cond: else region result 0 is float32[], expected float32[3]");
    fails(HEAD "  %0 = param {index=0} : f32[3]\n"
               "  %1 = const [1] : f32[]\n"
               "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
               "}\n",
          TJ_ERR_DTYPE, "cond: the predicate must be a bool scalar, got float32[]");
    fails(HEAD "  %0 = param {index=0} : f32[3]\n"
               "  %1 = const [1] : bool[]\n"
               "  %2 = cond %1, %0 {sub0=1} : tuple[]\n"
               "}\n",
          TJ_ERR_INVALID, "cond: needs two regions");
    fails(HEAD "  %0 = param {index=0} : f32[2]\n"
               "  %1 = const [1] : bool[]\n"
               "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
               "}\n",
          TJ_ERR_SHAPE, "cond: then region value 0 is float32[3], the node gives float32[2]");
    /* while: the body must keep each carried value's shape; the cond returns a bool scalar */
    const char *loop_cond = "  graph @c {\n"
                            "    %0 = param {index=0} : f32[3]\n"
                            "    %1 = sum %0 {axes=[0], keepdims=0} : f32[]\n"
                            "    %2 = const [1] : f32[]\n"
                            "    %3 = greater %1, %2 : bool[]\n"
                            "    return %3\n"
                            "  }\n";
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s%s", HEAD, loop_cond,
             "  %0 = param {index=0} : f32[3]\n"
             "  %1 = while %0 {sub0=2, sub1=1} : tuple[]\n"
             "  %2 = get %1 {index=0} : f32[3]\n"
             "  return %2\n"
             "}\n");
    g = parses(buf);
    ir_graph_free(g);
    snprintf(buf, sizeof buf, "%s%s%s%s", HEAD,
             "  graph @grow {\n"
             "    %0 = param {index=0} : f32[3]\n"
             "    %1 = concat %0, %0 {axis=0} : f32[6]\n"
             "    return %1\n"
             "  }\n",
             loop_cond,
             "  %0 = param {index=0} : f32[3]\n"
             "  %1 = while %0 {sub0=3, sub1=2} : tuple[]\n"
             "}\n");
    fails(buf, TJ_ERR_SHAPE, "while: body region result 0 is float32[6], expected float32[3]");
    fails(HEAD "  %0 = param {index=0} : f32[3]\n"
               "  %1 = while %0 {sub0=1, sub1=1} : tuple[]\n"
               "}\n",
          TJ_ERR_SHAPE, "while: cond region result 0 is float32[3], expected bool[]");
    /* for: int64 bounds, the body takes the index first */
    fails(HEAD "  %0 = param {index=0} : f32[3]\n"
               "  %1 = const [0] : i32[]\n"
               "  %2 = for %1, %1, %1, %0 {sub0=1} : tuple[]\n"
               "}\n",
          TJ_ERR_DTYPE, "for: start must be a int64 scalar, got int32[]");
    /* scan: sequences along axis 0, ys stacked */
    g = parses("graph @g {\n"
               "  graph @step {\n"
               "    %0 = param {index=0} : f32[4]\n"
               "    %1 = param {index=1} : f32[4]\n"
               "    %2 = add %0, %1 : f32[4]\n"
               "    %3 = tanh %2 : f32[4]\n"
               "    return %3, %3\n"
               "  }\n"
               "  %0 = param {index=0} : f32[4]\n"
               "  %1 = param {index=1} : f32[7,4]\n"
               "  %2 = scan %0, %1 {sub0=1, n_carried=1} : tuple[]\n"
               "  %3 = get %2 {index=0} : f32[4]\n"
               "  %4 = get %2 {index=1} : f32[7,4]\n"
               "  return %3, %4\n"
               "}\n");
    ir_graph_free(g);
    fails(HEAD "  %0 = param {index=0} : f32[3]\n"
               "  %1 = scan %0 {sub0=1, n_carried=1} : tuple[]\n"
               "}\n",
          TJ_ERR_INVALID, "scan: needs at least one sequence");
    /* get: index in range, input a control-flow node */
    fails(HEAD "  %0 = param {index=0} : f32[3]\n"
               "  %1 = const [1] : bool[]\n"
               "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
               "  %3 = get %2 {index=1} : f32[3]\n"
               "}\n",
          TJ_ERR_INVALID, "get: result 1 of cond, which has 1");
    fails(HEAD "  %0 = param {index=0} : f32[3]\n"
               "  %1 = get %0 {index=0} : f32[3]\n"
               "}\n",
          TJ_ERR_INVALID, "get: input is param, not a control-flow node");

    /* effects: a node whose region prints is an effect, never merged with its twin */
    const char *effects = "graph @g {\n"
                          "  graph @p {\n"
                          "    %0 = param {index=0} : f32[3]\n"
                          "    %1 = print %0 : void\n"
                          "    return %0\n"
                          "    effects %1\n"
                          "  }\n"
                          "  %0 = param {index=0} : f32[3]\n"
                          "  %1 = const [1] : bool[]\n"
                          "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
                          "  %3 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
                          "  effects %2, %3\n"
                          "}\n";
    g = parses(effects);
    if (g) {
        CHECK_EQ_INT(g->n_nodes, 4);
        CHECK_EQ_INT(g->n_effects, 2);
        CHECK(ir_node_has_effect(g, &g->nodes[2]));
        ir_graph_free(g);
    }
    /* pure twins are interned into one node */
    g = parses(HEAD "  %0 = param {index=0} : f32[3]\n"
                    "  %1 = const [1] : bool[]\n"
                    "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
                    "  %3 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
                    "  %4 = get %3 {index=0} : f32[3]\n"
                    "  return %4\n"
                    "}\n");
    if (g) {
        CHECK_EQ_INT(g->n_nodes, 4); /* %3 is %2 */
        ir_graph_free(g);
    }

    /* the hash covers the regions: same shape of graph, another loop body */
    const char *a_txt = HEAD "  %0 = param {index=0} : f32[3]\n"
                             "  %1 = const [1] : bool[]\n"
                             "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
                             "  %3 = get %2 {index=0} : f32[3]\n"
                             "  return %3\n"
                             "}\n";
    char b_txt[2048];
    snprintf(b_txt, sizeof b_txt, "%s", a_txt);
    char *neg = strstr(b_txt, "= neg %0");
    memcpy(neg, "= abs", 5);
    ir_graph *ga = parses(a_txt), *gb = parses(b_txt);
    if (ga && gb) {
        ir_hash128 ha = ir_graph_hash(ga), hb = ir_graph_hash(gb);
        CHECK(ha.lo != hb.lo || ha.hi != hb.hi);
        ir_graph *gc = ir_graph_clone(ga);
        ir_hash128 hc = ir_graph_hash(gc);
        CHECK(ha.lo == hc.lo && ha.hi == hc.hi);
        ir_graph_free(gc);
    }
    ir_graph_free(ga);
    ir_graph_free(gb);

    /* assigned slots are found through regions */
    g = parses("graph @g {\n"
               "  graph @body {\n"
               "    %0 = param {index=0} : i64[]\n"
               "    %1 = param {index=1} : f32[]\n"
               "    %2 = assign %1 {slot=2} : f32[]\n"
               "    return %1\n"
               "    effects %2\n"
               "  }\n"
               "  %0 = const [0] : i64[]\n"
               "  %1 = const [1] : f32[]\n"
               "  %2 = for %0, %0, %0, %1 {sub0=1} : tuple[]\n"
               "  effects %2\n"
               "}\n");
    if (g) {
        uint8_t slots[4] = {0};
        ir_assigned_slots(g, slots, 4);
        CHECK(!slots[0] && !slots[1] && slots[2] && !slots[3]);
        ir_graph_free(g);
    }

    /* regions are shared, not copied: a clone holds the same region graphs, which live on
     * while either holder does (freed in either order; ASan sees a use after free) and hash
     * alike; a deep chain of regions clones in constant work per level */
    g = parses(HEAD "  %0 = param {index=0} : f32[3]\n"
                    "  %1 = const [1] : bool[]\n"
                    "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
                    "  %3 = get %2 {index=0} : f32[3]\n"
                    "  return %3\n"
                    "}\n");
    for (int order = 0; g && order < 2; order++) {
        ir_graph *c = ir_graph_clone(g);
        CHECK(c && c->n_subs == 1 && c->subs[0] == g->subs[0]);
        CHECK(c && ir_graph_hash(c).lo == ir_graph_hash(g).lo);
        CHECK(c && ir_graph_layout_hash(c).lo == ir_graph_layout_hash(g).lo);
        ir_graph *first = order ? c : g, *second = order ? g : c;
        ir_graph_free(first);
        CHECK(second->subs[0]->n_nodes == 2 && second->subs[0]->nodes[1].op == IR_OP_NEG);
        CHECK(ir_verify(second) == TJ_OK);
        if (order)
            ir_graph_free(second); /* the original, last */
        else
            g = second;
    }
    return check_done();
}
