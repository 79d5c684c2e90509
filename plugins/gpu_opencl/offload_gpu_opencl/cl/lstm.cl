// The gates of the BASIC LSTM cell (op version 2), after its concatenation and matmul:
// pre[B][4*O] holds the input gate, new input, forget gate and output gate blocks of each
// row. state = sigmoid(i) * tanh(n) + sigmoid(f) * c_prev, activation = sigmoid(o) *
// tanh(state), stored in the outputs and also in h_wb and c_wb (the previous
// activation and state: the cell's persistent state, as LiteRT's CPU kernel writes it).
// c_wb may be c_prev: each item reads its elements before writing them. Lanes past O
// read the next row (or the slack) and are dropped. NDRange: (ceil(O / 8), B).
INLINE real8 sigmoid8(real8 v) { return (real8)1 / ((real8)1 + exp(-v)); }
__kernel void lstm_gates(__global const store_t* pre, __global const store_t* c_prev,
                         __global store_t* act_out, __global store_t* state_out,
                         __global store_t* h_wb, __global store_t* c_wb, int B, int O) {
    const int c0 = get_global_id(0) * 8, row = get_global_id(1);
    if (c0 >= O || row >= B) return;
    __global const store_t* g = pre + row * 4 * O + c0;
    const int at = row * O + c0, n = O - c0;
    const real8 state = sigmoid8(LD8(g, 0)) * tanh(LD8(g, O))
                      + sigmoid8(LD8(g, 2 * O)) * LD8(c_prev, at);
    const real8 activ = sigmoid8(LD8(g, 3 * O)) * tanh(state);
    store8(state_out, at, state, n);
    store8(act_out, at, activ, n);
    store8(h_wb, at, activ, n);
    store8(c_wb, at, state, n);
}
