// The second half of a split-K tiled GEMM (tgemm.cl): sums the S partial products of each
// output element, adds the bias and runs the epilogue. One work-item per element of y[M, Co],
// consecutive items on consecutive addresses. Compiled with -DTILED_GEMM only, as tgemm.cl.

#if defined(TILED_GEMM)
// @include epilogue1.cl

__kernel void tgemm_reduce(__global const float* part, __global const param_t* b,
        __global const store_t* res, __global const param_t* alpha, __global store_t* y,
        int M, int Co, int S, int YS, int YO, int act, int RC, int act2, int prelu) {
    const int i = get_global_id(0);
    if (i >= M * Co) return;
    const int MC = M * Co;
    float sum = 0.0f;
    for (int s = 0; s < S; ++s) sum += part[s * MC + i];
    const int row = i / Co, col = i % Co;
    epilogue1(y, row, col, YS, YO, (real)sum + LDP(b, col), act, res, RC, act2, alpha, prelu);
}
#endif
