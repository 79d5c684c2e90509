// DEPTH_TO_SPACE (NHWC, DCR order as TFLite): one output element per item,
// y[n][oh][ow][c] = x[n][oh / bs][ow / bs][((oh % bs) * bs + ow % bs) * Co + c].
__kernel void depth_to_space(__global const store_t* x, __global store_t* y, int total,
                             int OH, int OW, int Co, int bs) {
    const int gid = get_global_id(0);
    if (gid >= total) return;
    const int c = gid % Co;
    int t = gid / Co;
    const int ow = t % OW;
    t /= OW;
    const int oh = t % OH, n = t / OH;
    const int H = OH / bs, W = OW / bs, C = Co * bs * bs;
    ST(y, gid, LD(x, ((n * H + oh / bs) * W + ow / bs) * C + ((oh % bs) * bs + ow % bs) * Co + c));
}
