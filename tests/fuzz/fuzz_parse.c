/* fuzz_parse.c — libFuzzer target for the text IR parser (ir_parse), the way untrusted graph text
 * enters tracejit. For any input: no crash, no leak, no sanitizer report; and for any input that
 * parses, the graph verifies, prints, and the printed text parses again to a graph with the same
 * structural hash (the round trip the golden tests rely on). A broken invariant aborts: that is
 * how a fuzzer reports a finding. Built by tests/fuzz/run.sh (clang, -fsanitize=fuzzer) and,
 * with replay.c, as a CTest that replays the checked-in corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20))
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    ir_graph *g = ir_parse(text);
    free(text);
    if (!g)
        return 0; /* rejected, with a message: fine */
    if (ir_verify(g) != TJ_OK) {
        fprintf(stderr, "fuzz_parse: a parsed graph does not verify: %s\n", ir_last_error());
        abort();
    }
    char *printed = ir_print(g);
    ir_graph *again = printed ? ir_parse(printed) : NULL;
    if (!again) {
        fprintf(stderr, "fuzz_parse: printed graph does not parse: %s\n%s\n", ir_last_error(),
                printed ? printed : "(print failed)");
        abort();
    }
    ir_hash128 a = ir_graph_hash(g), b = ir_graph_hash(again);
    if (a.lo != b.lo || a.hi != b.hi) {
        fprintf(stderr, "fuzz_parse: the round trip changed the graph:\n%s\n", printed);
        abort();
    }
    free(printed);
    ir_graph_free(again);
    ir_graph_free(g);
    return 0;
}
