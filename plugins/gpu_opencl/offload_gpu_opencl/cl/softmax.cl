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

/* The GPU family's SOFTMAX: one row per group of 64 items (a classifier's single row of 1000
   would otherwise run on one item, ~90 us on an H100). Items stride over the row; the max and
   the sum are reduced in local memory.
   No early return, and every loop's trip count is the group's, not the item's (items off the
   row are masked inside): Debian's PoCL 3.1 (LLVM 15) vectorizes each region between barriers
   across items, and an early return joined with a per-item trip count in the last region made
   it scatter stores out of bounds (a segfault on rows shorter than 64). */
__attribute__((reqd_work_group_size(64, 1, 1)))
__kernel void softmax_rows(__global const store_t* x, __global store_t* y, int total, int C) {
    __local float red[64];
    const int row = get_group_id(0), lid = get_local_id(0);
    /* A group past the last row (none with the launch's exact grid) reads and writes nothing,
       and still reaches every barrier. */
    const int n = row < total ? C : 0, base = row * C;
    float m = -FLT_MAX;
    for (int c0 = 0; c0 < n; c0 += 64) {
        const int c = c0 + lid;
        if (c < n) {
            const float v = (float)LD(x, base + c);
            m = v > m ? v : m;
        }
    }
    red[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = 32; span > 0; span >>= 1) {
        if (lid < span) red[lid] = red[lid + span] > red[lid] ? red[lid + span] : red[lid];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float s = 0.0f;
    for (int c0 = 0; c0 < n; c0 += 64) {
        const int c = c0 + lid;
        if (c < n) s += exp((float)LD(x, base + c) - m);
    }
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = 32; span > 0; span >>= 1) {
        if (lid < span) red[lid] += red[lid + span];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    s = red[0];
    for (int c0 = 0; c0 < n; c0 += 64) {
        const int c = c0 + lid;
        if (c < n) ST(y, base + c, (real)(exp((float)LD(x, base + c) - m) / s));
    }
}
