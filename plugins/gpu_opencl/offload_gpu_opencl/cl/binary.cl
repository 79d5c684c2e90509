// Two-input elementwise ops. binary8: y viewed as rows of C elements, 8 per item; an input
// with row stride 0 repeats one row (per-channel broadcast), one with lane step 0 is a
// scalar. NDRange: (ceil(C / 8), rows). binary: any 4-D broadcast, one element per item.
INLINE real binop(real a, real b, int op) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a > b ? a : b;
        case 4: return a < b ? a : b;
        case 5: return a >= (real)0 ? a : a * b;
        case 6: return (a != (real)0 && b != (real)0) ? (real)1 : (real)0;
        default: return a;
    }
}
INLINE real8 binop8(real8 a, real8 b, int op) {
    const real8 zero = (real8)0;
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a > b ? a : b;
        case 4: return a < b ? a : b;
        case 5: return a >= zero ? a : a * b;
        case 6: return ((a != zero) & (b != zero)) ? (real8)1 : zero;
        default: return a;
    }
}
__kernel void binary(__global const store_t* a, __global const store_t* b, __global store_t* y,
                     int total, int d1, int d2, int d3,
                     int sa0, int sa1, int sa2, int sa3, int sb0, int sb1, int sb2, int sb3,
                     int op, int act) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int i3 = gid % d3, t = gid / d3, i2 = t % d2; t /= d2;
    int i1 = t % d1, i0 = t / d1;
    real va = LD(a, i0 * sa0 + i1 * sa1 + i2 * sa2 + i3 * sa3);
    real vb = LD(b, i0 * sb0 + i1 * sb1 + i2 * sb2 + i3 * sb3);
    ST(y, gid, act1(binop(va, vb, op), act));
}
__kernel void binary8(__global const store_t* a, __global const store_t* b,
                      __global store_t* y, int rows, int C, int ra, int la, int rb, int lb,
                      int op, int act) {
    const int c0 = get_global_id(0) * 8, row = get_global_id(1);
    if (c0 >= C || row >= rows) return;
    const real8 va = la ? LD8(a, row * ra + c0) : (real8)LD(a, row * ra);
    const real8 vb = lb ? LD8(b, row * rb + c0) : (real8)LD(b, row * rb);
    store8(y, row * C + c0, act8(binop8(va, vb, op), act), C - c0);
}
