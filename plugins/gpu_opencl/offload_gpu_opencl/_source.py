"""OpenCL C source of every kernel, one string per kernel family.

All tensors are dense NHWC buffers of ``store_t`` with 16 elements of slack at the end, so
8-wide channel loads never leave the buffer. Shapes are arguments, so one program serves every
partition on a device. Storage/compute modes, chosen by build options:

``-DSTORE_HALF``: tensors stored as half, computed in float;
``-DSTORE_HALF -DCOMPUTE_HALF``: stored and computed in half (needs cl_khr_fp16);
neither: float32 throughout.

``-DPLAIN_ACCESS`` (set for CPU devices) loads and stores 8-wide vectors by dereferencing an
unaligned vector type and converts halves with integer operations, instead of calling
``vload8`` / ``vload_half``: PoCL's CPU driver calls OpenCL builtins out of line, and a call in
an inner loop spills every accumulator (measured 5x slower for the matmul). For the same reason
the kernels use ``IMIN`` / ternaries instead of ``min`` / ``fmax``, ``#pragma unroll`` keeps
register-blocked accumulators in registers (PoCL does not unroll those loops on its own) and
helpers are ``always_inline``. With half storage there, convolution parameters (``param_t``:
weights, bias, PRELU slopes) stay float32, since converting them costs more than the multiply.

Kernel shapes (all guard the rounded-up NDRange against the real extents):

* convolutions and matmuls: one work-item computes R output pixels x 8*V channels (register
  blocked; a 2-D NDRange of channel blocks x pixel blocks) and applies a fused *epilogue*:
  activation, residual ADD (channels past ``RC`` read as zero: an absorbed channel PAD), the
  ADD's activation, PRELU;
* 3x3 depthwise convolutions: 8 channels x 4 horizontally adjacent pixels, weights in
  registers, a fast path for windows inside the image (3-D NDRange: channel block, x block, row);
* elementwise ops, pools, resize: 8 channels (or 8 consecutive elements) per work-item.
"""

from __future__ import annotations

import hashlib

__all__ = ["KERNELS", "PRELUDE", "program_source", "source_hash"]

PRELUDE = r"""
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

/* Fused activations, numbered as in _lower.ACTIVATIONS. */
INLINE real act1(real v, int act) {
    switch (act) {
        case 1: return v > (real)0 ? v : (real)0;
        case 2: v = v > (real)-1 ? v : (real)-1; return v < (real)1 ? v : (real)1;
        case 3: v = v > (real)0 ? v : (real)0; return v < (real)6 ? v : (real)6;
        case 4: return tanh(v);
        case 5: return (real)1 / ((real)1 + exp(-v));
        default: return v;
    }
}
INLINE real8 act8(real8 v, int act) {
    const real8 zero = (real8)0, one = (real8)1;
    switch (act) {
        case 1: return v > zero ? v : zero;
        case 2: v = v > -one ? v : -one; return v < one ? v : one;
        case 3: v = v > zero ? v : zero; return v < (real8)6 ? v : (real8)6;
        case 4: return tanh(v);
        case 5: return one / (one + exp(-v));
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
"""

# Register-blocked kernels (matmul, conv2d) are instantiated for a few (R, V) from the templates
# below; the lowering picks one per shape (_lower._blocking). EPILOGUE_ARGS in a template
# stands for the epilogue's buffer arguments.
_EPILOGUE_ARGS = """__global const store_t* res, __global const param_t* alpha,
        __global store_t* y"""

