// DEPTHWISE_CONV_2D, any depth multiplier M: one output element per item; weights [KH][KW][Co].
__kernel void dwconv_any(__global const store_t* x, __global const param_t* w,
                         __global const param_t* b, __global store_t* y,
                         int total, int H, int W, int C, int OH, int OW, int Co, int M,
                         int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int co = gid % Co, p = gid / Co;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    int ci = co / M;
    real acc = LDP(b, co);
    for (int ky = 0; ky < KH; ++ky) {
        int iy = oy * SH - PT + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ox * SW - PL + kx * DW;
            if (ix < 0 || ix >= W) continue;
            acc += LD(x, ((n * H + iy) * W + ix) * C + ci) * LDP(w, (ky * KW + kx) * Co + co);
        }
    }
    ST(y, gid, act1(acc, act));
}
