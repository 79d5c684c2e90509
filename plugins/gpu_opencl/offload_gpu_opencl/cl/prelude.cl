// Compiled ahead of every family: the storage and compute types the build options choose
// (see _source), the 8-wide load/store macros, fused activations and the convolution epilogue.
// The activation codes are _ir.ACTIVATIONS (with _ir.FINITE and _ir.RELU_FINITE). Any change
// to the compiled text changes the source hash every cache key holds.
/* PoCL does not inline every `inline` helper on its own (the epilogue stayed a call). */
#define INLINE inline __attribute__((always_inline))

#if defined(COMPUTE_HALF)
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half store_t;
typedef half real;
typedef half8 real8;
#define LD(p, i) ((real)(p)[i])
#define ST(p, i, v) ((p)[i] = (store_t)(v))
#define LD8(p, i) vload8(0, (p) + (i))
#define ST8(p, i, v) vstore8((v), 0, (p) + (i))
#define REAL_MAX 65504.0h
typedef half param_t;
#define LDP(p, i) LD(p, i)
#define LDP8(p, i) LD8(p, i)

#elif defined(STORE_HALF) && defined(PLAIN_ACCESS)
/* Half storage as raw bits (ushort), converted with integer operations (no builtin calls). */
typedef ushort store_t;
typedef float real;
typedef float8 real8;
typedef ushort ushort8_u __attribute__((ext_vector_type(8), aligned(2)));

/* Half bits -> float: shift exponent and mantissa into place and rebias by multiplying by
   2^112 (exact for normals and subnormals); infinities and NaNs get an all-ones exponent. */
INLINE float h2f(ushort h) {
    uint u = (uint)h, em = (u & 0x7fffu) << 13;
    uint bits = as_uint(as_float(em) * 0x1.0p112f);
    bits = em >= 0x0f800000u ? (em | 0x7f800000u) : bits;
    return as_float(bits | ((u & 0x8000u) << 16));
}
INLINE float8 h2f8(ushort8 h) {
    uint8 u = __builtin_convertvector(h, uint8), em = (u & 0x7fffu) << 13;
    uint8 bits = as_uint8(as_float8(em) * 0x1.0p112f);
    bits = em >= 0x0f800000u ? (em | 0x7f800000u) : bits;
    return as_float8(bits | ((u & 0x8000u) << 16));
}
/* float -> half bits, round to nearest even (as vstore_half): F. Giesen's
   float_to_half_fast3_rtne, branch-free. */
INLINE ushort f2h(float f) {
    uint x = as_uint(f), a = x & 0x7fffffffu;
    uint big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
    uint sub = as_uint(as_float(a) + 0.5f) - 0x3f000000u;
    uint norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint r = a >= 0x47800000u ? big : (a < 0x38800000u ? sub : norm);
    return (ushort)(r | ((x >> 16) & 0x8000u));
}
INLINE ushort8 f2h8(float8 f) {
    uint8 x = as_uint8(f), a = x & 0x7fffffffu;
    uint8 big = a > 0x7f800000u ? (uint8)0x7e00u : (uint8)0x7c00u;
    uint8 sub = as_uint8(as_float8(a) + 0.5f) - 0x3f000000u;
    uint8 norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint8 r = a >= 0x47800000u ? big : (a < 0x38800000u ? sub : norm);
    return __builtin_convertvector(r | ((x >> 16) & 0x8000u), ushort8);
}
#define LD(p, i) h2f((p)[i])
#define ST(p, i, v) ((p)[i] = f2h(v))
#define LD8(p, i) h2f8(*(__global const ushort8_u*)((p) + (i)))
#define ST8(p, i, v) (*(__global ushort8_u*)((p) + (i)) = f2h8(v))
#define REAL_MAX FLT_MAX
/* matmul / conv2d convert x 8 values at a time: one conversion per multiply costs more than
   the multiply. Convolution parameters stay float32 (the host uploads them so) for the same
   reason. */
#define X_BY_8
typedef float param_t;
typedef float float8_u __attribute__((ext_vector_type(8), aligned(4)));
#define LDP(p, i) ((p)[i])
#define LDP8(p, i) (*(__global const float8_u*)((p) + (i)))

#elif defined(STORE_HALF)
typedef half store_t;
typedef float real;
typedef float8 real8;
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define LD8(p, i) vload_half8(0, (p) + (i))
#define ST8(p, i, v) vstore_half8((v), 0, (p) + (i))
#define REAL_MAX FLT_MAX
typedef half param_t;
#define LDP(p, i) LD(p, i)
#define LDP8(p, i) LD8(p, i)

