// The convolution epilogue for one output element, as epilogue8 (prelude.cl) does for eight:
// fused activation, residual ADD of res[p][c] when RC > 0 (channels past RC read as zero),
// the ADD's activation, PRELU. The tiled kernels store one element per (row, column) so that
// consecutive work-items write consecutive addresses. The output pixel's row starts at
// y[p * YS + YO]: YS = Co and YO = 0 for an output of its own, the concatenation's channels and
// this input's channel offset when it is written straight into a CONCATENATION's output.
// Guarded: several families include it.
#ifndef OFFLOAD_EPILOGUE1
#define OFFLOAD_EPILOGUE1
INLINE void epilogue1(__global store_t* y, int p, int c, int YS, int YO, real v, int act,
                      __global const store_t* res, int RC, int act2,
                      __global const param_t* alpha, int prelu) {
    v = act1(v, act);
    if (RC > 0) {
        const real r = c < RC ? LD(res, p * RC + c) : (real)0;
        v = act1(v + r, act2);
    }
    if (prelu) {
        const real a = LDP(alpha, c);
        v = v >= (real)0 ? v : v * a;
    }
    ST(y, p * YS + YO + c, v);
}
#endif
