/* test_cpu_fusion.c — the fusion/partitioning pass (passes/fusion.c) on hand-built graphs:
 * chains and diamonds fuse into one group, a value read by a non-elementwise node or a side
 * effect ends its group, graph outputs inside a group are outputs only when they have the loop
 * shape, dead nodes are not scheduled, and groups come in a valid order. Needs no LLVM. */
#include "check.h"
#include "test_cpu_util.h"

static char *part_str(const ir_graph *g) {
    pass_partition *p = pass_fusion_run(g, NULL, NULL, NULL);
    char *s = pass_partition_str(p);
    pass_partition_free(p);
    return s;
}

static uint32_t sum_all(ir_graph *g, uint32_t x) {
    ir_node p = {0};
    p.op = IR_OP_SUM;
    const ir_node *n = ir_node_get(g, x);
    for (int d = 0; d < n->rank; d++)
        p.a.list[d] = d;
    p.a.n_list = n->rank;
    return ir_add(g, &p, &x, 1);
}

static bool never(const ir_graph *g, uint32_t id, void *user) {
    (*(int *)user)++;
    return false;
}

int main(void) {
    int64_t n4 = 4, d2[2] = {3, 4};
    char *s;
    { /* a chain longer than a group takes: cut into groups of PASS_MAX_GROUP_NODES, each
       * reading the one before (issue 23: one kernel of 3,000 relus took 5.4 s to compile) */
        ir_graph *g = ir_graph_new("long");
        uint32_t v = tu_param(g, 0, TJ_F32, 1, &n4), n = 1000;
        for (uint32_t i = 0; i < n; i++)
            v = tu_un(g, i % 2 ? IR_OP_NEG : IR_OP_EXP, v); /* alternating: nothing simplifies */
        ir_add_output(g, v);
        pass_partition *p = pass_fusion_run(g, NULL, NULL, NULL);
        CHECK(p != NULL);
        uint32_t fused = 0, most = 0, total = 0;
        for (uint32_t k = 0; p && k < p->n_groups; k++) {
            const pass_group *gr = &p->groups[k];
            if (!gr->fused)
                continue;
            fused++;
            total += gr->n_nodes;
            most = gr->n_nodes > most ? gr->n_nodes : most;
            /* convex and in order: each group reads only the one before it (or the param) */
            CHECK(gr->n_inputs == 1 && gr->n_outputs == 1);
            CHECK(gr->nodes[0] > gr->inputs[0] && gr->outputs[0] == gr->nodes[gr->n_nodes - 1]);
        }
        CHECK_EQ_INT(total, n);
        CHECK_EQ_INT(most, PASS_MAX_GROUP_NODES);
        CHECK_EQ_INT(fused, (n + PASS_MAX_GROUP_NODES - 1) / PASS_MAX_GROUP_NODES);
        pass_partition_free(p);
        ir_graph_free(g);
    }
    { /* chain */
        ir_graph *g = ir_graph_new("chain");
        uint32_t x = tu_param(g, 0, TJ_F32, 1, &n4);
        uint32_t y = tu_un(g, IR_OP_RELU, tu_un(g, IR_OP_EXP, tu_un(g, IR_OP_NEG, x)));
        ir_add_output(g, y);
        s = part_str(g);
        CHECK_STR(s, "node %0 <- -> %0\nfused %1 %2 %3 <- %0 -> %3\n");
        free(s);
        ir_graph_free(g);
    }
    { /* diamond with a broadcast scalar const: a = x*2; b = a+1; c = a*b */
        ir_graph *g = ir_graph_new("diamond");
        uint32_t x = tu_param(g, 0, TJ_F32, 2, d2);
        uint32_t two = tu_const_f64(g, TJ_F32, 2);
        uint32_t a = tu_bin(g, IR_OP_MUL, x, two);
        uint32_t b = tu_bin(g, IR_OP_ADD, a, tu_const_f64(g, TJ_F32, 1));
        ir_add_output(g, tu_bin(g, IR_OP_MUL, a, b));
        s = part_str(g);
        CHECK_STR(s, "node %0 <- -> %0\nnode %1 <- -> %1\nnode %3 <- -> %3\n"
                     "fused %2 %4 %5 <- %0 %1 %3 -> %5\n");
        free(s);
        ir_graph_free(g);
    }
    { /* a value read by a reduction and by an add: its own group */
        ir_graph *g = ir_graph_new("split");
        uint32_t x = tu_param(g, 0, TJ_F32, 2, d2);
        uint32_t a = tu_un(g, IR_OP_EXP, tu_un(g, IR_OP_NEG, x)); /* %1 %2 */
        uint32_t sm = sum_all(g, a);                              /* %3 */
        uint32_t b = tu_bin(g, IR_OP_ADD, a, x);                  /* %4 */
        ir_add_output(g, sm);
        ir_add_output(g, tu_un(g, IR_OP_ABS, b)); /* %5 */
        s = part_str(g);
        CHECK_STR(s, "node %0 <- -> %0\nfused %1 %2 <- %0 -> %2\nnode %3 <- %2 -> %3\n"
                     "fused %4 %5 <- %0 %2 -> %5\n");
        free(s);
        ir_graph_free(g);
    }
    { /* graph outputs inside a group: same shape joins (two outputs), smaller shape does not */
        ir_graph *g = ir_graph_new("outs");
        uint32_t x = tu_param(g, 0, TJ_F32, 1, &n4);
        uint32_t c = tu_param(g, 1, TJ_F32, 0, NULL);
        uint32_t sc = tu_un(g, IR_OP_NEG, c);     /* %2: [] output */
        uint32_t y = tu_bin(g, IR_OP_MUL, x, sc); /* %3: [4] output */
        uint32_t z = tu_un(g, IR_OP_ABS, y);      /* %4 */
        ir_add_output(g, sc);
        ir_add_output(g, y);
        ir_add_output(g, z);
        s = part_str(g);
        CHECK_STR(s, "node %0 <- -> %0\nnode %1 <- -> %1\nfused %2 <- %1 -> %2\n"
                     "fused %3 %4 <- %0 %2 -> %3 %4\n");
        free(s);
        pass_partition *p = pass_fusion_run(g, NULL, NULL, NULL);
        CHECK(p && p->groups[3].rank == 1 && p->groups[3].dims[0] == 4);
        CHECK(p && p->groups[2].rank == 0);
        pass_partition_free(p);
        ir_graph_free(g);
    }
    { /* a scalar intermediate used only inside is recomputed per element: it joins */
        ir_graph *g = ir_graph_new("scalar");
        uint32_t x = tu_param(g, 0, TJ_F32, 1, &n4);
        uint32_t c = tu_param(g, 1, TJ_F32, 0, NULL);
        ir_add_output(g, tu_bin(g, IR_OP_ADD, x, tu_un(g, IR_OP_NEG, c)));
        s = part_str(g);
        CHECK_STR(s, "node %0 <- -> %0\nnode %1 <- -> %1\nfused %2 %3 <- %0 %1 -> %3\n");
        free(s);
        ir_graph_free(g);
    }
    { /* dead nodes are not scheduled; string ops are not fused */
        ir_graph *g = ir_graph_new("dead");
        uint32_t x = tu_param(g, 0, TJ_F32, 1, &n4);
        uint32_t dead = tu_un(g, IR_OP_NEG, x);
        uint32_t st = tu_param(g, 1, TJ_STRING, 0, NULL);
        uint32_t cat = tu_bin(g, IR_OP_ADD, st, st);
        ir_add_output(g, tu_un(g, IR_OP_ABS, x));
        ir_add_output(g, cat);
        pass_partition *p = pass_fusion_run(g, NULL, NULL, NULL);
        CHECK(p != NULL);
        CHECK_EQ_INT(p->group_of[dead], IR_NONE);
        CHECK(!p->groups[p->group_of[cat]].fused);
        s = pass_partition_str(p);
        CHECK_STR(s, "node %0 <- -> %0\nnode %2 <- -> %2\nnode %3 <- %2 -> %3\n"
                     "fused %4 <- %0 -> %4\n");
        free(s);
        pass_partition_free(p);
        ir_graph_free(g);
    }
    { /* a custom predicate refusing every node: all singletons, nothing fused */
        ir_graph *g = ir_graph_new("none");
        uint32_t x = tu_param(g, 0, TJ_F32, 1, &n4);
        ir_add_output(g, tu_un(g, IR_OP_ABS, tu_un(g, IR_OP_NEG, x)));
        pass_partition *p = pass_fusion_run(g, NULL, NULL, NULL);
        CHECK_EQ_INT(p->n_groups, 2);
        pass_partition_free(p);
        int calls = 0;
        p = pass_fusion_run(g, never, NULL, &calls);
        CHECK_EQ_INT(p->n_groups, 3);
        CHECK_EQ_INT(calls, 3);
        for (uint32_t k = 0; k < p->n_groups; k++)
            CHECK(!p->groups[k].fused);
        pass_partition_free(p);
        ir_graph_free(g);
    }
    return check_done();
}
