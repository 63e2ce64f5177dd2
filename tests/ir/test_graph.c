/* test_graph.c — the graph builder: interning, commutative canonicalisation, side-effect and
 * random nodes never merged, effect list, params/caps counting, blobs, clone, error messages,
 * and a 100k-node build. */
#include <time.h>

#include "check.h"
#include "ir/ir.h"

static uint32_t param(ir_graph *g, int idx, int dt, int rank, const int64_t *dims) {
    ir_node p = {.op = IR_OP_PARAM, .dtype = (uint8_t)dt, .rank = (uint8_t)rank};
    p.a.i[0] = idx;
    for (int k = 0; k < rank; k++)
        p.dims[k] = dims[k];
    return ir_add(g, &p, NULL, 0);
}

static uint32_t op2(ir_graph *g, int op, uint32_t a, uint32_t b) {
    ir_node p = {.op = (uint16_t)op};
    uint32_t in[2] = {a, b};
    return ir_add(g, &p, in, 2);
}

static uint32_t op1(ir_graph *g, int op, uint32_t a) {
    ir_node p = {.op = (uint16_t)op};
    return ir_add(g, &p, &a, 1);
}

static uint32_t cf32(ir_graph *g, float v) {
    ir_node p = {.op = IR_OP_CONST, .dtype = TJ_F32};
    p.a.blob = ir_add_blob(g, &v, sizeof v);
    return ir_add(g, &p, NULL, 0);
}

/* ir_graph_reserve / ir_graph_reset / ir_add_inferred: the pass rebuilds' fast paths give the same
 * graph, ids and hash as plain ir_add. */
static int releases;
static void count_release(void *ctx) {
    CHECK(ctx != NULL);
    releases++;
}

static void test_fast_paths(void) {
    ir_graph *a = ir_graph_new("a"), *b = ir_graph_new("b");
    CHECK(ir_graph_reserve(b, 1000, 2000) == TJ_OK);
    CHECK(b->n_nodes == 0);
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_PARAM;
    p.dtype = TJ_F32;
    p.rank = 1;
    p.dims[0] = 4;
    uint32_t x = ir_add(a, &p, NULL, 0);
    ir_node q;
    memset(&q, 0, sizeof q);
    q.op = IR_OP_TANH;
    uint32_t t = ir_add(a, &q, &x, 1);
    uint32_t in2[2] = {t, x};
    q.op = IR_OP_ADD;
    uint32_t s = ir_add(a, &q, in2, 2);
    ir_add_output(a, s);
    /* copy node by node through ir_add_inferred */
    uint32_t map[3];
    for (uint32_t i = 0; i < a->n_nodes; i++) {
        const ir_node *n = ir_node_get(a, i);
        uint32_t ins[2];
        for (uint32_t k = 0; k < n->n_in; k++)
            ins[k] = map[ir_inputs(a, n)[k]];
        map[i] = ir_add_inferred(b, n, ins, n->n_in);
        CHECK(map[i] == i);
    }
    ir_add_output(b, map[s]);
    ir_hash128 ha = ir_graph_hash(a), hb = ir_graph_hash(b);
    CHECK(ha.lo == hb.lo && ha.hi == hb.hi);
    CHECK(ir_verify(b) == TJ_OK);
    /* interning still applies: adding the same tanh again returns the existing node */
    CHECK(ir_add_inferred(b, ir_node_get(a, t), &map[x], 1) == map[t]);
    /* reset empties the graph but keeps it usable */
    CHECK(ir_graph_reset(b, "again") == TJ_OK);
    CHECK(b->n_nodes == 0 && b->n_outputs == 0 && b->n_params == 0);
    CHECK_STR(b->name, "again");
    CHECK(ir_add(b, &p, NULL, 0) == 0);
    CHECK(ir_verify(b) == TJ_OK);
    ir_graph_free(a);
    ir_graph_free(b);
}

