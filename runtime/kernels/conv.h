/* conv.h — private to runtime/kernels/: the geometry of a 2-D convolution or pooling (NHWC
 * input, HWIO filter) and the direct f32 convolutions of conv_direct.c. */
#ifndef TJ_RT_CONV_H
#define TJ_RT_CONV_H

#include <stdint.h>

typedef struct rt_conv_geom {
    int64_t n, h, w, c;     /* input */
    int64_t kh, kw, o;      /* filter */
    int64_t oh, ow;         /* output */
    int64_t sh, sw, dh, dw; /* strides, dilations */
    int64_t pt, pl;         /* pads top and left (bottom/right only bound the output) */
} rt_conv_geom;

/* 1 when the direct kernels take this convolution: an AVX-512 CPU, no dilation, pads smaller
 * than the window. */
int rt_conv_direct_usable(const rt_conv_geom *g);
/* Each returns 0 when it wrote every element of its output (y [n,oh,ow,o], dw [kh,kw,c,o],
 * dx [n,h,w,c]), 1 when it did not run (unusable geometry, no memory): use the im2col path. */
int rt_conv_direct_fwd(const rt_conv_geom *g, const float *x, const float *w, float *y);
int rt_conv_direct_filter_grad(const rt_conv_geom *g, const float *x, const float *dy, float *dw);
int rt_conv_direct_input_grad(const rt_conv_geom *g, const float *dy, const float *w, float *dx);

#endif
