// Register-blocked CONV_2D, a template instantiated once per (R, V) in _source.BLOCKINGS, as
// matmul.cl is.
/* General CONV_2D, weights [KH][KW][Ci][Co8]; as the matmul with K = KH*KW*Ci, reading input
   rows in place. Per kernel row: when every tap of the {R} pixels is inside the image (and
   dilation is 1) their KW*Ci inputs are contiguous, as are the weights, so one loop covers
   them; otherwise each tap is read alone, taps outside the image from `zero` (at least Ci
   zeros). One item: {R} output pixels x {V}*8 channels. */
__kernel void conv2d_{R}x{V}(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, __global const store_t* zero, __global const store_t* res, __global const param_t* alpha,
        __global store_t* y,
        int P, int H, int W, int Ci, int OH, int OW, int Co,
        int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL,
        int act, int RC, int act2, int prelu) {
// @include block_start.cl

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
            const int count = KW * Ci;
// @include accumulate.cl COUNT=count XR=xr WP=wk

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
            __global const param_t* wk = w + (ky * KW + kx) * Ci * Co8;
// @include accumulate.cl COUNT=Ci XR=xr WP=wk

        }
    }
// @include block_end.cl
}
