/* simd.h — private to runtime/kernels/: the vector operations the direct kernels
 * (direct_kernels.inc) are written in, for one instruction set per translation unit. A unit
 * defines RT_SIMD_AVX512, RT_SIMD_AVX2 (compiling for it with a target pragma) or RT_SIMD_NEON
 * (aarch64's Advanced SIMD, always there), includes this
 * header, then the kernels; the kernels never name an intrinsic. Per ISA:
 *
 *   vf, vm          a vector of RT_VL floats and a lane mask
 *   v_zero, v_set1  all lanes 0 / x
 *   v_load(p), v_loadm(m, p), v_store(p, x), v_storem(p, m, x)
 *                   whole and masked (lanes off: not read, loaded as 0; not written)
 *   v_fma(a, b, c)  a·b + c fused; v_add
 *   v_max(v, m)     v > m ? v : m per lane (the first of equals and of NaNs kept in m)
 *   v_unord(x)      the lanes that are NaN; v_gt0u(x): x > 0 or NaN
 *   v_blend(m, a, b) b where m, else a; v_and(m, x): x where m, else +0
 *   m_lanes(n)      the first n lanes (n >= 1; all from RT_VL on); m_all; m_or; m_andnot(a, b):
 *                   a and not b; m_any; m_full: every lane on
 *
 * RT_ISA_SUFFIX names the unit's exported table (rt_simd_avx512, ...). */
#ifndef TJ_RT_SIMD_H
#define TJ_RT_SIMD_H

#include <stdint.h>
#if defined(RT_SIMD_AVX512) || defined(RT_SIMD_AVX2)
#include <immintrin.h>
#endif

