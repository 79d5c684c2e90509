// A squeeze-excite block's gate in one launch (GPU family, _fusion's fuse_gates): the MEAN of
// x [N, HW, C] over its pixels (m), a 1x1 CONV_2D of m (h = m @ w1 + b1 and its epilogue),
// and a 1x1 CONV_2D of h (g = h @ w2 + b2 and its epilogue), which MobileNetV3 otherwise
// spends three dependent launches on, each a few microseconds of work on vectors of a few
// hundred values. One work-group per image. Each stage computes as the kernel it stands for:
// the mean as mean_hw (per 8 channels, 64 strided partial sums then a tree), each product as
// a single-slice tgemm (k in order, then the bias, then epilogue1), and each result is
// stored to its own tensor and read back from there, so every rounding to the storage type
// happens where it does unfused. A global-memory barrier orders the stages: only this group
// reads what it wrote. _fusion bounds the products' size, since one group does all of it.

#ifdef TILED_GEMM
// @include epilogue1.cl

/* One image's row of a 1x1 product, a[n][K] @ w[K][Co8] + b and its epilogue, by the
   group's 256 items: as a single-slice tgemm sums it (k in order, then the bias). */
INLINE void se_product(__global store_t* a, int K, __global const param_t* w,
                       __global const param_t* b, __global store_t* y, int n, int Co, int act,
                       __global const store_t* res, int RC, int act2,
                       __global const param_t* alpha, int prelu) {
    const int Co8 = ((Co + 7) >> 3) << 3;
    for (int c = get_local_id(0); c < Co; c += 256) {
        real acc = (real)0;
        for (int k = 0; k < K; ++k) acc += LD(a, n * K + k) * LDP(w, k * Co8 + c);
        epilogue1(y, n, c, Co, 0, acc + LDP(b, c), act, res, RC, act2, alpha, prelu, 0, 0);
    }
}

__attribute__((reqd_work_group_size(256, 1, 1)))
__kernel void se_gate(__global const store_t* x,
        __global const param_t* w1, __global const param_t* b1, __global const store_t* res1,
        __global const param_t* alpha1,
        __global const param_t* w2, __global const param_t* b2, __global const store_t* res2,
        __global const param_t* alpha2,
        __global store_t* m, __global store_t* h, __global store_t* g,
        int HW, int C, int mact, int S, int act1, int RC1, int act21, int prelu1,
        int C2, int act2, int RC2, int act22, int prelu2) {
    __local real8 red[4][64];
    const int lid = get_local_id(0), n = get_group_id(1);
    /* Four groups of 64 items, each on one 8-channel block at a time. */
    const int sub = lid >> 6, l = lid & 63, CB = (C + 7) >> 3;
    for (int cb0 = 0; cb0 < CB; cb0 += 4) {
        const int cb = cb0 + sub;
        real8 acc = (real8)0;
        if (cb < CB) {
            const int base = n * HW * C + cb * 8;
            for (int p = l; p < HW; p += 64) acc += LD8(x, base + p * C);
        }
        red[sub][l] = acc;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int span = 32; span > 0; span >>= 1) {
            if (l < span) red[sub][l] += red[sub][l + span];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (l == 0 && cb < CB)
            store8(m, n * C + cb * 8, act8(red[sub][0] / (real)HW, mact), C - cb * 8);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    barrier(CLK_GLOBAL_MEM_FENCE);

    se_product(m, C, w1, b1, h, n, S, act1, res1, RC1, act21, alpha1, prelu1);
    barrier(CLK_GLOBAL_MEM_FENCE);
    se_product(h, S, w2, b2, g, n, C2, act2, res2, RC2, act22, alpha2, prelu2);
}
#endif
