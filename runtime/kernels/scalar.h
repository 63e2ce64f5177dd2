/* scalar.h — the scalar semantics of the binary ops that C does not give directly, written once
 * for every compiler that computes them: the host's reference kernels (binary.c, compiled as C
 * with <tgmath.h>) and the CUDA backend's kernels (NVRTC compiles this file as CUDA C++; its
 * text travels with the generated source). Floats: Python's floor mod built on fmod, IEEE
 * 754-2019 maximum/minimum (NaN propagates, -0 < +0). Integers: division truncating or flooring
 * with MIN / -1 wrapping instead of trapping, Python's mod, powers and shifts computed in
 * uint64 and wrapped back, shifts by counts outside [0, bits) defined. Callers guarantee a
 * nonzero divisor and a nonnegative exponent. tests/jit/test_nvrtc.c compiles it for sm_90. */
#ifndef TJ_RUNTIME_KERNELS_SCALAR_H
#define TJ_RUNTIME_KERNELS_SCALAR_H

#ifdef __CUDACC_RTC__ /* NVRTC: no C library headers; the device math library is built in */
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define TJ_SCALAR_FN static __device__ __forceinline__
#else
#include <stdint.h>
#include <tgmath.h> /* fmod, copysign at the operands' own type, as CUDA's overloads are */
#define TJ_SCALAR_FN static inline
#endif

#define FLOAT_HELPERS(T, SFX)                                                                      \
    TJ_SCALAR_FN T fmod_py_##SFX(T x, T y) {                                                       \
        T r = fmod(x, y);                                                                          \
        if (r != 0) {                                                                              \
            if ((r < 0) != (y < 0))                                                                \
                r += y;                                                                            \
        } else {                                                                                   \
            r = copysign((T)0, y);                                                                 \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    /* IEEE 754-2019 maximum/minimum: NaN propagates and -0 < +0, so the result does not           \
     * depend on the operand order (the IR orders commutative operands canonically). */            \
    TJ_SCALAR_FN T fmax_nan_##SFX(T x, T y) {                                                      \
        return x != x || y != y ? x + y : (x > y || (x == y && !signbit(x))) ? x : y;              \
    }                                                                                              \
    TJ_SCALAR_FN T fmin_nan_##SFX(T x, T y) {                                                      \
        return x != x || y != y ? x + y : (x < y || (x == y && signbit(x))) ? x : y;               \
    }

FLOAT_HELPERS(float, f32)
FLOAT_HELPERS(double, f64)

/* b to the power e, wrapping modulo 2^64 (square and multiply): every integer power's core. */
TJ_SCALAR_FN uint64_t pow_u64(uint64_t b, uint64_t e) {
    uint64_t r = 1;
    for (; e > 0; e >>= 1, b *= b)
        if (e & 1)
            r *= b;
    return r;
}

/* y == -1 is special-cased: MIN / -1 overflows in C. Callers guarantee y != 0. */
#define INT_HELPERS(T, U, SFX)                                                                     \
    TJ_SCALAR_FN T idiv_##SFX(T x, T y) {                                                          \
        return y == -1 ? (T)(U)(0u - (U)x) : x / y;                                                \
    }                                                                                              \
    TJ_SCALAR_FN T ifloordiv_##SFX(T x, T y) {                                                     \
        if (y == -1)                                                                               \
            return (T)(U)(0u - (U)x);                                                              \
        T q = x / y;                                                                               \
        if (x % y != 0 && ((x < 0) != (y < 0)))                                                    \
            q--;                                                                                   \
        return q;                                                                                  \
    }                                                                                              \
    TJ_SCALAR_FN T imod_##SFX(T x, T y) {                                                          \
        if (y == -1)                                                                               \
            return 0;                                                                              \
        T r = x % y;                                                                               \
        if (r != 0 && ((r < 0) != (y < 0)))                                                        \
            r += y;                                                                                \
        return r;                                                                                  \
    }                                                                                              \
    TJ_SCALAR_FN T ipow_##SFX(T x, T e) { /* e >= 0; uint64 so narrow types never promote */       \
        return (T)(U)pow_u64((uint64_t)(U)x, (uint64_t)e);                                         \
    }                                                                                              \
    /* shifts by a count outside [0, bits): 0, or the sign for >> (as shifting one at a time) */   \
    TJ_SCALAR_FN T ishl_##SFX(T x, T c) {                                                          \
        return c >= 0 && (uint64_t)c < 8 * sizeof(T) ? (T)(U)((uint64_t)x << c) : 0;               \
    }                                                                                              \
    TJ_SCALAR_FN T ishr_##SFX(T x, T c) {                                                          \
        return c >= 0 && (uint64_t)c < 8 * sizeof(T) ? (T)(x >> c) : (T)(x < 0 ? -1 : 0);          \
    }

INT_HELPERS(int8_t, uint8_t, i8)
INT_HELPERS(int16_t, uint16_t, i16)
INT_HELPERS(int32_t, uint32_t, i32)
INT_HELPERS(int64_t, uint64_t, i64)

/* Unsigned: C's division and remainder are already floor ones; y != 0 is checked before. */
#define UINT_HELPERS(T, SFX)                                                                       \
    TJ_SCALAR_FN T upow_##SFX(T x, T e) {                                                          \
        return (T)pow_u64(x, e);                                                                   \
    }                                                                                              \
    TJ_SCALAR_FN T ushl_##SFX(T x, T c) {                                                          \
        return c < 8 * sizeof(T) ? (T)((uint64_t)x << c) : 0;                                      \
    }                                                                                              \
    TJ_SCALAR_FN T ushr_##SFX(T x, T c) {                                                          \
        return c < 8 * sizeof(T) ? (T)(x >> c) : 0;                                                \
    }

UINT_HELPERS(uint8_t, u8)
UINT_HELPERS(uint16_t, u16)
UINT_HELPERS(uint32_t, u32)
UINT_HELPERS(uint64_t, u64)

#endif /* TJ_RUNTIME_KERNELS_SCALAR_H */
