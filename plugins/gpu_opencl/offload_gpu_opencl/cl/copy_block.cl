// CONCATENATION, one launch per input: copy [outer, inner] into [outer, inner_out] at offset.
__kernel void copy_block(__global const store_t* x, __global store_t* y, int total,
                         int inner, int inner_out, int offset) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int o = gid / inner, r = gid % inner;
    ST(y, o * inner_out + offset + r, LD(x, gid));
}
