// DEPTHWISE_CONV_2D 3x3 with the weights in registers, a template instantiated per stride:
// {S} (1 or 2) and {SPAN} (the input columns 4 output pixels read: 3 + 3 * {S}) are replaced.
/* DEPTHWISE_CONV_2D 3x3, stride {S}, dilation 1, multiplier 1; weights [3][3][C8] held in
   registers. One item: 8 channels x 4 adjacent output pixels of one row, which share
   {SPAN} input columns per kernel row. NDRange: (channel blocks, x blocks, N*OH). */
__kernel void dw3x3_s{S}(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, __global const store_t* zero, __global const store_t* res, __global const param_t* alpha,
        __global store_t* y,
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