#if defined(RT_SIMD_AVX512)
#define RT_VL 16
#define RT_ISA_SUFFIX avx512
typedef __m512 vf;
typedef __mmask16 vm;
#define v_zero() _mm512_setzero_ps()
#define v_set1(x) _mm512_set1_ps(x)
#define v_load(p) _mm512_loadu_ps(p)
#define v_loadm(m, p) _mm512_maskz_loadu_ps((m), (p))
#define v_store(p, x) _mm512_storeu_ps((p), (x))
#define v_storem(p, m, x) _mm512_mask_storeu_ps((p), (m), (x))
#define v_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define v_add(a, b) _mm512_add_ps((a), (b))
#define v_div(a, b) _mm512_div_ps((a), (b))
#define v_max(v, m) _mm512_max_ps((v), (m))
#define v_unord(x) _mm512_cmp_ps_mask((x), (x), _CMP_UNORD_Q)
#define v_gt0u(x) _mm512_cmp_ps_mask((x), _mm512_setzero_ps(), _CMP_NLE_UQ)
#define v_blend(m, a, b) _mm512_mask_blend_ps((m), (a), (b))
#define v_and(m, x) _mm512_maskz_mov_ps((m), (x))
#define m_all() ((vm)0xffff)
#define m_or(a, b) ((vm)((a) | (b)))
#define m_andnot(a, b) ((vm)((a) & (vm) ~(b)))
#define m_any(a) ((a) != 0)
#define m_full(a) ((a) == 0xffff)
static inline vm m_lanes(int64_t n) {
    return (vm)(n >= 16 ? 0xffff : (1u << n) - 1);
}
#elif defined(RT_SIMD_AVX2)
#define RT_VL 8
#define RT_ISA_SUFFIX avx2
typedef __m256 vf;
typedef __m256i vm; /* all ones in a lane that is on */
#define v_zero() _mm256_setzero_ps()
#define v_set1(x) _mm256_set1_ps(x)
#define v_load(p) _mm256_loadu_ps(p)
#define v_loadm(m, p) _mm256_maskload_ps((p), (m))
#define v_store(p, x) _mm256_storeu_ps((p), (x))
#define v_storem(p, m, x) _mm256_maskstore_ps((p), (m), (x))
#define v_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define v_add(a, b) _mm256_add_ps((a), (b))
#define v_div(a, b) _mm256_div_ps((a), (b))
#define v_max(v, m) _mm256_max_ps((v), (m))
#define v_unord(x) _mm256_castps_si256(_mm256_cmp_ps((x), (x), _CMP_UNORD_Q))
#define v_gt0u(x) _mm256_castps_si256(_mm256_cmp_ps((x), _mm256_setzero_ps(), _CMP_NLE_UQ))
#define v_blend(m, a, b) _mm256_blendv_ps((a), (b), _mm256_castsi256_ps(m))
#define v_and(m, x) _mm256_and_ps(_mm256_castsi256_ps(m), (x))
#define m_all() _mm256_set1_epi32(-1)
#define m_or(a, b) _mm256_or_si256((a), (b))
#define m_andnot(a, b) _mm256_andnot_si256((b), (a))
#define m_any(a) (!_mm256_testz_si256((a), (a)))
#define m_full(a) (_mm256_testc_si256((a), _mm256_set1_epi32(-1)))
static inline vm m_lanes(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n >= 8 ? 8 : n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#elif defined(RT_SIMD_NEON)
#include <arm_neon.h>
#define RT_VL 4
#define RT_ISA_SUFFIX neon
typedef float32x4_t vf;
typedef uint32x4_t vm; /* all ones in a lane that is on */
#define v_zero() vdupq_n_f32(0.0f)
#define v_set1(x) vdupq_n_f32(x)
#define v_load(p) vld1q_f32(p)
#define v_store(p, x) vst1q_f32((p), (x))
#define v_fma(a, b, c) vfmaq_f32((c), (a), (b))
#define v_add(a, b) vaddq_f32((a), (b))
#define v_div(a, b) vdivq_f32((a), (b))
#define v_max(v, m) vbslq_f32(vcgtq_f32((v), (m)), (v), (m)) /* NaN on either side: m */
#define v_unord(x) vmvnq_u32(vceqq_f32((x), (x)))
#define v_gt0u(x) vmvnq_u32(vcleq_f32((x), vdupq_n_f32(0.0f)))
#define v_blend(m, a, b) vbslq_f32((m), (b), (a))
#define v_and(m, x) vreinterpretq_f32_u32(vandq_u32((m), vreinterpretq_u32_f32(x)))
#define m_all() vdupq_n_u32(~0u)
#define m_or(a, b) vorrq_u32((a), (b))
#define m_andnot(a, b) vbicq_u32((a), (b))
#define m_any(a) (vmaxvq_u32(a) != 0)
#define m_full(a) (vminvq_u32(a) == ~0u)
static inline vm m_lanes(int64_t n) {
    static const uint32_t iota[4] = {0, 1, 2, 3};
    return vcltq_u32(vld1q_u32(iota), vdupq_n_u32((uint32_t)(n >= 4 ? 4 : n)));
}
/* NEON has no masked loads and stores: a whole vector when every lane is on (the common case),
 * else lane by lane (lanes off: not read, loaded as 0; not written) */
static inline vf v_loadm(vm m, const float *p) {
    if (vminvq_u32(m))
        return vld1q_f32(p);
    float t[4] = {0, 0, 0, 0};
    uint32_t on[4];
    vst1q_u32(on, m);
    for (int i = 0; i < 4; i++)
        if (on[i])
            t[i] = p[i];
    return vld1q_f32(t);
}
static inline void v_storem(float *p, vm m, vf x) {
    if (vminvq_u32(m)) {
        vst1q_f32(p, x);
        return;
    }
    float t[4];
    uint32_t on[4];
    vst1q_f32(t, x);
    vst1q_u32(on, m);
    for (int i = 0; i < 4; i++)
        if (on[i])
            p[i] = t[i];
}
#else
#error                                                                                             \
    "simd.h: define the instruction set of this unit (RT_SIMD_AVX512, RT_SIMD_AVX2, RT_SIMD_NEON)"
#endif

#define RT_SIMD_CAT2(a, b) a##b
#define RT_SIMD_CAT(a, b) RT_SIMD_CAT2(a, b)
/* the unit's table: rt_simd_avx512, rt_simd_avx2 */
#define RT_SIMD_TABLE RT_SIMD_CAT(rt_simd_, RT_ISA_SUFFIX)

#endif /* TJ_RT_SIMD_H */
