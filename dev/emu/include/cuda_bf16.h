// Shim for host emulation (dev/emu): a host __nv_bfloat16 that converts like CUDA's:
// float -> bf16 rounds to nearest, ties to even (NaN -> 0x7fff, the canonical NaN that
// __float2bfloat16 returns); bf16 -> float is exact. Conversions from double and from
// integers round once, directly to bf16 (round-to-odd to float, then to nearest even).
// Arithmetic on bf16 values is not overloaded: a + b converts both to float and
// computes in float (llmc kernels always convert explicitly, see README).
#pragma once
#define EMU_SHIM_CUDA_BF16 1
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <type_traits>

static inline unsigned short emu_f2bf_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);                      // round to nearest, ties to even
    return (unsigned short)(u >> 16);
}
static inline unsigned short emu_d2bf_bits(double d) {
    if (d != d) return 0x7fffu;
    float f = (float)d;
    if ((double)f != d && isfinite(f)) {
        // round to odd: truncate toward zero, then set the last bit (sticky); a second
        // rounding to 8 significant bits is then correct
        if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
        uint32_t u; memcpy(&u, &f, 4); u |= 1u; memcpy(&f, &u, 4);
    }
    return emu_f2bf_bits(f);
}

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(emu_f2bf_bits(f)) {}
    __nv_bfloat16(double d) : __x(emu_d2bf_bits(d)) {}
    template <class I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
    __nv_bfloat16(I i) : __x(emu_d2bf_bits((double)i)) {}
    operator float() const {
        uint32_t u = (uint32_t)__x << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
};
typedef __nv_bfloat16 nv_bfloat16;
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
typedef __nv_bfloat162 nv_bfloat162;
static_assert(sizeof(__nv_bfloat16) == 2, "bf16 must be 2 bytes");

static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { __nv_bfloat16 h; h.__x = x; return h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
static inline __nv_bfloat162 __float2bfloat162_rn(float a) { return {__nv_bfloat16(a), __nv_bfloat16(a)}; }
static inline float __low2float(__nv_bfloat162 v) { return (float)v.x; }
static inline float __high2float(__nv_bfloat162 v) { return (float)v.y; }
