// DEPTH_TO_SPACE (NHWC, DCR order as TFLite): one item moves 8 channels of one output pixel,
// y[n][oh][ow][c] = x[n][oh / bs][ow / bs][((oh % bs) * bs + ow % bs) * Co + c]: the Co
// channels of an output pixel are contiguous in the input too. NDRange: (channel blocks, OW,
// N*OH), as the pool kernel.
__kernel void depth_to_space(__global const store_t* x, __global store_t* y,
                             int OH, int OW, int Co, int bs) {
    const int cb = get_global_id(0), ow = get_global_id(1), row = get_global_id(2);
    if (cb * 8 >= Co || ow >= OW) return;
    const int c0 = cb * 8, oh = row % OH, n = row / OH;
    const int H = OH / bs, W = OW / bs, C = Co * bs * bs;
    const int src = ((n * H + oh / bs) * W + ow / bs) * C + ((oh % bs) * bs + ow % bs) * Co + c0;
    store8(y, (row * OW + ow) * Co + c0, LD8(x, src), Co - c0);
}
