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

/* The GPU family's MEAN over H and W: one group of 64 items per 8 channels of one image (the
   pool kernel gives each output one item, which then walks a whole 56x56 image alone). Items
   stride over the pixels; their sums are added in local memory, then divided by H * W.
   NDRange: (channel blocks * 64, N), groups (64, 1). The pixel loop runs the group's trips on
   every item, masked past the image, as softmax_rows's must for Debian's PoCL 3.1 (softmax.cl). */
__attribute__((reqd_work_group_size(64, 1, 1)))
__kernel void mean_hw(__global const store_t* x, __global store_t* y, int HW, int C, int act) {
    __local real8 red[64];
    const int c0 = get_group_id(0) * 8, n = get_group_id(1), lid = get_local_id(0);
    const int base = n * HW * C + c0;
    real8 acc = (real8)0;
    for (int p0 = 0; p0 < HW; p0 += 64) {
        const int p = p0 + lid;
        if (p < HW) acc += LD8(x, base + p * C);
    }
    red[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = 32; span > 0; span >>= 1) {
        if (lid < span) red[lid] += red[lid + span];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) store8(y, n * C + c0, act8(red[0] / (real)HW, act), C - c0);
}
