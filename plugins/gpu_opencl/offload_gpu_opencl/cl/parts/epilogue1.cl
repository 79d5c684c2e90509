// The convolution epilogue for one output element, as epilogue8 (prelude.cl) does for eight:
// fused activation, residual ADD of res[p][c] when RC > 0 (channels past RC read as zero),
// the ADD's activation, PRELU. With RP > 0 (RP = 2 only) the residual is a MAX_POOL_2D of
// res (2 x 2 windows, stride 2, no padding, no activation, ROW output pixels per row), taken
// as the pool kernel takes it (the same comparisons in the same order, then its clamp to the
// finite range), so the pool needs no launch and its output is never stored. Output pixel p = (image * OH + oy) *
// ROW + ox has its window's corner at input pixel 2p + 2 ROW (p / ROW): one division. A loop
// over any window, with the image, row and column worked out apart and the activation by
// act1, inlined into every tiled kernel, cost PoCL a fifth more compile time for each
// GPU-family program. The tiled kernels
// store one element per (row, column) so that consecutive work-items write consecutive
// addresses. The output pixel's row
// starts at y[p * YS + YO]: YS = Co and YO = 0 for an output of its own, the concatenation's
// channels and this input's channel offset when it is written straight into a
// CONCATENATION's output.
// Guarded: several families include it.
#ifndef OFFLOAD_EPILOGUE1
#define OFFLOAD_EPILOGUE1
INLINE void epilogue1(__global store_t* y, int p, int c, int YS, int YO, real v, int act,
                      __global const store_t* res, int RC, int act2,
                      __global const param_t* alpha, int prelu, int RP, int ROW) {
    v = act1(v, act);
    if (RC > 0) {
        real r = (real)0;
        if (c < RC && RP > 0) {
            const int row = 2 * ROW * RC, at = (2 * p + 2 * ROW * (p / ROW)) * RC + c;
            const real e0 = LD(res, at), e1 = LD(res, at + RC);
            const real e2 = LD(res, at + row), e3 = LD(res, at + row + RC);
            r = (real)(-REAL_MAX);
            r = e0 > r ? e0 : r;
            r = e1 > r ? e1 : r;
            r = e2 > r ? e2 : r;
            r = e3 > r ? e3 : r;
            r = r > REAL_MAX ? REAL_MAX : r;
        } else if (c < RC) {
            r = LD(res, p * RC + c);
        }
        v = act1(v + r, act2);
    }
    if (prelu) {
        const real a = LDP(alpha, c);
        v = v >= (real)0 ? v : v * a;
    }
    ST(y, p * YS + YO + c, v);
}
#endif
