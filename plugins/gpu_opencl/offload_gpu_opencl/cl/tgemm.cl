// Tiled GEMM for GPUs (the "gpu" kernel family, see _tiling): 1x1 stride-1 CONV_2D and
// FULLY_CONNECTED as tgemm_*, every other CONV_2D as tconv_* (implicit GEMM: the input patch
// is gathered while the A tile loads, never materialised), and with -DFUSE_DW a 1x1 CONV_2D
// whose input is a DEPTHWISE_CONV_2D's output as tdw_* (the A tile computes the depthwise
// convolution as it loads: DW, with the window of the depthwise convolution in the conv
// geometry arguments and K its channels). A template instantiated once per
// (KIND, BM, BN, RM, RN) in _source.TEMPLATES, with AE = BM*16/256 A values and BE = 16*BN/256
// w values loaded per item and K step (array sizes must be constant expressions).
//
// y[M, Co] = A[M, K] @ w[K, Co8] + b, then the epilogue. A work-group of (BN/RN) x (BM/RM)
// items computes a BM x BN tile; each item RM x RN outputs, at rows ty + i*TY and columns
// tx + j*TX, so consecutive items read local memory and store global memory at consecutive
// addresses. Per step of TK along K, the group loads a TK x BM tile of A (consecutive items
// on consecutive k: an A row is contiguous in K) and a TK x BN tile of w (consecutive items
// on consecutive columns) into local memory. Any M, K, Co: loads past an edge read zero,
// stores past one are dropped.
//
// Compiled only with -DTILED_GEMM (the GPU family, _tiling.family_options): PoCL compiles every
// kernel of a program when its binary is taken, and these cost it ~20 s, on every CPU-family
// cold start, for kernels that family never launches.
//
// Split-K: the NDRange's third dimension slices K into runs of KS (a multiple of TK). With one
// slice the group applies bias and epilogue and stores y; with several it stores raw partial
// sums to part[slice][M][Co], and the last of a tile's groups to finish (counted in count[],
// zero before the launch and left zero after it) adds the slices up in slice order and runs
// the epilogue: no second launch, which on an H100 cost as much as the product's own for most
// split products. Output rows are YS apart from channel YO on (see epilogue1.cl): a
// CONCATENATION input is written in place.
//
// A gated product (tgemm only): with GP > 0 the A loader multiplies x by gate[image][k]
// as it loads, the rows of each image being GP consecutive rows of A, then applies gact, as
// the MUL it replaces would (a squeeze-excite block's x * gate, read by a 1x1 CONV_2D).

#if defined(TILED_GEMM) && (!{DW} || defined(FUSE_DW))
// @include epilogue1.cl

