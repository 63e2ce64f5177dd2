/* main.c — the install test's consumer: uses only the installed <tracejit.h> and library.
 * Adds two int32 scalars eagerly and checks 1 + 2 == 3; exits non-zero otherwise.
 * Built twice by tests/install/run.sh: through find_package and through pkg-config. */
#include <stdio.h>
#include <tracejit.h>

int main(void) {
    tj_tensor *a = tj_scalar_i32(1);
    tj_tensor *b = tj_scalar_i32(2);
    tj_tensor *c = tj_add(a, b);
    int ok = 0;
    if (tj_status_of(c) != TJ_OK) {
        fprintf(stderr, "consumer: tj_add failed: %s\n", tj_error_message(c));
    } else if (tj_tensor_dtype(c) != TJ_I32 || tj_tensor_rank(c) != 0 || !tj_tensor_data(c)) {
        fprintf(stderr, "consumer: 1 + 2 gave dtype %s rank %d\n",
                tj_dtype_name(tj_tensor_dtype(c)), tj_tensor_rank(c));
    } else {
        int32_t v = *(const int32_t *)tj_tensor_data(c);
        ok = v == 3;
        printf("consumer: 1 + 2 = %d%s\n", (int)v, ok ? "" : " (expected 3)");
    }
    tj_release(c);
    tj_release(b);
    tj_release(a);
    return ok ? 0 : 1;
}
