// End of a register-blocked kernel: the accumulators are copied out with constant indices (so
// acc[][] stays in registers) and the epilogue runs in a rolled loop, one inlined copy instead
// of R*V (compile time halves); it stores the R x V blocks that exist.
    real8 out[{R} * {V}];
    #pragma unroll
    for (int j = 0; j < {R}; ++j) {
        #pragma unroll
        for (int v = 0; v < {V}; ++v) out[j * {V} + v] = acc[j][v];
    }
    #pragma nounroll
    for (int i = 0; i < {R} * {V}; ++i) {
        const int j = i / {V}, v = i % {V};
        if (p0 + j < P && cb + v < CB)
            epilogue8(y, p0 + j, (cb + v) * 8, Co, out[i], act, res, RC, act2, alpha, prelu);
    }