__attribute__((reqd_work_group_size({BN} / {RN}, {BM} / {RM}, 1)))
__kernel void t{KIND}_{BM}x{BN}(__global const store_t* x, __global const param_t* w,
        __global const param_t* b, __global const store_t* res, __global const param_t* alpha,
#if !{CONV}
        __global const store_t* gate,
#endif
#if {DW}
        __global const param_t* dww, __global const param_t* dwb,
#endif
        __global store_t* y, __global float* part, __global int* count,
        int M, int K, int Co, int H, int W, int Ci, int OH, int OW,
        int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL, int KS, int YS, int YO,
        int act, int RC, int act2, int prelu, int RP, int ROW
#if {DW}
        , int dwact
#elif !{CONV}
        , int GP, int gact
#endif
        ) {
    const int TX = {BN} / {RN}, TY = {BM} / {RM}, NT = TX * TY, TK = 16;
    /* A tile stored k-major, one column of padding so the k-consecutive stores of the loader
       fall in different local memory banks. */
    __local real As[16][{BM} + 1];
    __local real Bs[16][{BN}];
    __local int finisher;
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * TX + tx;
    const int n0 = get_group_id(0) * {BN}, m0 = get_group_id(1) * {BM};
    const int Co8 = ((Co + 7) >> 3) << 3;
    const int kbeg = get_group_id(2) * KS, kend = IMIN(K, kbeg + KS);

    /* The A loader: this item loads column ak of rows ar + e * (NT / TK); what a row needs
       (its input offset, or for tconv its window origin) is worked out once. */
    const int ak = lid % TK, ar = lid / TK;
    int abase[{AE}];
    bool arow[{AE}];
#if {CONV}
    int aiy[{AE}], aix[{AE}];
#else
    int agate[{AE}];
#endif
    #pragma unroll
    for (int e = 0; e < {AE}; ++e) {
        const int m = m0 + ar + e * (NT / TK);
        arow[e] = m < M;
        const int mm = IMIN(m, M - 1);
#if {CONV}
        const int ox = mm % OW, t = mm / OW;
        aiy[e] = (t % OH) * SH - PT;
        aix[e] = ox * SW - PL;
        abase[e] = (t / OH) * H;
#else
        abase[e] = mm * K;
        agate[e] = GP > 0 ? (mm / GP) * K : 0;
#endif
    }
    /* The w loader: column bn of rows bk + e * (NT / BN). */
    const int bn = lid % {BN}, bk = lid / {BN};
    const bool bcol = n0 + bn < Co8;

    real acc[{RM}][{RN}];
    #pragma unroll
    for (int i = 0; i < {RM}; ++i) {
        #pragma unroll
        for (int j = 0; j < {RN}; ++j) acc[i][j] = (real)0;
    }

    for (int k0 = kbeg; k0 < kend; k0 += TK) {
        const int kg = k0 + ak;
        const bool kin = kg < kend;
#if {DW}
        const int C8 = ((Ci + 7) >> 3) << 3;
#elif {CONV}
        const int ci = kg % Ci, tap = kg / Ci, kx = tap % KW, ky = tap / KW;
#endif
        #pragma unroll
        for (int e = 0; e < {AE}; ++e) {
            real v = (real)0;
#if {DW}
            /* The depthwise convolution's output at this row's pixel, channel kg, computed
               here as dwconv computes it (bias, then the taps in order, then its activation):
               the 1x1 product reads it without its own launch or buffer. */
            if (arow[e] && kin) {
                real acc = LDP(dwb, kg);
                for (int ky = 0; ky < KH; ++ky) {
                    const int iy = aiy[e] + ky * DH;
                    if (iy < 0 || iy >= H) continue;
                    for (int kx = 0; kx < KW; ++kx) {
                        const int ix = aix[e] + kx * DW;
                        if (ix < 0 || ix >= W) continue;
                        acc += LD(x, ((abase[e] + iy) * W + ix) * Ci + kg)
                               * LDP(dww, (ky * KW + kx) * C8 + kg);
                    }
                }
                v = act1(acc, dwact);
            }
#elif {CONV}
            const int iy = aiy[e] + ky * DH, ix = aix[e] + kx * DW;
            if (arow[e] && kin && iy >= 0 && iy < H && ix >= 0 && ix < W)
                v = LD(x, ((abase[e] + iy) * W + ix) * Ci + ci);
#else
            if (arow[e] && kin) {
                v = LD(x, abase[e] + kg);
                if (GP > 0) v = act1(v * LD(gate, agate[e] + kg), gact);
            }
#endif
            As[ak][ar + e * (NT / TK)] = v;
        }
        #pragma unroll
        for (int e = 0; e < {BE}; ++e) {
            const int k = k0 + bk + e * (NT / {BN});
            Bs[bk + e * (NT / {BN})][bn] = (bcol && k < kend) ? LDP(w, k * Co8 + n0 + bn) : (real)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        #pragma unroll
        for (int kk = 0; kk < TK; ++kk) {
            real a[{RM}], bv[{RN}];
            #pragma unroll
            for (int i = 0; i < {RM}; ++i) a[i] = As[kk][ty + i * TY];
            #pragma unroll
            for (int j = 0; j < {RN}; ++j) bv[j] = Bs[kk][tx + j * TX];
            #pragma unroll
            for (int i = 0; i < {RM}; ++i) {
                #pragma unroll
                for (int j = 0; j < {RN}; ++j) acc[i][j] += a[i] * bv[j];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    const int slices = get_num_groups(2), MC = M * Co;
    if (slices == 1) {
        #pragma unroll
        for (int i = 0; i < {RM}; ++i) {
            const int row = m0 + ty + i * TY;
            #pragma unroll
            for (int j = 0; j < {RN}; ++j) {
                const int col = n0 + tx + j * TX;
                if (row < M && col < Co)
                    epilogue1(y, row, col, YS, YO, acc[i][j] + LDP(b, col), act, res, RC, act2,
                              alpha, prelu, RP, ROW);
            }
        }
    } else {
        /* No early return around these barriers, and no unroll pragma on the finishing
           loops (they read memory, not the accumulators): with either, PoCL's CPU driver
           corrupted memory on 16 x 64 tiles. The store loop is unrolled so that the
           accumulators stay in registers. */
        __global float* slice = part + get_group_id(2) * MC;
        #pragma unroll
        for (int i = 0; i < {RM}; ++i) {
            const int row = m0 + ty + i * TY;
            #pragma unroll
            for (int j = 0; j < {RN}; ++j) {
                const int col = n0 + tx + j * TX;
                if (row < M && col < Co) slice[row * Co + col] = (float)acc[i][j];
            }
        }
        /* Each item's partial sums visible device-wide before the group is counted; the group
           that counts last finds every other slice's sums written. */
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
        if (lid == 0) {
            const int tile = get_group_id(1) * get_num_groups(0) + get_group_id(0);
            const int last = atomic_inc(count + tile) == slices - 1;
            if (last) atomic_xchg(count + tile, 0);
            finisher = last;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (finisher) {
            mem_fence(CLK_GLOBAL_MEM_FENCE);
            /* volatile: other groups wrote these; a cached line must not answer. */
            __global volatile const float* parts = part;
            for (int i = 0; i < {RM}; ++i) {
                const int row = m0 + ty + i * TY;
                for (int j = 0; j < {RN}; ++j) {
                    const int col = n0 + tx + j * TX;
                    if (row < M && col < Co) {
                        float sum = 0.0f;
                        for (int s = 0; s < slices; ++s) sum += parts[s * MC + row * Co + col];
                        epilogue1(y, row, col, YS, YO, (real)sum + LDP(b, col), act, res, RC,
                                  act2, alpha, prelu, RP, ROW);
                    }
                }
            }
        }
    }
}
#endif
