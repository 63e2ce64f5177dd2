/* native_first.h — native code from the first call, for tests: functions are tiered by default,
 * and a new signature's first calls run on the interpreter (whose sums differ from the native
 * code's in the last bits) for as long as the background compile takes.
 * - check_native_first(f, args): for tests whose runs must repeat bit for bit; traces f for
 *   args' signature without running it and waits for its native code, so every call of the run,
 *   the first included, runs the same code (README: "Tiers").
 * - check_untiered(): for tests of the native program itself (kernels, images, profiles): turns
 *   tiering off for the process; call it first, before anything reads the configuration
 *   (tests/jit/test_tiered.c checks the tiers). */
#ifndef TJ_TEST_NATIVE_FIRST_H
#define TJ_TEST_NATIVE_FIRST_H
#include <string.h>
#include <tracejit.h>

#include "check.h"

static inline void check_untiered(void) {
    setenv("TJ_TIERED", "0", 1);
}

static inline void check_native_first(tj_function *f, int n, tj_tensor *const *args) {
    if (tj_get_eager())
        return; /* no traces in eager mode */
    tj_spec sp[8];
    for (int k = 0; k < n && k < 8; k++) {
        sp[k] = (tj_spec){.dtype = tj_tensor_dtype(args[k]), .rank = tj_tensor_rank(args[k])};
        memcpy(sp[k].dims, tj_tensor_dims(args[k]), sizeof(int64_t) * (size_t)sp[k].rank);
    }
    CHECK(n <= 8 && tj_function_get_concrete(f, n, sp) != NULL);
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
}

#endif
