// RESIZE_BILINEAR (TFLite's ComputeInterpolationValues), 8 channels of one output pixel per
// item. NDRange: (channel blocks, OW, N*OH). mode 0: plain, 1: half-pixel centers, 2: an exact
// 2x upscale (neither option set), which TFLite's optimized float kernel computes as pairwise
// means instead: their rounding differs, and an infinite input stays infinite there where the
// weighted sum gives inf * 0 = NaN.
INLINE int floor_int(float v) { int i = (int)v; return (float)i > v ? i - 1 : i; }
INLINE int ceil_int(float v) { int i = (int)v; return (float)i < v ? i + 1 : i; }
__kernel void resize_bilinear(__global const store_t* x, __global store_t* y,
                              int H, int W, int C, int OH, int OW,
                              float sy, float sx, int mode) {
    const int CB = (C + 7) >> 3;
    const int cb = get_global_id(0), ox = get_global_id(1), row = get_global_id(2);
    if (cb >= CB || ox >= OW) return;
    const int c0 = cb * 8, oy = row % OH, n = row / OH;
    __global const store_t* xn = x + n * H * W * C + c0;
    if (mode == 2) {
        const int y0 = oy >> 1, x0 = ox >> 1;
        const int y1 = IMIN(y0 + 1, H - 1), x1 = IMIN(x0 + 1, W - 1);
        const real two = (real)2;
        const real8 a = LD8(xn, (y0 * W + x0) * C);
        real8 v = a;
        if (oy & 1) {
            v = (a + LD8(xn, (y1 * W + x0) * C)) / two;
            if (ox & 1)
                v = (v + (LD8(xn, (y0 * W + x1) * C) + LD8(xn, (y1 * W + x1) * C)) / two) / two;
        } else if (ox & 1) {
            v = (a + LD8(xn, (y0 * W + x1) * C)) / two;
        }
        store8(y, (row * OW + ox) * C + c0, v, C - c0);
        return;
    }
    const float fy = mode ? ((float)oy + 0.5f) * sy - 0.5f : (float)oy * sy;
    const float fx = mode ? ((float)ox + 0.5f) * sx - 0.5f : (float)ox * sx;
    const int y0 = IMAX(floor_int(fy), 0), y1 = IMIN(ceil_int(fy), H - 1);
    const int x0 = IMAX(floor_int(fx), 0), x1 = IMIN(ceil_int(fx), W - 1);
    const float dy = fy - (float)y0, dx = fx - (float)x0;
    const real8 v = LD8(xn, (y0 * W + x0) * C) * (real)((1.0f - dy) * (1.0f - dx))
                  + LD8(xn, (y1 * W + x0) * C) * (real)(dy * (1.0f - dx))
                  + LD8(xn, (y0 * W + x1) * C) * (real)((1.0f - dy) * dx)
                  + LD8(xn, (y1 * W + x1) * C) * (real)(dy * dx);
    store8(y, (row * OW + ox) * C + c0, v, C - c0);
}