# The accumulation loop shared by matmul and conv2d: acc[j][v] += x_j[q] * w[q][v-th block]
# for q < COUNT, with x_j = XR[j] and weights at WP (row stride Co8). With X_BY_8 (half storage
# on CPUs) x is converted 8 values at a time.
_ACCUMULATE = r"""
        int q = 0;
#if defined(X_BY_8)
        for (; q + 8 <= COUNT; q += 8) {
            real8 xv[{R}];
            #pragma unroll
            for (int j = 0; j < {R}; ++j) xv[j] = LD8(XR[j], q);
            #pragma unroll
            for (int qq = 0; qq < 8; ++qq) {
                real8 wv[{V}];
                #pragma unroll
                for (int v = 0; v < {V}; ++v) wv[v] = LDP8(WP, (q + qq) * Co8 + co[v]);
                #pragma unroll
                for (int j = 0; j < {R}; ++j) {
                    #pragma unroll
                    for (int v = 0; v < {V}; ++v) acc[j][v] += xv[j][qq] * wv[v];
                }
            }
        }
#endif
        for (; q < COUNT; ++q) {
            real8 wv[{V}];
            #pragma unroll
            for (int v = 0; v < {V}; ++v) wv[v] = LDP8(WP, q * Co8 + co[v]);
            #pragma unroll
            for (int j = 0; j < {R}; ++j) {
                const real xv = LD(XR[j], q);
                #pragma unroll
                for (int v = 0; v < {V}; ++v) acc[j][v] += xv * wv[v];
            }
        }
"""

# Accumulators start at the bias; the epilogue stores the R x V blocks that exist.
_BLOCK_START = r"""
    const int CB = (Co + 7) >> 3, Co8 = CB << 3;
    const int cb = get_global_id(0) * {V}, p0 = get_global_id(1) * {R};
    if (cb >= CB || p0 >= P) return;
    int co[{V}];
    real8 acc[{R}][{V}];
    #pragma unroll
    for (int v = 0; v < {V}; ++v) {
        co[v] = IMIN(cb + v, CB - 1) * 8;
        const real8 bias = LDP8(b, co[v]);
        #pragma unroll
        for (int j = 0; j < {R}; ++j) acc[j][v] = bias;
    }
"""
# The accumulators are copied out with constant indices (so acc[][] stays in registers) and
# the epilogue runs in a rolled loop: one inlined copy instead of R*V (compile time halves).
_BLOCK_END = r"""
    real8 out[{R} * {V}];
    #pragma unroll
    for (int j = 0; j < {R}; ++j) {
        #pragma unroll
        for (int v = 0; v < {V}; ++v) out[j * {V} + v] = acc[j][v];
    }
    #pragma nounroll
    for (int i = 0; i < {R} * {V}; ++i) {
        const int j = i / {V}, v = i % {V};
        if (p0 + j < P && cb + v < CB)
            epilogue8(y, p0 + j, (cb + v) * 8, Co, out[i], act, res, RC, act2, alpha, prelu);
    }
"""

_MATMUL = (
    r"""
/* y[P, Co] = x[P, K] @ w[K, Co8] + b, then the epilogue. One item: {R} rows x {V}*8 channels
   (register blocked). NDRange: (channel blocks / {V}, row blocks). */
__kernel void matmul_{R}x{V}(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, EPILOGUE_ARGS,
        int P, int K, int Co, int act, int RC, int act2, int prelu) {"""
    + _BLOCK_START
    + r"""
    __global const store_t* xr[{R}];
    #pragma unroll
    for (int j = 0; j < {R}; ++j) xr[j] = x + IMIN(p0 + j, P - 1) * K;
    {"""
    + _ACCUMULATE.replace("COUNT", "K").replace("XR", "xr").replace("WP", "w")
    + "    }"
    + _BLOCK_END
    + "}\n"
)

