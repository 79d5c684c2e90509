// MAX_POOL_2D (kind 0) and AVERAGE_POOL_2D (kind 1; padding excluded from the count).
// One item: 8 channels of one output pixel. NDRange: (channel blocks, OW, N*OH).
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
