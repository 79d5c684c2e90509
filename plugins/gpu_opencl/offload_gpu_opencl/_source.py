"""OpenCL C source of every kernel, one string per kernel family.

All tensors are dense NHWC buffers of ``store_t`` (float, or half when precision loss is
allowed) with a few elements of slack at the end, so 8-wide channel loads never leave the
buffer. Every kernel takes a 1-D NDRange padded to the work-group size and returns early past
``total``; shapes are arguments, so one program serves every partition on a device.

Three storage/compute modes, chosen by build options:
``-DSTORE_HALF``: tensors stored as half via vload_half/vstore_half, computed in float;
``-DSTORE_HALF -DCOMPUTE_HALF``: stored and computed in half (needs cl_khr_fp16);
neither: float32 throughout.
"""

from __future__ import annotations

import hashlib

__all__ = ["KERNELS", "PRELUDE", "program_source", "source_hash"]

PRELUDE = r"""
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
#elif defined(STORE_HALF)
typedef half store_t;
typedef float real;
typedef float8 real8;
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define LD8(p, i) vload_half8(0, (p) + (i))
#define ST8(p, i, v) vstore_half8((v), 0, (p) + (i))
#define REAL_MAX FLT_MAX
#else
typedef float store_t;
typedef float real;
typedef float8 real8;
#define LD(p, i) ((p)[i])
#define ST(p, i, v) ((p)[i] = (v))
#define LD8(p, i) vload8(0, (p) + (i))
#define ST8(p, i, v) vstore8((v), 0, (p) + (i))
#define REAL_MAX FLT_MAX
#endif

/* Fused activations, numbered as in _lower.ACTIVATIONS. */
#define ACT(v, act) ( \
    (act) == 1 ? fmax((v), (real)0) : \
    (act) == 2 ? fmin(fmax((v), (real)-1), (real)1) : \
    (act) == 3 ? fmin(fmax((v), (real)0), (real)6) : \
    (act) == 4 ? tanh(v) : \
    (act) == 5 ? (real)1 / ((real)1 + exp(-(v))) : (v))

/* Store 8 channels starting at y[base]; only the first n (<= 8) are real channels. */
inline void store8(__global store_t* y, int base, real8 v, int n) {
    if (n >= 8) { ST8(y, base, v); return; }
    real t[8];
    vstore8(v, 0, t);
    for (int c = 0; c < n; ++c) ST(y, base + c, t[c]);
}
"""

