/* test_concretize.c — ir_graph_concretize: a graph traced with unknown dims (-1) at the shapes of
 * one call. Params take the given shapes, every other node is inferred again (a reshape's -1
 * resolved, broadcasting, reductions), node keys follow (the copy verifies and hashes as a graph
 * built at those shapes), and the source graph is untouched. Errors: shapes an op refuses (the
 * op and both shapes named), a param without a shape, a graph with regions (control flow, whose
 * region params keep their unknown dims). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/ir.h"

static const char *traced = "graph @g {\n"
                            "  %0 = param {index=0} : f32[?,4]\n"
                            "  %1 = param {index=1} : f32[4]\n"
                            "  %2 = add %0, %1 : f32[?,4]\n"
                            "  %3 = reshape %2 : f32[?,2]\n"
                            "  %4 = sum %3 {axes=[1], keepdims=0} : f32[?]\n"
                            "  return %4\n"
                            "}\n";

static const char *at3 = "graph @g {\n"
                         "  %0 = param {index=0} : f32[3,4]\n"
                         "  %1 = param {index=1} : f32[4]\n"
                         "  %2 = add %0, %1 : f32[3,4]\n"
                         "  %3 = reshape %2 : f32[6,2]\n"
                         "  %4 = sum %3 {axes=[1], keepdims=0} : f32[6]\n"
                         "  return %4\n"
                         "}\n";

int main(void) {
    ir_graph *g = ir_parse(traced);
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    if (!g)
        return check_done();
    int rank[2] = {2, 1};
    int64_t dims[2][IR_MAX_RANK] = {{3, 4}, {4}};
    ir_graph *c = ir_graph_concretize(g, rank, (const int64_t(*)[IR_MAX_RANK])dims);
    CHECK_MSG(c != NULL, "%s", ir_last_error());
    if (c) {
        CHECK_EQ_INT(ir_verify(c), TJ_OK);
        char *got = ir_print(c), *src = ir_print(g);
        ir_graph *want = ir_parse(at3);
        char *wt = want ? ir_print(want) : NULL;
        CHECK_STR(got, wt);
        CHECK_MSG(strstr(src, "f32[?,4]") != NULL, "the source changed: %s", src);
        free(got);
        free(src);
        free(wt);
        ir_graph_free(want);
        ir_graph_free(c);
    }
    /* shapes an op refuses: the op and both shapes */
    int64_t bad[2][IR_MAX_RANK] = {{3, 5}, {4}};
    CHECK(ir_graph_concretize(g, rank, (const int64_t(*)[IR_MAX_RANK])bad) == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_SHAPE);
    CHECK_HAS(ir_last_error(), "add");
    CHECK_HAS(ir_last_error(), "[3,5]");
    CHECK_HAS(ir_last_error(), "[4]");
    /* a reshape whose size no longer divides */
    int64_t odd[2][IR_MAX_RANK] = {{1, 4}, {4}};
    ir_graph *c1 = ir_graph_concretize(g, rank, (const int64_t(*)[IR_MAX_RANK])odd);
    CHECK(c1 != NULL); /* 4 elements: [2,2] */
    ir_graph_free(c1);
    int64_t three[2][IR_MAX_RANK] = {{3, 1}, {1}};
    int rank31[2] = {2, 1};
    CHECK(ir_graph_concretize(g, rank31, (const int64_t(*)[IR_MAX_RANK])three) == NULL);
    CHECK_HAS(ir_last_error(), "reshape");
    /* a param without a shape */
    int norank[2] = {2, -1};
    CHECK(ir_graph_concretize(g, norank, (const int64_t(*)[IR_MAX_RANK])dims) == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "param 1 has no shape");
    ir_graph_free(g);

    /* regions: not concretized (their params keep unknown dims) */
    g = ir_parse("graph @r {\n"
                 "  graph @id {\n"
                 "    %0 = param {index=0} : f32[?]\n"
                 "    return %0\n"
                 "  }\n"
                 "  %0 = param {index=0} : f32[?]\n"
                 "  %1 = param {index=1} : bool[]\n"
                 "  %2 = cond %1, %0 {sub0=1, sub1=1} : tuple[]\n"
                 "  %3 = get %2 {index=0} : f32[?]\n"
                 "  return %3\n"
                 "}\n");
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    if (g) {
        int r2[2] = {1, 0};
        int64_t d2[2][IR_MAX_RANK] = {{5}, {0}};
        CHECK(ir_graph_concretize(g, r2, (const int64_t(*)[IR_MAX_RANK])d2) == NULL);
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(ir_last_error(), "regions");
        ir_graph_free(g);
    }
    return check_done();
}
