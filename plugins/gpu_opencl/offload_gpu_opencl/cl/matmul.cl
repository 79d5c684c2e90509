// Register-blocked matmul (FULLY_CONNECTED, 1x1 CONV_2D, the BASIC LSTM's gate matmul), a
// template instantiated once per (R, V) in _source.BLOCKINGS: {R} and {V} are replaced, each
// "// @include" line by that file of cl/parts (its NAME=value tokens replaced as well).
/* y[P, Co] = x[P, K] @ w[K, Co8] + b, then the epilogue. One item: {R} rows x {V}*8 channels
   (register blocked). NDRange: (channel blocks / {V}, row blocks). */
__kernel void matmul_{R}x{V}(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, __global const store_t* res, __global const param_t* alpha,
        __global store_t* y,
        int P, int K, int Co, int act, int RC, int act2, int prelu) {
// @include block_start.cl

    __global const store_t* xr[{R}];
    #pragma unroll
    for (int j = 0; j < {R}; ++j) xr[j] = x + IMIN(p0 + j, P - 1) * K;
    {
// @include accumulate.cl COUNT=K XR=xr WP=w
    }
// @include block_end.cl
}
