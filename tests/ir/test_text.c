/* test_text.c — the text form: a graph using every op in ops.def round-trips exactly
 * (print(parse(print(g))) == print(g), equal hashes, verifier clean), exact float/NaN/string
 * payloads survive, and malformed input (handwritten cases, every truncation, random byte edits)
 * fails with a line:col error and never crashes. */
#include "check.h"
#include "ir/ir.h"

static const char *all_ops =
    "# every op at least once\n"
    "graph @all_ops {\n"
    "  graph @body {\n"
    "    %0 = param {index=0} : f32[]\n"
    "    %1 = exp %0 : f32[]\n"
    "    return %1\n"
    "  }\n"
    "  graph @then {\n"
    "    %0 = param {index=0} : f32[]\n"
    "    %1 = neg %0 : f32[]\n"
    "    return %1\n"
    "  }\n"
    "  graph @loop_cond {\n"
    "    %0 = param {index=0} : f32[]\n"
    "    %1 = const [1] : f32[]\n"
    "    %2 = less %0, %1 : bool[]\n"
    "    return %2\n"
    "  }\n"
    "  graph @for_body {\n"
    "    %0 = param {index=0} : i64[]\n"
    "    %1 = param {index=1} : f32[]\n"
    "    %2 = cast %0 : f32[]\n"
    "    %3 = add %1, %2 : f32[]\n"
    "    %4 = print %3 : void\n"
    "    return %3\n"
    "    effects %4\n"
    "  }\n"
    "  graph @scan_body {\n"
    "    %0 = param {index=0} : f32[]\n"
    "    %1 = param {index=1} : f32[3]\n"
    "    %2 = sum %1 {axes=[0], keepdims=0} : f32[]\n"
    "    %3 = add %0, %2 : f32[]\n"
    "    return %3, %1\n"
    "  }\n"
    "  %0 = param {index=0} : f32[2,3]\n"
    "  %1 = param {index=1} : f32[3]\n"
    "  %2 = const [1, 2.5, -3] : f32[3]\n"
    "  %3 = var_read {slot=0} : f32[?,3]\n"
    "  %4 = eye : f64[2,3]\n"
    "  %5 = range {start=0, limit=5, delta=2} : i32[3]\n"
    "  %6 = random_uniform {seed=7, lo=0, hi=1} : f32[2,3]\n"
    "  %7 = random_normal {seed=8, mean=0, std=2} : f64[4]\n"
    "  %8 = neg %0 : f32[2,3]\n"
    "  %9 = abs %8 : f32[2,3]\n"
    "  %10 = sign %9 : f32[2,3]\n"
    "  %11 = exp %0 : f32[2,3]\n"
    "  %12 = log %0 : f32[2,3]\n"
    "  %13 = sqrt %0 : f32[2,3]\n"
    "  %14 = rsqrt %0 : f32[2,3]\n"
    "  %15 = tanh %0 : f32[2,3]\n"
    "  %16 = sigmoid %0 : f32[2,3]\n"
    "  %17 = relu %0 : f32[2,3]\n"
    "  %18 = sin %0 : f32[2,3]\n"
    "  %19 = cos %0 : f32[2,3]\n"
    "  %20 = floor %0 : f32[2,3]\n"
    "  %21 = ceil %0 : f32[2,3]\n"
    "  %22 = round %0 : f32[2,3]\n"
    "  %23 = isnan %0 : bool[2,3]\n"
    "  %24 = isinf %0 : bool[2,3]\n"
    "  %25 = logical_not %23 : bool[2,3]\n"
    "  %26 = cast %0 : i32[2,3]\n"
    "  %27 = add %0, %1 : f32[2,3]\n"
    "  %28 = sub %0, %2 : f32[2,3]\n"
    "  %29 = mul %0, %1 : f32[2,3]\n"
    "  %30 = div %0, %1 : f32[2,3]\n"
    "  %31 = floordiv %0, %1 : f32[2,3]\n"
    "  %32 = mod %0, %1 : f32[2,3]\n"
    "  %33 = pow %0, %1 : f32[2,3]\n"
    "  %34 = maximum %0, %1 : f32[2,3]\n"
    "  %35 = minimum %0, %1 : f32[2,3]\n"
    "  %36 = equal %0, %1 : bool[2,3]\n"
    "  %37 = not_equal %0, %1 : bool[2,3]\n"
    "  %38 = less %0, %1 : bool[2,3]\n"
    "  %39 = less_equal %0, %1 : bool[2,3]\n"
    "  %40 = greater %0, %1 : bool[2,3]\n"
    "  %41 = greater_equal %0, %1 : bool[2,3]\n"
    "  %42 = logical_and %23, %24 : bool[2,3]\n"
    "  %43 = logical_or %23, %24 : bool[2,3]\n"
    "  %44 = where %42, %0, %1 : f32[2,3]\n"
    "  %45 = param {index=2} : f32[3,4]\n"
    "  %46 = matmul %0, %45 : f32[2,4]\n"
    "  %47 = sum %0 {axes=[1], keepdims=0} : f32[2]\n"
    "  %48 = mean %0 {axes=[0, 1], keepdims=1} : f32[1,1]\n"
    "  %49 = max %0 {axes=[0], keepdims=0} : f32[3]\n"
    "  %50 = min %0 {axes=[0, 1], keepdims=0} : f32[]\n"
    "  %51 = prod %0 {axes=[1], keepdims=1} : f32[2,1]\n"
    "  %52 = argmax %0 {axis=1} : i64[2]\n"
    "  %53 = argmin %0 {axis=0} : i64[3]\n"
    "  %54 = softmax %0 {axis=1} : f32[2,3]\n"
    "  %55 = log_softmax %0 {axis=0} : f32[2,3]\n"
    "  %56 = reshape %0 : f32[3,2]\n"
    "  %57 = reshape %3 : f32[?]\n"
    "  %58 = transpose %0 {perm=[1, 0]} : f32[3,2]\n"
    "  %59 = broadcast_to %1 : f32[4,3]\n"
    "  %60 = expand_dims %1 {axis=0} : f32[1,3]\n"
    "  %61 = squeeze %60 {axes=[0]} : f32[3]\n"
    "  %62 = concat %0, %0, %3 {axis=0} : f32[?,3]\n"
    "  %63 = slice %0 {begin=[0, -1], end=[2, -4], step=[1, -1]} : f32[2,3]\n"
    "  %64 = slice %0 {begin=[1, 9223372036854775807], end=[9223372036854775807, "
    "-9223372036854775808], step=[1, -2]} : f32[1,2]\n"
    "  %65 = const [0, 2] : i64[2]\n"
    "  %66 = gather %0, %65 {axis=1} : f32[2,2]\n"
    "  %67 = print %47, %52 {prefix=\"x\\n\\\"q\\\"\\\\\"} : void\n"
    "  %68 = host_callback %0 {callback=0x1234, user=0x0} : void\n"
    "  %69 = assign %27 {slot=1} : f32[2,3]\n"
    "  %70 = const [\"a\", \"b\\x01\\xff\", \"\"] : str[3]\n"
    "  %71 = add %70, %70 : str[3]\n"
    "  %72 = const [1, 0] : bool[2]\n"
    "  %73 = const [9223372036854775807, -9223372036854775808, 0] : i64[3]\n"
    "  %74 = const [nan, inf, -inf, -0, 0.10000000000000001, nan:0x7ff8000000000001] : f64[6]\n"
    "  %75 = const [nan:0x7fc00001, 3.40282347e+38, 1.40129846e-45] : f32[3]\n"
    "  %76 = print : void\n"
    "  %77 = const [-2147483648] : i32[]\n"
    "  %78 = const [1] : bool[]\n"
    "  %79 = cond %78, %50 {sub0=2, sub1=1} : tuple[]\n"
    "  %80 = get %79 {index=0} : f32[]\n"
    "  %81 = while %80 {sub0=3, sub1=2, max_iterations=10} : tuple[]\n"
    "  %82 = const [0] : i64[]\n"
    "  %83 = const [5] : i64[]\n"
    "  %84 = const [1] : i64[]\n"
    "  %85 = for %82, %83, %84, %50 {sub0=4} : tuple[]\n"
    "  %86 = scan %50, %0 {sub0=5, n_carried=1} : tuple[]\n"
    "  %87 = get %86 {index=1} : f32[2,3]\n"
    "  %88 = get %81 {index=0} : f32[]\n"
    "  %89 = update_index %0, %82, %1 : f32[2,3]\n"
    "  %90 = const [1, 0] : bool[2]\n"
    "  %91 = read_index %89, %90, %82 : f32[3]\n"
    "  %92 = slice_grad %63 {begin=[0, -1], end=[2, -4], step=[1, -1]} : f32[2,3]\n"
    "  %93 = scatter_add %0, %65, %66 {axis=1} : f32[2,3]\n"
    "  %94 = reshape %0 : f32[1,2,3,1]\n"
    "  %95 = const [1, 2] : f32[1,1,1,2]\n"
    "  %96 = conv2d %94, %95 {stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, pads=[0, 0, 0, "
    "0]} : f32[1,2,3,2]\n"
    "  %97 = conv2d_grad_input %96, %95 {stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, "
    "pads=[0, 0, 0, 0]} : f32[1,2,3,1]\n"
    "  %98 = conv2d_grad_filter %94, %96 {stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, "
    "pads=[0, 0, 0, 0]} : f32[1,1,1,2]\n"
    "  %99 = max_pool2d %94 {stride_h=1, stride_w=1, window_h=2, window_w=2, pads=[0, 0, 0, 0]} : "
    "f32[1,1,2,1]\n"
    "  %100 = max_pool2d_grad %94, %99 {stride_h=1, stride_w=1, window_h=2, window_w=2, pads=[0, "
    "0, 0, 0]} : f32[1,2,3,1]\n"
    "  %101 = avg_pool2d %94 {stride_h=1, stride_w=1, window_h=2, window_w=2, pads=[0, 0, 0, 0]} : "
    "f32[1,1,2,1]\n"
    "  %102 = avg_pool2d_grad %101 {stride_h=1, stride_w=1, window_h=2, window_w=2, pads=[0, 0, 0, "
    "0]} : f32[1,2,3,1]\n"
    "  %103 = one_hot %65 {depth=3, on=1, off=0} : f32[2,3]\n"
    "  %104 = sparse_softmax_xent %0, %65 : f32[2]\n"
    "  %105 = atan %0 : f32[2,3]\n"
    "  %106 = asin %0 : f32[2,3]\n"
    "  %107 = acos %0 : f32[2,3]\n"
    "  %108 = erf %0 : f32[2,3]\n"
    "  %109 = const [255, 0, 7] : u8[3]\n"
    "  %110 = left_shift %109, %109 : u8[3]\n"
    "  %111 = right_shift %109, %109 : u8[3]\n"
    "  %112 = const [-128, 127] : i8[2]\n"
    "  %113 = const [18446744073709551615, 0] : u64[2]\n"
    "  %114 = const [-32768, 32767] : i16[2]\n"
    "  %115 = const [65535, 4] : u16[2]\n"
    "  %116 = const [4294967295, 1] : u32[2]\n"
    "  return %27, %46, %71, %87, %88\n"
    "  effects %67, %68, %69, %76, %85\n"
    "}\n";

