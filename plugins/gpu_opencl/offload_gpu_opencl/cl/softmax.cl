// SOFTMAX over the last dimension, one row per item (beta == 1).
__kernel void softmax(__global const store_t* x, __global store_t* y, int total, int C) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int base = gid * C;
    float m = -FLT_MAX;
    for (int c = 0; c < C; ++c) {
        const float v = (float)LD(x, base + c);
        m = v > m ? v : m;
    }
    float s = 0.0f;
    for (int c = 0; c < C; ++c) s += exp((float)LD(x, base + c) - m);
    for (int c = 0; c < C; ++c) ST(y, base + c, (real)(exp((float)LD(x, base + c) - m) / s));
}
