// One-input elementwise ops, 8 elements per item; fake_quant rounds to a quantized grid. The
// RELU family is act8's (prelude.cl), which passes NaN through as TFLite does.
__kernel void unary8(__global const store_t* x, __global store_t* y, int total, int op) {
    const int i = get_global_id(0) * 8;
    if (i >= total) return;
    real8 v = LD8(x, i);
    const real8 one = (real8)1;
    switch (op) {
        case 0: v = act8(v, 1); break;
        case 1: v = act8(v, 3); break;
        case 2: v = act8(v, 2); break;
        case 3: v = one / (one + exp(-v)); break;
        case 4: v = tanh(v); break;
        case 5: v = exp(v); break;
        /* HARD_SWISH in the order of LiteRT's vector lanes: (x / 6) * relu6(x + 3). */
        case 7: v = (v * (real8)(1.0f / 6.0f)) * clamp(v + (real8)3, (real8)0, (real8)6); break;
        default: break;
    }
    store8(y, i, v, total - i);
}
/* scale, zero point, qmin, qmax; rounds half away from zero (as TFLite), in float. */
__kernel void fake_quant(__global const store_t* x, __global store_t* y, int total,
                         float scale, float zp, float qmin, float qmax) {
    const int i = get_global_id(0);
    if (i >= total) return;
    float q = (float)LD(x, i) / scale;
    q = q < -1e9f ? -1e9f : (q > 1e9f ? 1e9f : q);   /* keep the int conversion defined */
    q = (float)(long)(q + (q >= 0.0f ? 0.5f : -0.5f)) + zp;
    q = q < qmin ? qmin : (q > qmax ? qmax : q);
    ST(y, i, (real)((q - zp) * scale));
}
