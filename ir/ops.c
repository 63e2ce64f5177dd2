/* ops.c — the op table, generated from ops.def with an X-macro, and lookup by name.
 * Adding an op touches ops.def; this file needs no change. */
#include <string.h>

#include "ir/ir.h"

const ir_op_info ir_ops[IR_N_OPS] = {
#define X(e, name, nin, flags) [IR_OP_##e] = {name, nin, flags},
#include "ir/ops.def"
#undef X
};

int ir_op_from_name(const char *s, size_t len) {
    if (!s)
        return -1;
    for (int i = 0; i < IR_N_OPS; i++) {
        const char *n = ir_ops[i].name;
        if (strlen(n) == len && memcmp(n, s, len) == 0)
            return i;
    }
    return -1;
}
