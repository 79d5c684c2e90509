"""LSTM: one step of a full LSTM cell (float, or hybrid int8 weights; see ``_lstm.py``), or of
the 5-input BASIC cell (float or uint8; see ``_lstm_basic.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._lstm import CELL_STATE, OUTPUT_STATE, LstmKernelMixin
from offload.ops._lstm_basic import BasicLstm, check_shapes, is_basic
from offload.ops._registry import register
from offload.ops._types import accepts, one_of

# Input positions of the full cell by the shape they must have (``_lstm.py`` lists them).
_BY_INPUT = (1, 2, 3)  # input-to-{input, forget, cell} weights: [n_cell, n_input]
_BY_OUTPUT = (5, 6, 7)  # recurrent-to-{input, forget, cell} weights: [n_cell, n_output]
_PER_CELL = (9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23)  # peepholes, biases, layer norms
_PROJECTION, _PROJECTION_BIAS = 16, 17


def lstm_cell_dims(ctx: ShapeContext, n_input: int) -> tuple[int, int]:
    """(n_cell, n_output) of a full LSTM cell's weights, after LiteRT's checks of every present
    weight, peephole, bias, projection and layer-norm shape against them (inputs 1-17, 20-23)."""
    w, r = ctx.shape(4), ctx.shape(8)
    check_shape(
        len(w) == 2 and w[1] == n_input,
        f"expected input-to-output weights of shape [n_cell, {n_input}], found {list(w)}",
    )
    n_cell = w[0]
    check_shape(
        len(r) == 2 and r[0] == n_cell,
        f"expected recurrent-to-output weights of shape [{n_cell}, n_output], found {list(r)}",
    )
    n_output = r[1]
    expected: dict[int, Shape] = {i: (n_cell, n_input) for i in _BY_INPUT}
    expected |= {i: (n_cell, n_output) for i in _BY_OUTPUT}
    expected |= {i: (n_cell,) for i in _PER_CELL}
    expected |= {_PROJECTION: (n_output, n_cell), _PROJECTION_BIAS: (n_output,)}
    for position, shape in expected.items():
        if ctx.has(position):
            check_shape(
                ctx.shape(position) == shape,
                f"expected input {position} of shape {list(shape)} (n_cell {n_cell}, n_input "
                f"{n_input}, n_output {n_output}), found {list(ctx.shape(position))}",
            )
    return n_cell, n_output


@register
class Lstm(LstmKernelMixin, OpKernel):
    op = "LSTM"
    max_version = 4
    types = accepts("FLOAT32", "INT8 UINT8 INT16", output=one_of("FLOAT32", "INT8 UINT8 INT16"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None] | None:
        if is_basic(ctx.options):
            check_shape(len(ctx.shapes) == 5, f"expected 5 inputs, found {len(ctx.shapes)}")
            x, h, *rest = (ctx.shape(i) for i in range(5))
            check_shapes([x, h, *rest], "inputs")
            batch, depth, units = x[0], x[1], h[1]
            return [(batch, units), (batch, units), (batch, depth + units), (batch, 4 * units)]
        if ctx.options.get("diagonal_recurrent_tensors", False):
            return None  # 1-D recurrent weights: setup refuses the variant, no rule needed
        check_shape(
            len(ctx.shapes) in (20, 24),
            f"expected 20 or 24 inputs for the full LSTM kernel (kernel_type FULL), found "
            f"{len(ctx.shapes)}",
        )
        x = ctx.shape(0)
        check_shape(len(x) == 2, f"expected a 2-D input [batch, n_input], found {list(x)}")
        n_cell, n_output = lstm_cell_dims(ctx, x[1])
        for position, size in ((OUTPUT_STATE, n_output), (CELL_STATE, n_cell)):
            # LiteRT checks the states' element counts only; run() reshapes them.
            state = ctx.shape(position)
            check_shape(
                math.prod(state) == x[0] * size,
                f"expected state input {position} of {x[0]} x {size} elements, found {list(state)}",
            )
        return [(x[0], n_output)]

    @classmethod
    def state_inputs(cls, options: Any) -> tuple[int, ...]:
        # The BASIC cell writes its activation and state back into inputs 1 and 4.
        return (1, 4) if is_basic(options) else (OUTPUT_STATE, CELL_STATE)

    def setup(self) -> None:
        self.basic = BasicLstm(self) if is_basic(self.options) else None
        if self.basic is None:
            self.build_cell()

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray | list[np.ndarray]:
        if self.basic is not None:
            return self.basic.run(inputs)
        cell = self.cell_for(inputs)
        h_state = self.required(inputs[OUTPUT_STATE], f"input {OUTPUT_STATE} (the output state)")
        c_state = self.required(inputs[CELL_STATE], f"input {CELL_STATE} (the cell state)")
        x = np.asarray(inputs[0], np.float32)
        h, c = cell.step(x, h_state.reshape(x.shape[0], -1), c_state.reshape(x.shape[0], -1))
        # The states are the interpreter's persistent buffers: update them in place.
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        return h.astype(self.outputs[0].dtype)
