// The accumulation loop shared by matmul and conv2d: acc[j][v] += x_j[q] * w[q][v-th block]
// for q < COUNT, with x_j = XR[j] and weights at WP (row stride Co8); the including line
// names COUNT, XR and WP. With X_BY_8 (half storage on CPUs) x is converted 8 values at a
// time.
        int q = 0;
#if defined(X_BY_8)
        for (; q + 8 <= COUNT; q += 8) {
            real8 xv[{R}];
            #pragma unroll
            for (int j = 0; j < {R}; ++j) xv[j] = LD8(XR[j], q);
            #pragma unroll
            for (int qq = 0; qq < 8; ++qq) {
                real8 wv[{V}];
                #pragma unroll
                for (int v = 0; v < {V}; ++v) wv[v] = LDP8(WP, (q + qq) * Co8 + co[v]);
                #pragma unroll
                for (int j = 0; j < {R}; ++j) {
                    #pragma unroll
                    for (int v = 0; v < {V}; ++v) acc[j][v] += xv[j][qq] * wv[v];
                }
            }
        }
#endif
        for (; q < COUNT; ++q) {
            real8 wv[{V}];
            #pragma unroll
            for (int v = 0; v < {V}; ++v) wv[v] = LDP8(WP, q * Co8 + co[v]);
            #pragma unroll
            for (int j = 0; j < {R}; ++j) {
                const real xv = LD(XR[j], q);
                #pragma unroll
                for (int v = 0; v < {V}; ++v) acc[j][v] += xv * wv[v];
            }
        }
