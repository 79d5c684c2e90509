// TRANSPOSE_CONV: weights in TFLite's [Co][KH][KW][Ci]; one output element per item.
__kernel void transpose_conv(__global const store_t* x, __global const param_t* w,
                             __global const param_t* b, __global store_t* y,
                             int total, int H, int W, int Ci, int OH, int OW, int Co,
                             int KH, int KW, int SH, int SW, int PT, int PL, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int co = gid % Co, p = gid / Co;
    int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;
    real acc = LDP(b, co);
    for (int ky = 0; ky < KH; ++ky) {
        int ny = oy + PT - ky;
        if (ny < 0 || ny % SH != 0) continue;
        int iy = ny / SH;
        if (iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int nx = ox + PL - kx;
            if (nx < 0 || nx % SW != 0) continue;
            int ix = nx / SW;
            if (ix >= W) continue;
            int xb = ((n * H + iy) * W + ix) * Ci, wb = ((co * KH + ky) * KW + kx) * Ci;
            for (int ci = 0; ci < Ci; ++ci) acc += LD(x, xb + ci) * LDP(w, wb + ci);
        }
    }
    ST(y, gid, act1(acc, act));
}