#else
typedef float store_t;
typedef float real;
typedef float8 real8;
#define LD(p, i) ((p)[i])
#define ST(p, i, v) ((p)[i] = (v))
#if defined(PLAIN_ACCESS)
typedef float float8_u __attribute__((ext_vector_type(8), aligned(4)));
#define LD8(p, i) (*(__global const float8_u*)((p) + (i)))
#define ST8(p, i, v) (*(__global float8_u*)((p) + (i)) = (v))
#else
#define LD8(p, i) vload8(0, (p) + (i))
#define ST8(p, i, v) vstore8((v), 0, (p) + (i))
#endif
#define REAL_MAX FLT_MAX
typedef float param_t;
#define LDP(p, i) LD(p, i)
#define LDP8(p, i) LD8(p, i)
#endif

#define IMIN(a, b) ((a) < (b) ? (a) : (b))
#define IMAX(a, b) ((a) > (b) ? (a) : (b))

/* Fused activations, numbered as in _ir.ACTIVATIONS. The clamps pass NaN through, as
   TFLite's min(max(v, lo), hi) does. Codes 6 and 7 are NONE and RELU of the ops TFLite clamps
   to the finite range as well (_ir.FINITE_OPS): an overflow gives +-max, not inf. Code 8 is a
   HARD_SWISH node fused into the convolution before it (_ir.HARD_SWISH), computed as unary8
   computes the node alone, so fusing it changes no bit in float32 storage; code 9 is RELU6 followed by a MUL by
   1/6 (_ir.RELU6_SIXTH: MobileNetV3's hard sigmoid), the product binary8 makes in float32. */
INLINE real act1(real v, int act) {
    switch (act) {
        case 1: return v < (real)0 ? (real)0 : v;
        case 2: v = v < (real)-1 ? (real)-1 : v; return v > (real)1 ? (real)1 : v;
        case 3: v = v < (real)0 ? (real)0 : v; return v > (real)6 ? (real)6 : v;
        case 4: return tanh(v);
        case 5: return (real)1 / ((real)1 + exp(-v));
        case 6: v = v < -REAL_MAX ? -REAL_MAX : v; return v > REAL_MAX ? REAL_MAX : v;
        case 7: v = v < (real)0 ? (real)0 : v; return v > REAL_MAX ? REAL_MAX : v;
        case 8: return (v * (real)(1.0f / 6.0f)) * clamp(v + (real)3, (real)0, (real)6);
        case 9: v = v < (real)0 ? (real)0 : v; v = v > (real)6 ? (real)6 : v;
                return v * (real)(1.0f / 6.0f);
        default: return v;
    }
}
INLINE real8 act8(real8 v, int act) {
    const real8 zero = (real8)0, one = (real8)1, big = (real8)REAL_MAX;
    switch (act) {
        case 1: return v < zero ? zero : v;
        case 2: v = v < -one ? -one : v; return v > one ? one : v;
        case 3: v = v < zero ? zero : v; return v > (real8)6 ? (real8)6 : v;
        case 4: return tanh(v);
        case 5: return one / (one + exp(-v));
        case 6: v = v < -big ? -big : v; return v > big ? big : v;
        case 7: v = v < zero ? zero : v; return v > big ? big : v;
        case 8: return (v * (real8)(1.0f / 6.0f)) * clamp(v + (real8)3, zero, (real8)6);
        case 9: v = v < zero ? zero : v; v = v > (real8)6 ? (real8)6 : v;
                return v * (real8)(1.0f / 6.0f);
        default: return v;
    }
}

/* Store 8 channels starting at y[base]; only the first n (<= 8) are real channels. */
INLINE void store8(__global store_t* y, int base, real8 v, int n) {
    if (n >= 8) { ST8(y, base, v); return; }
    for (int c = 0; c < n; ++c) ST(y, base + c, v[c]);
}

/* Epilogue of every convolution for channels c0..c0+7 of output pixel p: fused activation;
   then, when RC > 0, a fused ADD of res[p][0..RC) (channels past RC count as zero: a channel
   PAD of the residual) and the ADD's activation; then, when prelu, PRELU with alpha[c]. */
INLINE void epilogue8(__global store_t* y, int p, int c0, int Co, real8 v, int act,
                      __global const store_t* res, int RC, int act2,
                      __global const param_t* alpha, int prelu) {
    v = act8(v, act);
    if (RC > 0) {
        real8 r = (real8)0;
        if (c0 + 8 <= RC) {
            r = LD8(res, p * RC + c0);
        } else {
            for (int l = 0; l < RC - c0; ++l) r[l] = LD(res, p * RC + c0 + l);
        }
        v = act8(v + r, act2);
    }
    if (prelu) {
        real8 a = LDP8(alpha, c0);
        v = v >= (real8)0 ? v : v * a;
    }
    store8(y, p * Co + c0, v, Co - c0);
}