_CONV2D = (
    r"""
/* General CONV_2D, weights [KH][KW][Ci][Co8]; as the matmul with K = KH*KW*Ci, reading input
   rows in place. Per kernel row: when every tap of the {R} pixels is inside the image (and
   dilation is 1) their KW*Ci inputs are contiguous, as are the weights, so one loop covers
   them; otherwise each tap is read alone, taps outside the image from `zero` (at least Ci
   zeros). One item: {R} output pixels x {V}*8 channels. */
__kernel void conv2d_{R}x{V}(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, __global const store_t* zero, EPILOGUE_ARGS,
        int P, int H, int W, int Ci, int OH, int OW, int Co,
        int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL,
        int act, int RC, int act2, int prelu) {"""
    + _BLOCK_START
    + r"""
    int iy0[{R}], ix0[{R}], img[{R}];
    bool cols_inside = DW == 1;
    #pragma unroll
    for (int j = 0; j < {R}; ++j) {
        const int p = IMIN(p0 + j, P - 1), ox = p % OW, t = p / OW, oy = t % OH;
        img[j] = (t / OH) * H;
        iy0[j] = oy * SH - PT;
        ix0[j] = ox * SW - PL;
        cols_inside = cols_inside && ix0[j] >= 0 && ix0[j] + KW <= W;
    }
    for (int ky = 0; ky < KH; ++ky) {
        bool inside = cols_inside;
        #pragma unroll
        for (int j = 0; j < {R}; ++j) {
            const int iy = iy0[j] + ky * DH;
            inside = inside && iy >= 0 && iy < H;
        }
        if (inside) {
            __global const store_t* xr[{R}];
            #pragma unroll
            for (int j = 0; j < {R}; ++j)
                xr[j] = x + ((img[j] + iy0[j] + ky * DH) * W + ix0[j]) * Ci;
            __global const param_t* wk = w + ky * KW * Ci * Co8;
            const int count = KW * Ci;"""
    + _ACCUMULATE.replace("COUNT", "count").replace("XR", "xr").replace("WP", "wk")
    + r"""
            continue;
        }
        for (int kx = 0; kx < KW; ++kx) {
            __global const store_t* xr[{R}];
            #pragma unroll
            for (int j = 0; j < {R}; ++j) {
                const int iy = iy0[j] + ky * DH, ix = ix0[j] + kx * DW;
                const bool tap_inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                xr[j] = tap_inside ? x + ((img[j] + iy) * W + ix) * Ci : zero;
            }
            __global const param_t* wk = w + (ky * KW + kx) * Ci * Co8;"""
    + _ACCUMULATE.replace("COUNT", "Ci").replace("XR", "xr").replace("WP", "wk")
    + r"""
        }
    }"""
    + _BLOCK_END
    + "}\n"
)

_DW3X3 = r"""
/* DEPTHWISE_CONV_2D 3x3, stride {S}, dilation 1, multiplier 1; weights [3][3][C8] held in
   registers. One item: 8 channels x 4 adjacent output pixels of one row, which share
   {SPAN} input columns per kernel row. NDRange: (channel blocks, x blocks, N*OH). */
__kernel void dw3x3_s{S}(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, __global const store_t* zero, EPILOGUE_ARGS,
        int H, int W, int C, int OH, int OW, int PT, int PL,
        int act, int RC, int act2, int prelu) {
    const int CB = (C + 7) >> 3, C8 = CB << 3;
    const int cb = get_global_id(0), ox0 = get_global_id(1) * 4, row = get_global_id(2);
    if (cb >= CB || ox0 >= OW) return;
    const int c0 = cb * 8, oy = row % OH, n = row / OH;
    real8 wt[9], acc[4];
    #pragma unroll
    for (int t = 0; t < 9; ++t) wt[t] = LDP8(w, t * C8 + c0);
    const real8 bias = LDP8(b, c0);
    #pragma unroll
    for (int j = 0; j < 4; ++j) acc[j] = bias;
    const int iy0 = oy * {S} - PT, ix0 = ox0 * {S} - PL;
    if (iy0 >= 0 && iy0 + 3 <= H && ix0 >= 0 && ix0 + {SPAN} <= W) {
        /* The whole window is inside the image: no bounds checks. */
        #pragma unroll
        for (int ky = 0; ky < 3; ++ky) {
            __global const store_t* r = x + ((n * H + iy0 + ky) * W + ix0) * C + c0;
            real8 in[{SPAN}];
            #pragma unroll
            for (int t = 0; t < {SPAN}; ++t) in[t] = LD8(r, t * C);
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                #pragma unroll
                for (int kx = 0; kx < 3; ++kx) acc[j] += in[j * {S} + kx] * wt[ky * 3 + kx];
            }
        }
    } else {
        /* Border: taps outside the image read zeros. */
        #pragma unroll
        for (int ky = 0; ky < 3; ++ky) {
            const int iy = iy0 + ky;
            const bool row_inside = iy >= 0 && iy < H;
            __global const store_t* r = x + (n * H + iy) * W * C + c0;
            real8 in[{SPAN}];
            #pragma unroll
            for (int t = 0; t < {SPAN}; ++t) {
                const int ix = ix0 + t;
                in[t] = LD8(row_inside && ix >= 0 && ix < W ? r + ix * C : zero, 0);
            }
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                #pragma unroll
                for (int kx = 0; kx < 3; ++kx) acc[j] += in[j * {S} + kx] * wt[ky * 3 + kx];
            }
        }
    }
    real8 out[4];
    #pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = acc[j];
    #pragma nounroll
    for (int j = 0; j < IMIN(4, OW - ox0); ++j)
        epilogue8(y, row * OW + ox0 + j, c0, C, out[j], act, res, RC, act2, alpha, prelu);
}
"""