int main(void) {
    test_fast_paths();
    ir_graph *g = ir_graph_new("g");
    CHECK(g && g->n_nodes == 0);
    CHECK_STR(g->name, "g");
    int64_t d23[] = {2, 3}, d32[] = {3, 2}, d3[] = {3};
    uint32_t x = param(g, 0, TJ_F32, 2, d23), y = param(g, 1, TJ_F32, 1, d3);
    CHECK_EQ_INT(x, 0);
    CHECK_EQ_INT(y, 1);
    CHECK_EQ_INT(g->n_params, 2);
    /* the same param again is interned; the same index with another type is an error */
    CHECK_EQ_INT(param(g, 0, TJ_F32, 2, d23), x);
    CHECK_EQ_INT(param(g, 0, TJ_F32, 1, d3), IR_NONE);
    CHECK_HAS(ir_last_error(), "param: index 0 is already defined as f32[2,3]");

    uint32_t a = op2(g, IR_OP_ADD, x, y);
    CHECK_EQ_INT(a, 2);
    CHECK_EQ_INT(g->nodes[a].rank, 2);
    CHECK(g->nodes[a].dims[0] == 2 && g->nodes[a].dims[1] == 3);
    CHECK_EQ_INT(op2(g, IR_OP_ADD, x, y), a);
    /* commutative: add(y, x) is add(x, y) */
    CHECK_EQ_INT(op2(g, IR_OP_ADD, y, x), a);
    CHECK_EQ_INT(ir_inputs(g, &g->nodes[a])[0], x);
    /* not commutative: sub(y, x) differs from sub(x, y) */
    uint32_t s1 = op2(g, IR_OP_SUB, x, y), s2 = op2(g, IR_OP_SUB, y, x);
    CHECK(s1 != s2 && s1 != IR_NONE && s2 != IR_NONE);
    CHECK_EQ_INT(ir_inputs(g, &g->nodes[s2])[0], y);

    /* constants interned by content, not blob index */
    uint32_t c1 = cf32(g, 1.5f), c2 = cf32(g, 1.5f), c3 = cf32(g, 2.5f);
    CHECK_EQ_INT(c1, c2);
    CHECK(c3 != c1);

    /* string add is not commutative */
    uint32_t sa = param(g, 2, TJ_STRING, 0, NULL), sb = param(g, 3, TJ_STRING, 0, NULL);
    uint32_t ab = op2(g, IR_OP_ADD, sa, sb), ba = op2(g, IR_OP_ADD, sb, sa);
    CHECK(ab != ba);
    CHECK_EQ_INT(ir_inputs(g, &g->nodes[ba])[0], sb);
    CHECK_EQ_INT(g->n_params, 4);

    /* random never interned */
    ir_node r = {.op = IR_OP_RANDOM_UNIFORM, .dtype = TJ_F32, .rank = 1, .dims = {4}};
    r.a.f[1] = 1.0;
    uint32_t r1 = ir_add(g, &r, NULL, 0), r2 = ir_add(g, &r, NULL, 0);
    CHECK(r1 != IR_NONE && r2 != IR_NONE && r1 != r2);

    /* side effects: never interned, appended to effects */
    uint32_t in1[1] = {a};
    ir_node pr = {.op = IR_OP_PRINT};
    pr.a.blob = ir_add_blob(g, "x", 2);
    uint32_t p1 = ir_add(g, &pr, in1, 1), p2 = ir_add(g, &pr, in1, 1);
    CHECK(p1 != IR_NONE && p2 != IR_NONE && p1 != p2);
    CHECK_EQ_INT(g->nodes[p1].dtype, IR_VOID);
    CHECK_EQ_INT(g->n_effects, 2);
    CHECK(g->effects[0] == p1 && g->effects[1] == p2);
    CHECK_EQ_INT(ir_add_effect(g, p1), TJ_OK); /* already there: no duplicate */
    CHECK_EQ_INT(g->n_effects, 2);
    /* nothing consumes a void value */
    CHECK_EQ_INT(op1(g, IR_OP_NEG, p1), IR_NONE);
    CHECK_HAS(ir_last_error(), "neg: input 0 has no value");
    CHECK_EQ_INT(ir_add_output(g, p1), TJ_ERR_INVALID);

    /* assign and var_read count capture slots */
    ir_node vr = {.op = IR_OP_VAR_READ, .dtype = TJ_F32, .rank = 1, .dims = {3}};
    vr.a.i[0] = 2;
    uint32_t v = ir_add(g, &vr, NULL, 0);
    CHECK(v != IR_NONE);
    CHECK_EQ_INT(g->n_caps, 3);
    ir_node as = {.op = IR_OP_ASSIGN};
    as.a.i[0] = 4;
    uint32_t asn = ir_add(g, &as, &v, 1);
    CHECK(asn != IR_NONE);
    CHECK_EQ_INT(g->n_caps, 5);
    CHECK_EQ_INT(g->nodes[asn].dtype, TJ_F32);
    CHECK_EQ_INT(g->effects[g->n_effects - 1], asn);

    /* errors name the op and shapes */
    uint32_t m1 = param(g, 4, TJ_F32, 2, d32);
    CHECK_EQ_INT(op2(g, IR_OP_MATMUL, m1, m1), IR_NONE);
    CHECK_HAS(ir_last_error(), "matmul: inner dimensions differ: [3,2] x [3,2]");
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_SHAPE);
    uint32_t i1 = param(g, 5, TJ_I32, 1, d3);
    CHECK_EQ_INT(op2(g, IR_OP_ADD, x, i1), IR_NONE);
    CHECK_HAS(ir_last_error(), "add: dtype mismatch: float32 vs int32");
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_DTYPE);
    CHECK_EQ_INT(op2(g, IR_OP_ADD, x, m1), IR_NONE);
    CHECK_HAS(ir_last_error(), "add: incompatible shapes for broadcasting: [2,3] vs [3,2]");
    CHECK_EQ_INT(op2(g, IR_OP_ADD, x, 9999), IR_NONE);
    CHECK_HAS(ir_last_error(), "add: input 1 refers to unknown node 9999");
    ir_node bad = {.op = IR_OP_ADD};
    CHECK_EQ_INT(ir_add(g, &bad, &x, 1), IR_NONE);
    CHECK_HAS(ir_last_error(), "add: expected 2 inputs, got 1");
    bad.op = IR_N_OPS;
    CHECK_EQ_INT(ir_add(g, &bad, NULL, 0), IR_NONE);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_INVALID);
    /* const payload size checked */
    ir_node cb = {.op = IR_OP_CONST, .dtype = TJ_F32, .rank = 1, .dims = {3}};
    cb.a.blob = ir_add_blob(g, "abcd", 4);
    CHECK_EQ_INT(ir_add(g, &cb, NULL, 0), IR_NONE);
    CHECK_HAS(ir_last_error(), "const: payload of 4 bytes does not match f32[3]");
    cb.a.blob = 999;
    CHECK_EQ_INT(ir_add(g, &cb, NULL, 0), IR_NONE);
    CHECK_HAS(ir_last_error(), "invalid blob");

    /* unused attrs are zeroed so they do not defeat interning */
    ir_node ng = {.op = IR_OP_NEG};
    ng.a.i[2] = 77;
    ng.a.f[0] = 3.0;
    uint32_t n1 = ir_add(g, &ng, &x, 1);
    CHECK_EQ_INT(op1(g, IR_OP_NEG, x), n1);
    CHECK_EQ_INT(g->nodes[n1].a.i[2], 0);

    CHECK_EQ_INT(ir_add_output(g, a), TJ_OK);
    CHECK_EQ_INT(ir_add_output(g, 12345), TJ_ERR_INVALID);
    CHECK_EQ_INT(g->n_outputs, 1);
    CHECK_EQ_INT(ir_verify(g), TJ_OK);

    /* clone copies the graph's own arrays; blob payloads and regions (immutable once built) are
     * shared, counted */
    ir_graph *c = ir_graph_clone(g);
    CHECK(c && c->n_nodes == g->n_nodes && c->n_blobs == g->n_blobs);
    CHECK(c->blobs[0].data == g->blobs[0].data && c->blobs[0].h == g->blobs[0].h);
    CHECK(memcmp(c->nodes, g->nodes, sizeof(ir_node) * g->n_nodes) == 0);
    ir_hash128 hg = ir_graph_hash(g), hc = ir_graph_hash(c);
    CHECK(hg.lo == hc.lo && hg.hi == hc.hi);
    CHECK_EQ_INT(ir_add(c, &(ir_node){.op = IR_OP_NEG}, &x, 1), n1); /* clone's itab works */
    uint32_t sub = ir_add_sub(c, ir_graph_new("body"));
    CHECK_EQ_INT(sub, 1);
    ir_graph *cc = ir_graph_clone(c);
    CHECK(cc && cc->n_subs == 1 && cc->subs[0] == c->subs[0]);
    CHECK_STR(cc->subs[0]->name, "body");
    ir_graph_free(cc);
    ir_graph_free(g);          /* the clone's blobs outlive the original (ASan checks the reads) */
    const ir_blob *abl = NULL; /* "abcd", added above */
    for (uint32_t i = 0; i < c->n_blobs; i++)
        if (c->blobs[i].size == 4 && !memcmp(c->blobs[i].data, "abcd", 4))
            abl = &c->blobs[i];
    CHECK(abl != NULL);
    uint32_t shb = ir_add_blob_shared(c, abl); /* from itself, while the array grows */
    CHECK(shb == c->n_blobs && memcmp(ir_blob_get(c, shb)->data, "abcd", 4) == 0);
    CHECK_EQ_INT(ir_add_blob_shared(c, NULL), 0);
    ir_graph_free(c);
    ir_graph_free(NULL);

    /* a borrowed payload: not copied, hashed as a copy of it is, handed back once, after the
     * last graph and the last tensor token let go */
    static const float w[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    releases = 0;
    ir_graph *bg = ir_graph_new(NULL);
    uint32_t bb = ir_add_blob_borrowed(bg, w, sizeof w, count_release, (void *)w);
    uint32_t cp = ir_add_blob(bg, w, sizeof w);
    CHECK(bb == 1 && cp == 2);
    CHECK(ir_blob_get(bg, bb)->data == (void *)w && ir_blob_get(bg, cp)->data != (void *)w);
    CHECK(ir_blob_get(bg, bb)->h == ir_blob_get(bg, cp)->h);
    ir_graph *bc = ir_graph_clone(bg);
    CHECK(bc && bc->blobs[0].data == (void *)w);
    void *token = ir_blob_ref(ir_blob_get(bc, bb));
    CHECK(token != NULL);
    ir_graph_free(bg);
    ir_graph_free(bc);
    CHECK_EQ_INT(releases, 0); /* the token still holds it */
    ir_blob_unref(token);
    CHECK_EQ_INT(releases, 1);
    ir_blob_unref(NULL);
    CHECK(ir_blob_ref(NULL) == NULL);
    /* bad arguments: an error, and the caller still owns the payload */
    ir_graph *eg = ir_graph_new(NULL);
    CHECK_EQ_INT(ir_add_blob_borrowed(eg, NULL, 4, count_release, NULL), 0);
    CHECK_EQ_INT(ir_add_blob_borrowed(eg, w, 4, NULL, NULL), 0);
    CHECK_EQ_INT(ir_add_blob_borrowed(NULL, w, 4, count_release, NULL), 0);
    ir_graph_free(eg);
    CHECK_EQ_INT(releases, 1);

    /* a 100k-node chain: every node distinct, built quickly */
    ir_graph *big = ir_graph_new(NULL);
    CHECK_STR(big->name, "main");
    uint32_t cur = param(big, 0, TJ_F32, 1, d3), other = param(big, 1, TJ_F32, 1, d3);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 100000; i++)
        cur = op2(big, (i & 1) ? IR_OP_MUL : IR_OP_ADD, cur, other);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / 100000;
    printf("build: %.3f us/node\n", us);
    CHECK_EQ_INT(big->n_nodes, 100002);
    CHECK_EQ_INT(cur, 100001);
    /* re-adding the whole chain interns every node */
    cur = 0;
    for (int i = 0; i < 100000; i++)
        cur = op2(big, (i & 1) ? IR_OP_MUL : IR_OP_ADD, cur, other);
    CHECK_EQ_INT(cur, 100001);
    CHECK_EQ_INT(big->n_nodes, 100002);
    ir_graph_free(big);
    return check_done();
}
