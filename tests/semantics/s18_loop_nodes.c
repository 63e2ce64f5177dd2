/* s18_loop_nodes.c — SEMANTICS S18: a loop over a host list unrolls into the graph, which grows
 * with the list (the seed: 11 nodes for 3 items, 32 for 10); the same loop over a tensor stays one
 * loop node, the graph's size constant whatever the length. Both give the same values. */
#include <tracejit.h>

#include "check.h"

/* the seed's train(dataset): loss += abs(y - x) per item; here the items scale an input so the
 * unrolled graph cannot be folded away */
static int n_items;
static const int (*items)[2];
static tj_tensor *train_host(tj_tensor *w) {
    tj_tensor *loss = tj_scalar_i32(0);
    for (int k = 0; k < n_items; k++) /* host data: unrolled at trace time */
        loss = tj_add(loss, tj_abs(tj_sub(tj_mul(w, tj_scalar_i32(items[k][1])),
                                          tj_scalar_i32(items[k][0]))));
    return loss;
}

/* loss, one (x, y) row -> loss + abs(w * y - x); w is the enclosing function's (an invariant) */
static tj_tensor *scan_step(int n, tj_tensor *const *a, void *user) {
    (void)n;
    tj_tensor *w = user;
    tj_tensor *x = tj_gather(a[1], tj_scalar_i64(0), 0), *y = tj_gather(a[1], tj_scalar_i64(1), 0);
    return tj_add(a[0], tj_abs(tj_sub(tj_mul(w, y), x)));
}
static tj_tensor *train_tensor(tj_tensor *w, tj_tensor *data) {
    tj_tensor *zero = tj_scalar_i32(0);
    tj_tensor *r = tj_scan(scan_step, 1, &zero, 1, &data, w);
    return tj_tuple_get(r, 0);
}

int main(void) {
    int eager = tj_get_eager();
    tj_scope_begin();
    static const int small[3][2] = {{1, 1}, {1, 1}, {1, 1}};
    static const int big[10][2] = {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1},
                                   {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
    tj_tensor *w = tj_scalar_i32(3);
    int counts[2];
    double values[2];
    for (int k = 0; k < 2; k++) {
        items = k ? big : small;
        n_items = k ? 10 : 3;
        tj_function *f = tj_function_new("train", (void *)train_host, 1, NULL);
        tj_concrete *c = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_I32}});
        counts[k] = tj_concrete_node_count(c);
        values[k] = tj_tensor_get_f64(tj_call(f, 1, &w), 0);
        tj_function_free(f);
    }
    printf("host list: %d nodes for 3 items, %d for 10\n", counts[0], counts[1]);
    CHECK(counts[0] > 3);
    CHECK(counts[1] > 2 * counts[0]); /* grows with the list, as the seed's 11 -> 32 */
    CHECK_NEAR(values[0], 3 * 2, 0);
    CHECK_NEAR(values[1], 10 * 2, 0);

    /* the same loop over a tensor: one scan node, the same size for 3 and 10 items */
    tj_function *f = tj_function_new("train", (void *)train_tensor, 2, NULL);
    int tcounts[2];
    for (int k = 0; k < 2; k++) {
        int n = k ? 10 : 3;
        tj_tensor *data = tj_tensor_from_data(TJ_I32, 2, (int64_t[]){n, 2}, k ? big[0] : small[0]);
        tj_tensor *r = tj_call(f, 2, (tj_tensor *[]){w, data});
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        CHECK_NEAR(tj_tensor_get_f64(r, 0), values[k], 0);
        if (!eager) {
            tj_concrete *c = tj_function_get_concrete(
                f, 2, (tj_spec[]){{.dtype = TJ_I32}, {.dtype = TJ_I32, .rank = 2, .dims = {n, 2}}});
            tcounts[k] = tj_concrete_node_count(c);
            char *t = tj_concrete_graph_text(c);
            CHECK_HAS(t, "= scan ");
            free(t);
        }
    }
    if (!eager) {
        printf("tensor: %d nodes for 3 items, %d for 10\n", tcounts[0], tcounts[1]);
        CHECK_EQ_INT(tcounts[0], tcounts[1]);
        CHECK(tcounts[0] < counts[0]);
    }
    tj_function_free(f);
    tj_scope_end();
    return check_done();
}
