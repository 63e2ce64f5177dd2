/* test_device.c — the runtime's device interface (runtime/device.h): the host device; a second
 * device whose memory the host must not read as its own (a test device over malloc that counts
 * what it is asked) to move tensors there and back, between two devices through the host, and
 * to release them through the device; and the refusals: a reference kernel given an input or an
 * output on another device, a program given an argument there, strings off the host, a device
 * out of memory. Every refusal names the op or executor, the input and the device. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernel_helpers.h"
#include "runtime/device.h"

typedef struct fake {
    rt_device dev;
    int allocs, frees, ins, outs, copies, syncs, fail;
} fake;

static void *f_alloc(rt_device *d, size_t size) {
    fake *f = (fake *)d;
    if (f->fail) {
        ir_errorf(TJ_ERR_OOM, "%s: out of memory for %zu bytes", d->name, size);
        return NULL;
    }
    f->allocs++;
    return malloc(size ? size : 1);
}
static void f_free(rt_device *d, void *p, size_t size) {
    (void)size;
    ((fake *)d)->frees++;
    free(p);
}
static tj_status f_in(rt_device *d, void *dst, const void *src, size_t n) {
    ((fake *)d)->ins++;
    memcpy(dst, src, n);
    return TJ_OK;
}
static tj_status f_out(rt_device *d, void *dst, const void *src, size_t n) {
    ((fake *)d)->outs++;
    memcpy(dst, src, n);
    return TJ_OK;
}
static tj_status f_copy(rt_device *d, void *dst, const void *src, size_t n) {
    ((fake *)d)->copies++;
    memmove(dst, src, n);
    return TJ_OK;
}
static tj_status f_sync(rt_device *d) {
    ((fake *)d)->syncs++;
    return TJ_OK;
}
static const rt_device_vt fake_vt = {f_alloc, f_free, f_in, f_out, f_copy, f_sync};

static void host_device(void) {
    rt_device *h = rt_device_host();
    CHECK(h && h->host && !strcmp(h->name, "cpu"));
    CHECK(rt_buffer_device(NULL) == h);
    const int64_t d3[1] = {3};
    tj_tensor *x = mk(TJ_F32, 1, d3, F32(1, 2, 3));
    CHECK(rt_on_host(x) && rt_buffer_device(x->buf) == h);
    tj_tensor *y = rt_tensor_to_device(x, h); /* already there: the same tensor */
    CHECK(y == x);
    tj_release(y);
    tj_tensor *z = rt_tensor_alloc_on(h, TJ_I64, 1, d3);
    CHECK(z && rt_on_host(z) && z->numel == 3);
    tj_release(z);
}

static void there_and_back(void) {
    fake a = {.dev = {&fake_vt, "fake:0", 0}}, b = {.dev = {&fake_vt, "fake:1", 0}};
    const int64_t d23[2] = {2, 3};
    tj_tensor *x = mk(TJ_F32, 2, d23, F32(1, -2, 3.5f, 4, 5, -6));
    tj_tensor *on_a = rt_tensor_to_device(x, &a.dev);
    CHECK_MSG(on_a != NULL, "%s", ir_last_error());
    if (!on_a)
        return;
    CHECK(!rt_on_host(on_a) && rt_buffer_device(on_a->buf) == &a.dev);
    CHECK(on_a->dtype == TJ_F32 && on_a->rank == 2 && on_a->dims[1] == 3 && on_a->numel == 6);
    CHECK(on_a->data != x->data && !memcmp(on_a->data, x->data, 6 * sizeof(float)));
    CHECK(a.allocs == 1 && a.ins == 1 && a.outs == 0);

    /* a reference kernel refuses it: its memory is not the host's */
    tj_tensor *in[2] = {x, on_a};
    tj_status st = TJ_OK;
    CHECK(run_n(proto(IR_OP_ADD), in, 2, &st) == NULL && st == TJ_ERR_INVALID);
    CHECK_MSG(strstr(ir_last_error(), "add: input 1 is on fake:0; it runs on cpu") != NULL, "%s",
              ir_last_error());
    /* and an output there */
    ir_node p = proto(IR_OP_NEG);
    const ir_node *dx[1];
    ir_node desc;
    rt_desc(x, &desc);
    dx[0] = &desc;
    p.n_in = 1;
    CHECK(ir_infer(&p, dx, 1) == TJ_OK);
    CHECK(rt_ref_kernel(&p, &x, on_a) == TJ_ERR_INVALID);
    CHECK_MSG(strstr(ir_last_error(), "neg: the output is on fake:0") != NULL, "%s",
              ir_last_error());

    /* a program refuses it as an argument */
    ir_graph *g = ir_parse("graph @f {\n"
                           "  %0 = param {index=0} : f32[2,3]\n"
                           "  %1 = neg %0 : f32[2,3]\n"
                           "  return %1\n"
                           "}\n");
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    rt_program *prog = g ? rt_interp_new(g) : NULL;
    tj_tensor *out[1] = {0};
    CHECK(prog && prog->vt->run(prog, &on_a, 1, NULL, out) == TJ_ERR_INVALID && !out[0]);
    CHECK_MSG(strstr(ir_last_error(), "interp: argument 0 is on fake:0; this program runs on cpu"),
              "%s", ir_last_error());
    CHECK(prog && prog->vt->run(prog, &x, 1, NULL, out) == TJ_OK && out[0] &&
          ((float *)out[0]->data)[1] == 2.0f);
    tj_release(out[0]);
    if (prog)
        prog->vt->free(prog);
    ir_graph_free(g);

    /* from one device to another, through the host */
    tj_tensor *on_b = rt_tensor_to_device(on_a, &b.dev);
    CHECK(on_b && rt_buffer_device(on_b->buf) == &b.dev && a.outs == 1 && a.syncs == 1 &&
          b.ins == 1 && b.allocs == 1);
    /* back to the host: the same values */
    tj_tensor *back = on_b ? rt_tensor_to_device(on_b, NULL) : NULL;
    CHECK(back && rt_on_host(back) && b.outs == 1 && b.syncs == 1);
    CHECK(back && !memcmp(back->data, x->data, 6 * sizeof(float)));
    tj_release(back);
    /* released through the device that allocated them */
    tj_release(on_a);
    tj_release(on_b);
    CHECK(a.frees == a.allocs && b.frees == b.allocs);

    /* strings stay on the host; a device out of memory is an error, and nothing leaks */
    const int64_t d1[1] = {1};
    tj_tensor *s = mk(TJ_STRING, 1, d1, STR("hi"));
    CHECK(rt_tensor_to_device(s, &a.dev) == NULL && ir_last_code() == TJ_ERR_DTYPE);
    CHECK(strstr(ir_last_error(), "not on fake:0") != NULL);
    a.fail = 1;
    CHECK(rt_tensor_to_device(x, &a.dev) == NULL && ir_last_code() == TJ_ERR_OOM);
    CHECK(strstr(ir_last_error(), "fake:0: out of memory") != NULL);
    CHECK(rt_tensor_alloc_on(&a.dev, TJ_F32, 2, d23) == NULL);
    CHECK(a.frees == a.allocs);
}

int main(void) {
    host_device();
    there_and_back();
    pool_free();
    return check_done();
}
