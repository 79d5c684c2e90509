// The convolution epilogue for one output element, as epilogue8 (prelude.cl) does for eight:
// fused activation, residual ADD of res[p][c] when RC > 0 (channels past RC read as zero),
// the ADD's activation, PRELU. With RP > 0 the residual is a MAX_POOL_2D of res (RP x RP
// windows, stride RP, no padding; output pixel p of ROH x ROW per image), taken as the pool
// kernel takes it (the same comparisons, then its activation ract), so the pool needs no
// launch and its output is never stored. The tiled kernels store one element per (row,
// column) so that consecutive work-items write consecutive addresses. The output pixel's row
// starts at y[p * YS + YO]: YS = Co and YO = 0 for an output of its own, the concatenation's
// channels and this input's channel offset when it is written straight into a
// CONCATENATION's output.
// Guarded: several families include it.
#ifndef OFFLOAD_EPILOGUE1
#define OFFLOAD_EPILOGUE1
INLINE void epilogue1(__global store_t* y, int p, int c, int YS, int YO, real v, int act,
                      __global const store_t* res, int RC, int act2,
                      __global const param_t* alpha, int prelu, int RP, int ROH, int ROW,
                      int ract) {
    v = act1(v, act);
    if (RC > 0) {
        real r = (real)0;
        if (c < RC && RP > 0) {
            const int ox = p % ROW, t = p / ROW, oy = t % ROH, IW = ROW * RP;
            const int corner = ((t / ROH) * ROH * RP + oy * RP) * IW + ox * RP;
            r = (real)(-REAL_MAX);
            for (int dy = 0; dy < RP; ++dy)
                for (int dx = 0; dx < RP; ++dx) {
                    const real e = LD(res, (corner + dy * IW + dx) * RC + c);
                    r = e > r ? e : r;
                }
            r = act1(r, ract);
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