static void check_round_trip(const char *text) {
    ir_graph *g = ir_parse(text);
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    if (!g)
        return;
    CHECK_MSG(ir_verify(g) == TJ_OK, "%s", ir_last_error());
    char *t1 = ir_print(g);
    ir_graph *g2 = ir_parse(t1);
    CHECK_MSG(g2 != NULL, "%s", ir_last_error());
    char *t2 = g2 ? ir_print(g2) : NULL;
    CHECK_STR(t1, t2);
    if (g2) {
        ir_hash128 a = ir_graph_hash(g), b = ir_graph_hash(g2);
        CHECK(a.lo == b.lo && a.hi == b.hi);
        CHECK_EQ_INT(g2->n_nodes, g->n_nodes);
    }
    free(t1);
    free(t2);
    ir_graph_free(g);
    ir_graph_free(g2);
}

static void expect_fail(const char *text, const char *needle) {
    ir_graph *g = ir_parse(text);
    CHECK_MSG(g == NULL, "parsed: %s", text);
    ir_graph_free(g);
    CHECK_HAS(ir_last_error(), needle);
}

int main(void) {
    ir_graph *g = ir_parse(all_ops);
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    if (!g)
        return check_done();
    CHECK_EQ_INT(ir_verify(g), TJ_OK);
    int count[IR_N_OPS] = {0};
    for (uint32_t i = 0; i < g->n_nodes; i++)
        count[g->nodes[i].op]++;
    for (int op = 0; op < IR_N_OPS; op++)
        CHECK_MSG(count[op] > 0, "op %s missing from the test graph", ir_ops[op].name);
    CHECK_EQ_INT(g->n_nodes, 116); /* %90 is %72 (interned) */
    CHECK_EQ_INT(g->n_params, 3);
    CHECK_EQ_INT(g->n_caps, 2);
    CHECK_EQ_INT(g->n_outputs, 5);
    CHECK_EQ_INT(g->n_effects, 5); /* the for loop prints: the node is an effect */
    CHECK_EQ_INT(g->n_subs, 5);
    CHECK_EQ_INT(g->nodes[79].dtype, IR_TUPLE);
    CHECK_EQ_INT(g->nodes[87].rank, 2); /* scan's stacked result: [T=2, 3] */
    CHECK_EQ_INT(g->nodes[87].dims[0], 2);
    CHECK_STR(g->name, "all_ops");
    CHECK_STR(g->subs[0]->name, "body");
    /* payloads came through exactly */
    const ir_blob *b = ir_blob_get(g, g->nodes[74].a.blob);
    double d[6];
    memcpy(d, b->data, sizeof d);
    uint64_t bits;
    memcpy(&bits, &d[5], 8);
    CHECK(isnan(d[0]) && isinf(d[1]) && d[2] < 0 && signbit(d[3]) && d[4] == 0.1);
    CHECK_EQ_INT(bits, 0x7ff8000000000001ull);
    b = ir_blob_get(g, g->nodes[67].a.blob);
    CHECK(b && b->size == 7 && memcmp(b->data, "x\n\"q\"\\", 7) == 0);
    b = ir_blob_get(g, g->nodes[70].a.blob);
    CHECK(b && b->size == 3 * 8 + 1 + 3);
    b = ir_blob_get(g, g->nodes[68].a.blob);
    void *pp[2];
    memcpy(pp, b->data, sizeof pp);
    CHECK(pp[0] == (void *)0x1234 && pp[1] == NULL);
    CHECK_EQ_INT(g->nodes[57].dims[0], -1);
    CHECK_EQ_INT(g->nodes[62].dims[0], -1);

    char *t1 = ir_print(g);
    CHECK_HAS(t1, "graph @all_ops {\n  graph @body {\n");
    CHECK_HAS(t1, "  %47 = sum %0 {axes=[1], keepdims=0} : f32[2]\n");
    CHECK_HAS(t1, "  %27 = add %0, %1 : f32[2,3]\n");
    CHECK_HAS(t1, "  %3 = var_read {slot=0} : f32[?,3]\n");
    CHECK_HAS(t1, "{prefix=\"x\\n\\\"q\\\"\\\\\"} : void");
    CHECK_HAS(t1, "[\"a\", \"b\\x01\\xff\", \"\"] : str[3]");
    CHECK_HAS(t1, "[nan, inf, -inf, -0, 0.10000000000000001, nan:0x7ff8000000000001] : f64[6]");
    CHECK_HAS(t1, "[nan:0x7fc00001, 3.40282347e+38, 1.40129846e-45] : f32[3]");
    CHECK_HAS(t1, "  return %27, %46, %71, %87, %88\n  effects %67, %68, %69, %76, %85\n}\n");
    CHECK_HAS(t1, "  %81 = while %80 {sub0=3, sub1=2, max_iterations=10} : tuple[]\n");
    CHECK_HAS(t1, "  %86 = scan %50, %0 {sub0=5, n_carried=1} : tuple[]\n");
    free(t1);
    check_round_trip(all_ops);

    /* a name that is not an identifier is quoted; an empty graph round-trips */
    ir_graph *e = ir_graph_new("my graph\"1");
    char *te = ir_print(e);
    CHECK_STR(te, "graph @\"my graph\\\"1\" {\n}\n");
    check_round_trip(te);
    free(te);
    ir_graph_free(e);

    /* interning while parsing: duplicate text nodes map onto one id */
    ir_graph *dup = ir_parse("graph @d {\n %0 = param {index=0} : f32[]\n %5 = neg %0 : f32[]\n"
                             " %6 = neg %0 : f32[]\n %7 = add %5, %6 : f32[]\n return %7\n}");
    CHECK(dup && dup->n_nodes == 3);
    ir_graph_free(dup);

    /* errors */
    expect_fail("", "parse error at 1:1");
    expect_fail("graph", "expected '@'");
    expect_fail("graph @g {\n  %0 = nope : f32[]\n}", "2:8: unknown op 'nope'");
    expect_fail("graph @g {\n  %0 = neg %1 : f32[]\n}", "undefined value %1");
    expect_fail("graph @g {\n  %0 = param {index=0} : f32[2]\n  %0 = neg %0 : f32[2]\n}",
                "defined twice");
    expect_fail("graph @g {\n  %0 = param {index=0} : f32[2]\n  %1 = neg %0 : f32[3]\n}",
                "declared type f32[3] differs from the inferred f32[2]");
    expect_fail("graph @g {\n %0 = param {index=0} : f32[3,2]\n %1 = matmul %0, %0 : f32[]\n}",
                "matmul: inner dimensions differ: [3,2] x [3,2]");
    expect_fail("graph @g {\n %0 = const [1, 2] : f32[3]\n}", "2 values for type f32");
    expect_fail("graph @g {\n %0 = const [\"a\"] : f32[1]\n}", "does not fit");
    expect_fail("graph @g {\n %0 = const [300] : bool[1]\n}", "out of range");
    expect_fail("graph @g {\n %0 = const [256] : u8[1]\n}", "const: 256 out of range for uint8");
    expect_fail("graph @g {\n %0 = const [-129] : i8[1]\n}", "const: -129 out of range for int8");
    expect_fail("graph @g {\n %0 = const [-1] : u64[1]\n}", "const: -1 out of range for uint64");
    expect_fail("graph @g {\n %0 = const [65536] : u16[1]\n}", "out of range for uint16");
    expect_fail("graph @g {\n %0 = const [1e999x] : f32[1]\n}", "invalid number");
    expect_fail("graph @g {\n %0 = const [99999999999999999999] : i64[1]\n}", "invalid integer");
    expect_fail("graph @g {\n %0 = param {bogus=1} : f32[]\n}", "param has no attribute 'bogus'");
    /* the op's own schema (ops.def): another op's attribute is refused, not dropped */
    expect_fail("graph @g {\n %0 = param {index=0} : f32[3]\n %1 = neg %0 {axis=0} : f32[3]\n}",
                "neg has no attribute 'axis'");
    expect_fail("graph @g {\n %0 = param {index=0} : f32[2]\n %1 = sum %0 {perm=[0]} : f32[]\n}",
                "sum has no attribute 'perm'");
    expect_fail("graph @g {\n %0 = param {index=0} : f32[2]\n %1 = max_pool2d %0 "
                "{dilation_h=1} : f32[2]\n}",
                "max_pool2d has no attribute 'dilation_h'");
    expect_fail("graph @g {\n %0 = param {index=0} : q32[]\n}", "unknown dtype 'q32'");
    expect_fail("graph @g {\n %0 = param {index=0} : f32[1,1,1,1,1,1,1,1,1]\n}", "rank exceeds");
    expect_fail("graph @g {\n %0 = print {prefix=\"abc} : void\n}", "unterminated string");
    expect_fail("graph @g {\n %0 = print {prefix=\"\\q\"} : void\n}", "unknown escape");
    expect_fail("graph @g {\n}\ntrailing", "unexpected text after the graph");
    expect_fail("graph @g {\n return\n}", "expected '%'");
    expect_fail("graph @g {\n %0 = param {index=0} : f32[2]\n"
                " %1 = slice %0 {begin=[0], end=[1]} : f32[1]\n}",
                "equal lengths");
    expect_fail("graph @g {\n %0 = param {index=1} : f32[]\n}", "param index 0 is missing");
    char deep[2000] = "";
    for (int i = 0; i < 40; i++)
        strcat(deep, "graph @a {\n");
    expect_fail(deep, "nested too deeply");

    /* every truncation and random byte edits: must fail cleanly or parse, never crash */
    size_t n = strlen(all_ops);
    char *buf = malloc(n + 1);
    int parsed = 0;
    for (size_t cut = 0; cut + 1 < n; cut++) { /* all but the final newline */
        memcpy(buf, all_ops, cut);
        buf[cut] = '\0';
        ir_graph *t = ir_parse(buf);
        parsed += t != NULL;
        if (!t)
            CHECK_MSG(strstr(ir_last_error(), "parse error at") != NULL, "%s", ir_last_error());
        ir_graph_free(t);
    }
    CHECK_EQ_INT(parsed, 0);
    uint64_t rng = 12345;
    const char junk[] = "%{}[]=:,\"\\@#?-09axn \n";
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, all_ops, n + 1);
        for (int k = 0; k < 1 + it % 4; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(rng >> 33) % n;
            buf[at] = (rng >> 20) & 1 ? junk[(rng >> 8) % (sizeof junk - 1)]
                                      : (char)(1 + (rng >> 12) % 255);
        }
        ir_graph *t = ir_parse(buf);
        if (t) {
            CHECK_MSG(ir_verify(t) == TJ_OK, "%s", ir_last_error());
            char *pt = ir_print(t);
            CHECK(pt != NULL);
            free(pt);
        }
        ir_graph_free(t);
    }
    free(buf);
    ir_graph_free(g);
    return check_done();
}
