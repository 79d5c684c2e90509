// DEPTHWISE_CONV_2D with depth multiplier 1, any kernel/stride/dilation: weights [KH][KW][C8];
// one item: 8 channels of one pixel. NDRange: (channel blocks, OW, N*OH).
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
