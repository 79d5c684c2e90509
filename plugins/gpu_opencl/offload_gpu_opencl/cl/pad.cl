// PAD with zeros (4-D): pad amounts before each dimension.
__kernel void pad(__global const store_t* x, __global store_t* y, int total,
                  int i0, int i1, int i2, int i3, int o1, int o2, int o3,
                  int p0, int p1, int p2, int p3) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int c3 = gid % o3, t = gid / o3, c2 = t % o2; t /= o2;
    int c1 = t % o1, c0 = t / o1;
    c0 -= p0; c1 -= p1; c2 -= p2; c3 -= p3;
    real v = (real)0;
    if (c0 >= 0 && c0 < i0 && c1 >= 0 && c1 < i1 && c2 >= 0 && c2 < i2 && c3 >= 0 && c3 < i3)
        v = LD(x, ((c0 * i1 + c1) * i2 + c2) * i3 + c3);
    ST(y, gid, v);
}