def _instances(template: str, *params: dict[str, int]) -> str:
    """The template once per parameter set ({NAME} placeholders), with the epilogue args."""
    out = []
    for values in params:
        text = template.replace("EPILOGUE_ARGS", _EPILOGUE_ARGS)
        for name, value in values.items():
            text = text.replace("{" + name + "}", str(value))
        out.append(text)
    return "".join(out)


# (R, V) instances the lowering may choose (see _lower._blocking).
BLOCKINGS = ((6, 2), (8, 1), (4, 1), (1, 2))

KERNELS: dict[str, str] = {
    "matmul": _instances(_MATMUL, *({"R": r, "V": v} for r, v in BLOCKINGS)),
    "conv2d": _instances(_CONV2D, *({"R": r, "V": v} for r, v in BLOCKINGS)),
    "dw3x3": _instances(_DW3X3, {"S": 1, "SPAN": 6}, {"S": 2, "SPAN": 9}),
    # DEPTHWISE_CONV_2D with depth multiplier 1, any kernel/stride/dilation: weights [KH][KW][C8];
    # one item: 8 channels of one pixel. NDRange: (channel blocks, OW, N*OH).
    "dwconv": r"""
__kernel void dwconv(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, __global const store_t* res, __global const param_t* alpha,
        __global store_t* y, int H, int W, int C, int OH, int OW,
        int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL,
        int act, int RC, int act2, int prelu) {
    const int CB = (C + 7) >> 3, C8 = CB << 3;
    const int cb = get_global_id(0), ox = get_global_id(1), row = get_global_id(2);
    if (cb >= CB || ox >= OW) return;
    const int c0 = cb * 8, oy = row % OH, n = row / OH;
    real8 acc = LDP8(b, c0);
    for (int ky = 0; ky < KH; ++ky) {
        const int iy = oy * SH - PT + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            const int ix = ox * SW - PL + kx * DW;
            if (ix < 0 || ix >= W) continue;
            acc += LD8(x, ((n * H + iy) * W + ix) * C + c0) * LDP8(w, (ky * KW + kx) * C8 + c0);
        }
    }
    epilogue8(y, row * OW + ox, c0, C, acc, act, res, RC, act2, alpha, prelu);
}
""",
    # DEPTHWISE_CONV_2D, any depth multiplier M: one output element per item; weights [KH][KW][Co].
    "dwconv_any": r"""
__kernel void dwconv_any(__global const store_t* x, __global const param_t* w,
                         __global const param_t* b, __global store_t* y,
                         int total, int H, int W, int C, int OH, int OW, int Co, int M,
                         int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int co = gid % Co, p = gid / Co;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    int ci = co / M;
    real acc = LDP(b, co);
    for (int ky = 0; ky < KH; ++ky) {
        int iy = oy * SH - PT + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ox * SW - PL + kx * DW;
            if (ix < 0 || ix >= W) continue;
            acc += LD(x, ((n * H + iy) * W + ix) * C + ci) * LDP(w, (ky * KW + kx) * Co + co);
        }
    }
    ST(y, gid, act1(acc, act));
}
""",
    # TRANSPOSE_CONV: weights in TFLite's [Co][KH][KW][Ci]; one output element per item.
    "transpose_conv": r"""
__kernel void transpose_conv(__global const store_t* x, __global const param_t* w,
                             __global const param_t* b, __global store_t* y,
                             int total, int H, int W, int Ci, int OH, int OW, int Co,
                             int KH, int KW, int SH, int SW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int co = gid % Co, p = gid / Co;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    real acc = LDP(b, co);
    for (int ky = 0; ky < KH; ++ky) {
        int ny = oy + PT - ky;
        if (ny < 0 || ny % SH != 0) continue;
        int iy = ny / SH;
        if (iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int nx = ox + PL - kx;
            if (nx < 0 || nx % SW != 0) continue;
            int ix = nx / SW;
            if (ix >= W) continue;
            int xb = ((n * H + iy) * W + ix) * Ci, wb = ((co * KH + ky) * KW + kx) * Ci;
            for (int ci = 0; ci < Ci; ++ci) acc += LD(x, xb + ci) * LDP(w, wb + ci);
        }
    }
    ST(y, gid, act1(acc, act));
}
""",
    # MAX_POOL_2D (kind 0) and AVERAGE_POOL_2D (kind 1; padding excluded from the count).
    # One item: 8 channels of one output pixel. NDRange: (channel blocks, OW, N*OH).
    "pool": r"""
__kernel void pool(__global const store_t* x, __global store_t* y,
                   int H, int W, int C, int OH, int OW,
                   int KH, int KW, int SH, int SW, int PT, int PL, int kind, int act) {
    const int CB = (C + 7) >> 3;
    const int cb = get_global_id(0), ox = get_global_id(1), row = get_global_id(2);
    if (cb >= CB || ox >= OW) return;
    const int c0 = cb * 8, oy = row % OH, n = row / OH;
    const int y0 = IMAX(oy * SH - PT, 0), y1 = IMIN(oy * SH - PT + KH, H);
    const int x0 = IMAX(ox * SW - PL, 0), x1 = IMIN(ox * SW - PL + KW, W);
    real8 acc;
    if (kind == 0) {
        acc = (real8)(-REAL_MAX);
        for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) {
                const real8 v = LD8(x, ((n * H + iy) * W + ix) * C + c0);
                acc = v > acc ? v : acc;
            }
    } else {
        acc = (real8)0;
        for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) acc += LD8(x, ((n * H + iy) * W + ix) * C + c0);
        acc = acc / (real)IMAX((y1 - y0) * (x1 - x0), 1);
    }
    store8(y, (row * OW + ox) * C + c0, act8(acc, act), C - c0);
}
""",
    # Two-input elementwise ops. binary8: y viewed as rows of C elements, 8 per item; an input
    # with row stride 0 repeats one row (per-channel broadcast), one with lane step 0 is a
    # scalar. NDRange: (ceil(C / 8), rows). binary: any 4-D broadcast, one element per item.
    "binary": r"""
INLINE real binop(real a, real b, int op) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a > b ? a : b;
        case 4: return a < b ? a : b;
        case 5: return a >= (real)0 ? a : a * b;
        case 6: return (a != (real)0 && b != (real)0) ? (real)1 : (real)0;
        default: return a;
    }
}
INLINE real8 binop8(real8 a, real8 b, int op) {
    const real8 zero = (real8)0;
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a > b ? a : b;
        case 4: return a < b ? a : b;
        case 5: return a >= zero ? a : a * b;
        case 6: return ((a != zero) & (b != zero)) ? (real8)1 : zero;
        default: return a;
    }
}
__kernel void binary(__global const store_t* a, __global const store_t* b, __global store_t* y,
                     int total, int d1, int d2, int d3,
                     int sa0, int sa1, int sa2, int sa3, int sb0, int sb1, int sb2, int sb3,
                     int op, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int i3 = gid % d3, t = gid / d3, i2 = t % d2; t /= d2;
    int i1 = t % d1, i0 = t / d1;
    real va = LD(a, i0 * sa0 + i1 * sa1 + i2 * sa2 + i3 * sa3);
    real vb = LD(b, i0 * sb0 + i1 * sb1 + i2 * sb2 + i3 * sb3);
    ST(y, gid, act1(binop(va, vb, op), act));
}
__kernel void binary8(__global const store_t* a, __global const store_t* b,
                      __global store_t* y, int rows, int C, int ra, int la, int rb, int lb,
                      int op, int act) {
    const int c0 = get_global_id(0) * 8, row = get_global_id(1);
    if (c0 >= C || row >= rows) return;
    const real8 va = la ? LD8(a, row * ra + c0) : (real8)LD(a, row * ra);
    const real8 vb = lb ? LD8(b, row * rb + c0) : (real8)LD(b, row * rb);
    store8(y, row * C + c0, act8(binop8(va, vb, op), act), C - c0);
}
""",
    # One-input elementwise ops, 8 elements per item; fake_quant rounds to a quantized grid.
    "unary": r"""
__kernel void unary8(__global const store_t* x, __global store_t* y, int total, int op) {
    const int i = get_global_id(0) * 8;
    if (i >= total) return;
    real8 v = LD8(x, i);
    const real8 zero = (real8)0, one = (real8)1;
    switch (op) {
        case 0: v = v > zero ? v : zero; break;
        case 1: v = v > zero ? v : zero; v = v < (real8)6 ? v : (real8)6; break;
        case 2: v = v > -one ? v : -one; v = v < one ? v : one; break;
        case 3: v = one / (one + exp(-v)); break;
        case 4: v = tanh(v); break;
        case 5: v = exp(v); break;
        default: break;
    }
    store8(y, i, v, total - i);
}
/* scale, zero point, qmin, qmax; rounds half away from zero (as TFLite), in float. */
__kernel void fake_quant(__global const store_t* x, __global store_t* y, int total,
                         float scale, float zp, float qmin, float qmax) {
    const int i = get_global_id(0);
    if (i >= total) return;
    float q = (float)LD(x, i) / scale;
    q = q < -1e9f ? -1e9f : (q > 1e9f ? 1e9f : q);   /* keep the int conversion defined */
    q = (float)(long)(q + (q >= 0.0f ? 0.5f : -0.5f)) + zp;
    q = q < qmin ? qmin : (q > qmax ? qmax : q);
    ST(y, i, (real)((q - zp) * scale));
}
""",
    # PAD with zeros (4-D): pad amounts before each dimension.
    "pad": r"""
__kernel void pad(__global const store_t* x, __global store_t* y, int total,
                  int i0, int i1, int i2, int i3, int o1, int o2, int o3,
                  int p0, int p1, int p2, int p3) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int c3 = gid % o3, t = gid / o3, c2 = t % o2; t /= o2;
    int c1 = t % o1, c0 = t / o1;
    c0 -= p0; c1 -= p1; c2 -= p2; c3 -= p3;
    real v = (real)0;
    if (c0 >= 0 && c0 < i0 && c1 >= 0 && c1 < i1 && c2 >= 0 && c2 < i2 && c3 >= 0 && c3 < i3)
        v = LD(x, ((c0 * i1 + c1) * i2 + c2) * i3 + c3);
    ST(y, gid, v);
}
""",
    # CONCATENATION, one launch per input: copy [outer, inner] into [outer, inner_out] at offset.
    "copy_block": r"""
__kernel void copy_block(__global const store_t* x, __global store_t* y, int total,
                         int inner, int inner_out, int offset) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int o = gid / inner, r = gid % inner;
    ST(y, o * inner_out + offset + r, LD(x, gid));
}
""",
    # STRIDED_SLICE (4-D): y[i] = x[base + sum(i_d * m_d)].
    "gather4": r"""
__kernel void gather4(__global const store_t* x, __global store_t* y, int total,
                      int d1, int d2, int d3, int base, int m0, int m1, int m2, int m3) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int c3 = gid % d3, t = gid / d3, c2 = t % d2; t /= d2;
    int c1 = t % d1, c0 = t / d1;
    ST(y, gid, LD(x, base + c0 * m0 + c1 * m1 + c2 * m2 + c3 * m3));
}
""",
    # RESIZE_BILINEAR (TFLite's ComputeInterpolationValues), 8 channels of one output pixel per
    # item. NDRange: (channel blocks, OW, N*OH).
    "resize_bilinear": r"""
INLINE int floor_int(float v) { int i = (int)v; return (float)i > v ? i - 1 : i; }
INLINE int ceil_int(float v) { int i = (int)v; return (float)i < v ? i + 1 : i; }
__kernel void resize_bilinear(__global const store_t* x, __global store_t* y,
                              int H, int W, int C, int OH, int OW,
                              float sy, float sx, int half_pixel) {
    const int CB = (C + 7) >> 3;
    const int cb = get_global_id(0), ox = get_global_id(1), row = get_global_id(2);
    if (cb >= CB || ox >= OW) return;
    const int c0 = cb * 8, oy = row % OH, n = row / OH;
    const float fy = half_pixel ? ((float)oy + 0.5f) * sy - 0.5f : (float)oy * sy;
    const float fx = half_pixel ? ((float)ox + 0.5f) * sx - 0.5f : (float)ox * sx;
    const int y0 = IMAX(floor_int(fy), 0), y1 = IMIN(ceil_int(fy), H - 1);
    const int x0 = IMAX(floor_int(fx), 0), x1 = IMIN(ceil_int(fx), W - 1);
    const float dy = fy - (float)y0, dx = fx - (float)x0;
    __global const store_t* xn = x + n * H * W * C + c0;
    const real8 v = LD8(xn, (y0 * W + x0) * C) * (real)((1.0f - dy) * (1.0f - dx))
                  + LD8(xn, (y1 * W + x0) * C) * (real)(dy * (1.0f - dx))
                  + LD8(xn, (y0 * W + x1) * C) * (real)((1.0f - dy) * dx)
                  + LD8(xn, (y1 * W + x1) * C) * (real)(dy * dx);
    store8(y, (row * OW + ox) * C + c0, v, C - c0);
}
""",
    # The gates of the BASIC LSTM cell (op version 2), after its concatenation and matmul:
    # pre[B][4*O] holds the input gate, new input, forget gate and output gate blocks of each
    # row. state = sigmoid(i) * tanh(n) + sigmoid(f) * c_prev, activation = sigmoid(o) *
    # tanh(state), stored in the outputs and also in h_wb and c_wb (the previous
    # activation and state: the cell's persistent state, as LiteRT's CPU kernel writes it).
    # c_wb may be c_prev: each item reads its elements before writing them. Lanes past O
    # read the next row (or the slack) and are dropped. NDRange: (ceil(O / 8), B).
    "lstm": r"""
INLINE real8 sigmoid8(real8 v) { return (real8)1 / ((real8)1 + exp(-v)); }
__kernel void lstm_gates(__global const store_t* pre, __global const store_t* c_prev,
                         __global store_t* act_out, __global store_t* state_out,
                         __global store_t* h_wb, __global store_t* c_wb, int B, int O) {
    const int c0 = get_global_id(0) * 8, row = get_global_id(1);
    if (c0 >= O || row >= B) return;
    __global const store_t* g = pre + row * 4 * O + c0;
    const int at = row * O + c0, n = O - c0;
    const real8 state = sigmoid8(LD8(g, 0)) * tanh(LD8(g, O))
                      + sigmoid8(LD8(g, 2 * O)) * LD8(c_prev, at);
    const real8 activ = sigmoid8(LD8(g, 3 * O)) * tanh(state);
    store8(state_out, at, state, n);
    store8(act_out, at, activ, n);
    store8(h_wb, at, activ, n);
    store8(c_wb, at, state, n);
}
""",
    # SOFTMAX over the last dimension, one row per item (beta == 1).
    "softmax": r"""
__kernel void softmax(__global const store_t* x, __global store_t* y, int total, int C) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int base = gid * C;
    float m = -FLT_MAX;
    for (int c = 0; c < C; ++c) {
        const float v = (float)LD(x, base + c);
        m = v > m ? v : m;
    }
    float s = 0.0f;
    for (int c = 0; c < C; ++c) s += exp((float)LD(x, base + c) - m);
    for (int c = 0; c < C; ++c) ST(y, base + c, (real)(exp((float)LD(x, base + c) - m) / s));
}
""",
}


def program_source() -> str:
    """The whole program: prelude plus every kernel family."""
    return PRELUDE + "".join(KERNELS[name] for name in sorted(KERNELS))


def source_hash(options: str) -> str:
    """sha256 of the program source and build options: part of every program cache key."""
    return hashlib.sha256((program_source() + "\0" + options).encode()).hexdigest()
