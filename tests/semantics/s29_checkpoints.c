/* S29: checkpoints. Variables of several dtypes and ranks are saved by name and restored into
 * other variables of the same names; a subset restores with expect_partial; a missing name, an
 * unused saved name (assert_consumed), a dtype or shape that differs are errors that change
 * nothing; a corrupt, truncated or foreign file is an error naming the file; bad arguments are
 * errors. The seed's CNN trained 2 steps, checkpointed (model, Adam's slots and step counter),
 * then restored into a fresh model continues with the same losses as an uninterrupted run. */
#include <unistd.h>

#include "../../examples/cnn.h"
#include "check.h"
#include "native_first.h"

static char path[64];

static tj_variable *var_f32(const char *name, float a, float b, float c) {
    float v[3] = {a, b, c};
    int64_t d = 3;
    tj_tensor *t = tj_tensor_from_data(TJ_F32, 1, &d, v);
    tj_variable *x = tj_variable_new(t, name);
    tj_release(t);
    return x;
}

static double first(tj_variable *v) {
    tj_tensor *t = tj_variable_read(v);
    double r = tj_tensor_get_f64(t, 0);
    tj_release(t);
    return r;
}

static tj_variable *traced_var;
static tj_status in_trace[2];
static tj_tensor *saves_while_traced(tj_tensor *x) { /* checkpoints are not graph ops */
    in_trace[0] = tj_checkpoint_save(path, 1, &traced_var);
    in_trace[1] = tj_checkpoint_restore(path, 1, &traced_var, 0);
    return tj_add(x, x);
}

static void flip_byte(long off_from_end) {
    FILE *f = fopen(path, "r+b");
    fseek(f, off_from_end, SEEK_END);
    int c = fgetc(f);
    fseek(f, off_from_end, SEEK_END);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static void units(void) {
    tj_variable *a = var_f32("a", 1, 2, 3);
    tj_tensor *i64 = tj_scalar_i64(42), *bl = tj_scalar_bool(1);
    int64_t d2[2] = {2, 2};
    tj_tensor *m = tj_random_uniform(TJ_F64, 2, d2, -1, 1, 9);
    tj_variable *b = tj_variable_new(i64, "opt/iter"), *c = tj_variable_new(bl, "flag"),
                *e = tj_variable_new(m, "w");
    tj_variable *all[4] = {a, b, c, e};
    CHECK_EQ_INT(tj_checkpoint_save(path, 4, all), TJ_OK);

    /* fresh variables with the same names get the saved values */
    tj_variable *a2 = var_f32("a", 0, 0, 0);
    tj_tensor *z64 = tj_scalar_i64(0), *zb = tj_scalar_bool(0), *zm = tj_zeros(TJ_F64, 2, d2);
    tj_variable *b2 = tj_variable_new(z64, "opt/iter"), *c2 = tj_variable_new(zb, "flag"),
                *e2 = tj_variable_new(zm, "w");
    tj_variable *all2[4] = {e2, c2, b2, a2}; /* any order */
    CHECK_EQ_INT(tj_checkpoint_restore(path, 4, all2, 0), TJ_OK);
    CHECK_EQ_INT(first(a2), 1);
    CHECK_EQ_INT(first(b2), 42);
    CHECK_EQ_INT(first(c2), 1);
    tj_tensor *w = tj_variable_read(e2);
    CHECK_NEAR(tj_tensor_get_f64(w, 3), tj_tensor_get_f64(m, 3), 0);
    tj_release(w);

    /* a subset: an error unless expect_partial */
    tj_variable *a3 = var_f32("a", 0, 0, 0);
    CHECK_EQ_INT(tj_checkpoint_restore(path, 1, &a3, 0), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "holds 'opt/iter', which none of the 1 variables given is");
    CHECK_EQ_INT(first(a3), 0); /* nothing assigned */
    CHECK_EQ_INT(tj_checkpoint_restore(path, 1, &a3, 1), TJ_OK);
    CHECK_EQ_INT(first(a3), 1);
    /* a variable the file lacks */
    tj_variable *extra = var_f32("not_saved", 5, 5, 5);
    tj_variable *two[2] = {a3, extra};
    CHECK_EQ_INT(tj_checkpoint_restore(path, 2, two, 0), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "has no variable 'not_saved'");
    CHECK_EQ_INT(tj_checkpoint_restore(path, 2, two, 1), TJ_OK); /* expect_partial: left as is */
    CHECK_EQ_INT(first(extra), 5);
    /* a shape that differs: an error, nothing assigned */
    float v4[4] = {9, 9, 9, 9};
    int64_t d4 = 4;
    tj_tensor *t4 = tj_tensor_from_data(TJ_F32, 1, &d4, v4);
    tj_variable *a4 = tj_variable_new(t4, "a");
    tj_variable *pair[2] = {b2, a4};
    CHECK_EQ_INT(tj_checkpoint_restore(path, 2, pair, 1), TJ_ERR_SHAPE);
    CHECK_HAS(tj_last_error(), "variable 'a' is float32[4] but");
    CHECK_HAS(tj_last_error(), "holds float32[3]");
    CHECK_EQ_INT(first(a4), 9);

    /* bad arguments */
    tj_variable *dup[2] = {a, a3};
    CHECK_EQ_INT(tj_checkpoint_save(path, 2, dup), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "two variables are named 'a'");
    CHECK_EQ_INT(tj_checkpoint_save(NULL, 1, &a), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_checkpoint_save(path, -1, &a), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_checkpoint_save("/nonexistent-dir/ck", 1, &a), TJ_ERR_IO);
    CHECK_HAS(tj_last_error(), "cannot write /nonexistent-dir/ck");
    CHECK_EQ_INT(tj_checkpoint_restore("/nonexistent-dir/ck", 1, &a, 0), TJ_ERR_IO);
    CHECK_HAS(tj_last_error(), "cannot open /nonexistent-dir/ck");
    traced_var = a;
    tj_function *tf = tj_function_new("saves", (void *)saves_while_traced, 1, NULL);
    tj_tensor *one = tj_scalar_f32(1);
    tj_release(tj_call(tf, 1, &one));
    CHECK_EQ_INT(in_trace[0], TJ_ERR_STATE);
    CHECK_EQ_INT(in_trace[1], TJ_ERR_STATE);
    tj_function_free(tf);
    tj_release(one);

    /* corrupt files: the checksum, the end, the magic */
    CHECK_EQ_INT(tj_checkpoint_save(path, 4, all), TJ_OK);
    flip_byte(-20);
    CHECK_EQ_INT(tj_checkpoint_restore(path, 4, all2, 0), TJ_ERR_CORRUPT);
    CHECK_HAS(tj_last_error(), "is corrupt (checksum mismatch: the checksum at offset");
    /* every truncation is refused naming the offset where the file ends too early */
    CHECK_EQ_INT(tj_checkpoint_save(path, 4, all), TJ_OK);
    size_t full = 0;
    free(check_slurp_n(path, &full));
    int no_offset = 0, not_corrupt = 0;
    for (size_t len = full - 1; len + 1 > 0; len -= len > 64 ? 7 : 1) {
        CHECK_EQ_INT(tj_checkpoint_save(path, 4, all), TJ_OK);
        CHECK_EQ_INT(truncate(path, (off_t)len), 0);
        not_corrupt += tj_checkpoint_restore(path, 4, all2, 0) != TJ_ERR_CORRUPT;
        no_offset += !strstr(tj_last_error(), path) || !strstr(tj_last_error(), "offset ");
        if (len == 30)
            CHECK_HAS(tj_last_error(), "is truncated");
    }
    CHECK_EQ_INT(not_corrupt, 0);
    CHECK_EQ_INT(no_offset, 0);
    FILE *f = fopen(path, "wb");
    fputs("this is not a checkpoint at all, just text", f);
    fclose(f);
    CHECK_EQ_INT(tj_checkpoint_restore(path, 4, all2, 0), TJ_ERR_CORRUPT);
    CHECK_HAS(tj_last_error(), "is not a tracejit checkpoint (bad magic at offset 0)");
    CHECK_EQ_INT(first(b2), 42); /* unchanged by the failures */

    tj_variable *vs[] = {a, b, c, e, a2, b2, c2, e2, a3, extra, a4};
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++)
        tj_variable_free(vs[k]);
    tj_tensor *ts[] = {i64, bl, m, z64, zb, zm, t4};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
        tj_release(ts[k]);
}

