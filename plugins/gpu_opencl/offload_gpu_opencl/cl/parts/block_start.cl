// Start of a register-blocked kernel (matmul, conv2d): this item's R x V blocks, with the
// accumulators starting at the bias.
    const int CB = (Co + 7) >> 3, Co8 = CB << 3;
    const int cb = get_global_id(0) * {V}, p0 = get_global_id(1) * {R};
    if (cb >= CB || p0 >= P) return;
    int co[{V}];
    real8 acc[{R}][{V}];
    #pragma unroll
    for (int v = 0; v < {V}; ++v) {
        co[v] = IMIN(cb + v, CB - 1) * 8;
        const real8 bias = LDP8(b, co[v]);
        #pragma unroll
        for (int j = 0; j < {R}; ++j) acc[j][v] = bias;
    }
