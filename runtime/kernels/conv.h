/* conv.h — private to runtime/kernels/: the geometry of a 2-D convolution or pooling (NHWC
 * input, HWIO filter) and the direct f32 convolutions of conv_direct.c. */
#ifndef TJ_RT_CONV_H
#define TJ_RT_CONV_H

#include <stdint.h>

#include "ir/ir.h"

struct rt_packed_b;

typedef struct rt_conv_geom {
    int64_t n, h, w, c;     /* input */
    int64_t kh, kw, o;      /* filter */
    int64_t oh, ow;         /* output */
    int64_t sh, sw, dh, dw; /* strides, dilations */
    int64_t pt, pl;         /* pads top and left (bottom/right only bound the output) */
    int64_t groups;         /* convolutions: c / the filter's input channels (0 or 1: none) */
} rt_conv_geom;

/* The geometry of conv node n (CONV2D or a gradient) for input dims x, filter w, output y; of
 * pooling node n for its full-size side x and pooled side y (a max pool's dilations included).
 * Shared with the CPU program's conv steps (jit/cpu/program.c). */
rt_conv_geom rt_conv_geom_of(const ir_node *n, const int64_t *x, const int64_t *w,
                             const int64_t *y);
rt_conv_geom rt_pool_geom_of(const ir_node *n, const int64_t *x, const int64_t *y);

/* 1 when the direct kernels take this convolution: a CPU with a vector ISA of direct.h, no
 * dilation, no groups, pads smaller than the window. */
int rt_conv_direct_usable(const rt_conv_geom *g);
/* Each returns 0 when it wrote every element of its output (y [n,oh,ow,o], dw [kh,kw,c,o],
 * dx [n,h,w,c]), 1 when it did not run (unusable geometry, no memory): use the im2col path. The
 * forward's pw (NULL: none) is w packed by rt_conv_direct_pack, read instead of packing w for the
 * call. */
int rt_conv_direct_fwd(const rt_conv_geom *g, const float *x, const float *w,
                       const struct rt_packed_b *pw, float *y);
int rt_conv_direct_filter_grad(const rt_conv_geom *g, const float *x, const float *dy, float *dw);
int rt_conv_direct_input_grad(const rt_conv_geom *g, const float *dy, const float *w, float *dx);
/* 1 when rt_conv_direct_fwd runs g as a product of its patches and the filter (conv_direct.c:
 * short rows with many output channels, 1x1 filters) on the runtime's product tiles (none where
 * products are OpenBLAS's: rt_gemm_packed_usable), which can then take an epilogue in the tiles:
 * rt_conv_direct_product. */
int rt_conv_direct_as_product(const rt_conv_geom *g);
struct rt_gemm_epi;
/* g's filter w packed, once, for the route g runs on: the product's panels (rt_gemm_pack) or the
 * direct tiles' groups of output channels. New, owned by the caller (rt_gemm_packed_free); NULL
 * when the direct kernels do not take g or memory is short. */
struct rt_packed_b *rt_conv_direct_pack(const rt_conv_geom *g, const float *w);
/* g on the product route: the filter packed (pb: rt_conv_direct_pack's product panels) when pb
 * has its size and layout, else w as it lies (NULL: none), then epi (NULL: none) applied by the
 * tiles, y
 * being the product's [N·OH·OW][O] rows. 0 when it ran; 1 when it did not (another route, no
 * filter of the right size, no memory). */
int rt_conv_direct_product(const rt_conv_geom *g, const float *x, const float *w,
                           const struct rt_packed_b *pb, const struct rt_gemm_epi *epi, float *y);
/* Max pooling (avg 0: NaN wins, the first maximum, as in pool.c's loops) or average pooling
 * (avg 1: each window's elements inside the input summed in the loops' order, divided by their
 * count) of output rows [oy0, oy1) of sample b (window kh x kw, strides sh, sw, pads pt, pl),
 * the channels as vector lanes: 0 when it wrote those rows, 1 when it did not run (no vector
 * ISA of direct.h, a dilated window). */
int rt_pool_direct_rows(const rt_conv_geom *p, int avg, const float *x, float *y, int64_t b,
                        int64_t oy0, int64_t oy1);

/* The forward convolution by bands of output rows, for a consumer fused behind it (the CPU
 * program's conv step: its epilogue and max pool): band i of image b is rows
 * [i·band, min((i+1)·band, oh_used)), computed into a buffer of at most RT_CONV_BAND_FLOATS
 * floats ([rows][OW][O]) on a pool thread's stack and handed to fn(ctx, b, r0, rows, buf) on
 * that thread; rows past oh_used are never computed. 0 when every band ran; 1 when none did
 * (geometry the direct kernels do not take, a band too large, no memory for the padded input). */
enum { RT_CONV_BAND_FLOATS = 8192 };
typedef void (*rt_conv_band_fn)(void *ctx, int64_t b, int64_t r0, int64_t rows, float *buf);
int rt_conv_direct_fwd_bands(const rt_conv_geom *g, const float *x, const float *w,
                             const struct rt_packed_b *pw, int64_t band, int64_t oh_used,
                             rt_conv_band_fn fn, void *ctx);
/* One output row of a max pool (p: pt 0, no dilation) from the nr input rows of its window
 * (rows: [nr][p->w][p->c]) into y ([p->ow][p->c]); vector ISAs only (rt_pool_direct_rows's test).
 */
void rt_max_pool_band(const rt_conv_geom *p, const float *rows, int64_t nr, float *y);

#endif