/* `n` steps from `from` (batches by step number, as train_cnn); losses into out[from..]. */
static void steps(cnn_data *d, int from, int n, double *out) {
    tj_function *f = tj_function_new("train_one_step", (void *)cnn_train_step, 2, NULL);
    for (int s = from; s < from + n; s++) {
        tj_scope_begin();
        tj_tensor *x, *y;
        cnn_batch(d, 1000, 10, 500 + (uint64_t)s, &x, &y);
        tj_tensor *args[2] = {x, y};
        if (s == from) /* the native tier from the first step */
            check_native_first(f, 2, args);
        tj_tensor *l = tj_call(f, 2, args);
        CHECK_MSG(tj_status_of(l) == TJ_OK, "step %d: %s", s, tj_error_message(l));
        out[s] = tj_tensor_get_f64(l, 0);
        tj_scope_end(); /* l too: the scope owns it */
    }
    tj_function_free(f);
}

static void cnn_resume(void) {
    cnn_data d;
    if (cnn_load(&d, "/usr/share/datasets/fashion-mnist")) {
        cnn_data_free(&d);
        return; /* no dataset: the unit checks ran */
    }
    double whole[4] = {0}, split[4] = {0};
    CHECK_EQ_INT(cnn_init(&cnn_model, 3, 1e-3), 0);
    steps(&d, 0, 4, whole);
    cnn_free(&cnn_model);
    CHECK_EQ_INT(cnn_init(&cnn_model, 3, 1e-3), 0);
    steps(&d, 0, 2, split);
    CHECK_EQ_INT(cnn_save(&cnn_model, path), TJ_OK);
    cnn_free(&cnn_model);
    CHECK_EQ_INT(cnn_init(&cnn_model, 99, 1e-3), 0); /* other weights, then the checkpoint's */
    int64_t at = -1;
    CHECK_EQ_INT(cnn_restore(&cnn_model, path, &at), TJ_OK);
    CHECK_EQ_INT(at, 2);
    steps(&d, 2, 2, split);
    cnn_free(&cnn_model);
    for (int s = 0; s < 4; s++)
        CHECK_MSG(whole[s] == split[s], "step %d: loss %.9g uninterrupted, %.9g resumed", s,
                  whole[s], split[s]);
    cnn_data_free(&d);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/tj-ckpt-%ld", (long)getpid());
    units();
    cnn_resume();
    unlink(path);
    return check_done();
}