KERNELS: dict[str, str] = {
    # Pointwise convolution and FULLY_CONNECTED: y[P, Co] = x[P, K] @ w[K, Co8] + b.
    # One work-item: 4 rows x 8 output channels.
    "matmul": r"""
__kernel void matmul(__global const store_t* x, __global const store_t* w,
                     __global const store_t* b, __global store_t* y,
                     int total, int P, int K, int Co, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int CB = (Co + 7) >> 3, Co8 = CB << 3;
    int cb = gid % CB, p0 = (gid / CB) * 4;
    int r1 = min(p0 + 1, P - 1), r2 = min(p0 + 2, P - 1), r3 = min(p0 + 3, P - 1);
    __global const store_t* x0 = x + p0 * K;
    __global const store_t* x1 = x + r1 * K;
    __global const store_t* x2 = x + r2 * K;
    __global const store_t* x3 = x + r3 * K;
    __global const store_t* wp = w + cb * 8;
    real8 bias = LD8(b, cb * 8);
    real8 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
    for (int k = 0; k < K; ++k) {
        real8 wv = LD8(wp, k * Co8);
        a0 += LD(x0, k) * wv;
        a1 += LD(x1, k) * wv;
        a2 += LD(x2, k) * wv;
        a3 += LD(x3, k) * wv;
    }
    int n = Co - cb * 8;
    store8(y, p0 * Co + cb * 8, ACT(a0, act), n);
    if (p0 + 1 < P) store8(y, (p0 + 1) * Co + cb * 8, ACT(a1, act), n);
    if (p0 + 2 < P) store8(y, (p0 + 2) * Co + cb * 8, ACT(a2, act), n);
    if (p0 + 3 < P) store8(y, (p0 + 3) * Co + cb * 8, ACT(a3, act), n);
}
""",
    # General CONV_2D: weights [KH][KW][Ci][Co8]. One work-item: 4 output pixels x 8 channels.
    "conv2d": r"""
__kernel void conv2d(__global const store_t* x, __global const store_t* w,
                     __global const store_t* b, __global store_t* y,
                     int total, int P, int H, int W, int Ci, int OH, int OW, int Co,
                     int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int CB = (Co + 7) >> 3, Co8 = CB << 3;
    int cb = gid % CB, p0 = (gid / CB) * 4;
    int oy[4], ox[4], on[4];
    for (int j = 0; j < 4; ++j) {
        int p = min(p0 + j, P - 1);
        ox[j] = p % OW; int t = p / OW; oy[j] = t % OH; on[j] = t / OH;
    }
    real8 bias = LD8(b, cb * 8);
    real8 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
    for (int ky = 0; ky < KH; ++ky) {
        for (int kx = 0; kx < KW; ++kx) {
            int xb[4]; real m[4];
            for (int j = 0; j < 4; ++j) {
                int iy = oy[j] * SH - PT + ky * DH, ix = ox[j] * SW - PL + kx * DW;
                bool ok = iy >= 0 && iy < H && ix >= 0 && ix < W;
                xb[j] = ok ? ((on[j] * H + iy) * W + ix) * Ci : 0;
                m[j] = ok ? (real)1 : (real)0;
            }
            __global const store_t* wp = w + (ky * KW + kx) * Ci * Co8 + cb * 8;
            for (int ci = 0; ci < Ci; ++ci) {
                real8 wv = LD8(wp, ci * Co8);
                a0 += (m[0] * LD(x, xb[0] + ci)) * wv;
                a1 += (m[1] * LD(x, xb[1] + ci)) * wv;
                a2 += (m[2] * LD(x, xb[2] + ci)) * wv;
                a3 += (m[3] * LD(x, xb[3] + ci)) * wv;
            }
        }
    }
    int n = Co - cb * 8;
    store8(y, p0 * Co + cb * 8, ACT(a0, act), n);
    if (p0 + 1 < P) store8(y, (p0 + 1) * Co + cb * 8, ACT(a1, act), n);
    if (p0 + 2 < P) store8(y, (p0 + 2) * Co + cb * 8, ACT(a2, act), n);
    if (p0 + 3 < P) store8(y, (p0 + 3) * Co + cb * 8, ACT(a3, act), n);
}
""",
    # DEPTHWISE_CONV_2D with depth multiplier 1: weights [KH][KW][C8]; 8 channels per item.
    "dwconv": r"""
__kernel void dwconv(__global const store_t* x, __global const store_t* w,
                     __global const store_t* b, __global store_t* y,
                     int total, int H, int W, int C, int OH, int OW,
                     int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int CB = (C + 7) >> 3, C8 = CB << 3;
    int cb = gid % CB, p = gid / CB;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    real8 acc = LD8(b, cb * 8);
    for (int ky = 0; ky < KH; ++ky) {
        int iy = oy * SH - PT + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ox * SW - PL + kx * DW;
            if (ix < 0 || ix >= W) continue;
            acc += LD8(x, ((n * H + iy) * W + ix) * C + cb * 8)
                 * LD8(w, (ky * KW + kx) * C8 + cb * 8);
        }
    }
    store8(y, p * C + cb * 8, ACT(acc, act), C - cb * 8);
}
""",
    # DEPTHWISE_CONV_2D, any depth multiplier M: one output element per item; weights [KH][KW][Co].
    "dwconv_any": r"""
__kernel void dwconv_any(__global const store_t* x, __global const store_t* w,
                         __global const store_t* b, __global store_t* y,
                         int total, int H, int W, int C, int OH, int OW, int Co, int M,
                         int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int co = gid % Co, p = gid / Co;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    int ci = co / M;
    real acc = LD(b, co);
    for (int ky = 0; ky < KH; ++ky) {
        int iy = oy * SH - PT + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ox * SW - PL + kx * DW;
            if (ix < 0 || ix >= W) continue;
            acc += LD(x, ((n * H + iy) * W + ix) * C + ci) * LD(w, (ky * KW + kx) * Co + co);
        }
    }
    ST(y, gid, ACT(acc, act));
}
""",
    # TRANSPOSE_CONV: weights in TFLite's [Co][KH][KW][Ci]; one output element per item.
    "transpose_conv": r"""
__kernel void transpose_conv(__global const store_t* x, __global const store_t* w,
                             __global const store_t* b, __global store_t* y,
                             int total, int H, int W, int Ci, int OH, int OW, int Co,
                             int KH, int KW, int SH, int SW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int co = gid % Co, p = gid / Co;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    real acc = LD(b, co);
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
            for (int ci = 0; ci < Ci; ++ci) acc += LD(x, xb + ci) * LD(w, wb + ci);
        }
    }
    ST(y, gid, ACT(acc, act));
}
""",
    # MAX_POOL_2D (kind 0) and AVERAGE_POOL_2D (kind 1; padding excluded from the count).
    "pool": r"""
__kernel void pool(__global const store_t* x, __global store_t* y,
                   int total, int H, int W, int C, int OH, int OW,
                   int KH, int KW, int SH, int SW, int PT, int PL, int kind, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int c = gid % C, p = gid / C;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    int y0 = max(oy * SH - PT, 0), y1 = min(oy * SH - PT + KH, H);
    int x0 = max(ox * SW - PL, 0), x1 = min(ox * SW - PL + KW, W);
    real acc = kind == 0 ? -REAL_MAX : (real)0;
    for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix) {
            real v = LD(x, ((n * H + iy) * W + ix) * C + c);
            acc = kind == 0 ? fmax(acc, v) : acc + v;
        }
    if (kind == 1) acc = acc / (real)max((y1 - y0) * (x1 - x0), 1);
    ST(y, gid, ACT(acc, act));
}
""",
    # Two-input elementwise ops with 4-D broadcasting through per-input strides (0 = broadcast).
    "binary": r"""
inline real binop(real a, real b, int op) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return fmax(a, b);
        case 4: return fmin(a, b);
        case 5: return a >= (real)0 ? a : a * b;
        case 6: return (a != (real)0 && b != (real)0) ? (real)1 : (real)0;
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
    ST(y, gid, ACT(binop(va, vb, op), act));
}
__kernel void binary_same(__global const store_t* a, __global const store_t* b,
                          __global store_t* y, int total, int op, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    ST(y, gid, ACT(binop(LD(a, gid), LD(b, gid), op), act));
}
""",
    # One-input elementwise ops; fake quantization (op 7) rounds to a quantized grid in place.
    "unary": r"""
__kernel void unary(__global const store_t* x, __global store_t* y, int total, int op,
                    float p0, float p1, float p2, float p3) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    real v = LD(x, gid);
    switch (op) {
        case 0: v = fmax(v, (real)0); break;
        case 1: v = fmin(fmax(v, (real)0), (real)6); break;
        case 2: v = fmin(fmax(v, (real)-1), (real)1); break;
        case 3: v = (real)1 / ((real)1 + exp(-v)); break;
        case 4: v = tanh(v); break;
        case 5: v = exp(v); break;
        case 6: break;
        case 7: {
            /* p0 = scale, p1 = zero point, p2 = qmin, p3 = qmax; round half away from zero */
            float q = round((float)v / p0) + p1;
            q = fmin(fmax(q, p2), p3);
            v = (real)((q - p1) * p0);
            break;
        }
    }
    ST(y, gid, v);
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
    # RESIZE_BILINEAR (TFLite's ComputeInterpolationValues).
    "resize_bilinear": r"""
__kernel void resize_bilinear(__global const store_t* x, __global store_t* y, int total,
                              int H, int W, int C, int OH, int OW,
                              float sy, float sx, int half_pixel) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int c = gid % C, p = gid / C;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    float fy = half_pixel ? ((float)oy + 0.5f) * sy - 0.5f : (float)oy * sy;
    float fx = half_pixel ? ((float)ox + 0.5f) * sx - 0.5f : (float)ox * sx;
    int y0 = max((int)floor(fy), 0), y1 = min((int)ceil(fy), H - 1);
    int x0 = max((int)floor(fx), 0), x1 = min((int)ceil(fx), W - 1);
    float dy = fy - (float)y0, dx = fx - (float)x0;
    __global const store_t* xn = x + n * H * W * C + c;
    float v = (float)LD(xn, (y0 * W + x0) * C) * (1.0f - dy) * (1.0f - dx)
            + (float)LD(xn, (y1 * W + x0) * C) * dy * (1.0f - dx)
            + (float)LD(xn, (y0 * W + x1) * C) * (1.0f - dy) * dx
            + (float)LD(xn, (y1 * W + x1) * C) * dy * dx;
    ST(y, gid, (real)v);
}
""",
    # SOFTMAX over the last dimension, one row per item (beta == 1).
    "softmax": r"""
__kernel void softmax(__global const store_t* x, __global store_t* y, int total, int C) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int base = gid * C;
    float m = -FLT_MAX;
    for (int c = 0; c < C; ++c) m = fmax(m, (float)LD(x, base + c));
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
