// STRIDED_SLICE (4-D): y[i] = x[base + sum(i_d * m_d)].
__kernel void gather4(__global const store_t* x, __global store_t* y, int total,
                      int d1, int d2, int d3, int base, int m0, int m1, int m2, int m3) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int c3 = gid % d3, t = gid / d3, c2 = t % d2; t /= d2;
    int c1 = t % d1, c0 = t / d1;
    ST(y, gid, LD(x, base + c0 * m0 + c1 * m1 + c2 * m2 + c3 * m3));
}
