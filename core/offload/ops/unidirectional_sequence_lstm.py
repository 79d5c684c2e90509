"""UNIDIRECTIONAL_SEQUENCE_LSTM: a full LSTM run over a sequence (time-major [T, B, I] or
batch-major [B, T, I]); float or hybrid int8 weights (``_lstm.py``), or fully integer with
int8 activations and an int16 cell state (``_lstm_integer.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._lstm import CELL_STATE, OUTPUT_STATE, LstmCell, LstmKernelMixin
from offload.ops._lstm_integer import IntegerLstmCell
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


def _scan(cell, seq: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple:
    """Step ``cell`` over time-major ``seq`` [T, B, I]: (outputs [T, B, O], last h, last c)."""
    steps = []
    for t in range(seq.shape[0]):
        h, c = cell.step(seq[t], h, c)
        steps.append(h)
    out = np.stack(steps) if steps else np.zeros((0, *h.shape), h.dtype)
    return out, h, c


@register
class UnidirectionalSequenceLstm(LstmKernelMixin, OpKernel):
    op = "UNIDIRECTIONAL_SEQUENCE_LSTM"
    max_version = 4
    types = accepts("FLOAT32", "INT8 UINT8 INT16", output=one_of("FLOAT32", "INT8 UINT8 INT16"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x = ctx.shape(0)
        time_major = bool(ctx.options.get("time_major", False))
        layout = "[time, batch, input]" if time_major else "[batch, time, input]"
        check_shape(
            len(x) in (2, 3),
            f"expected an input of shape {layout} or [time, input], found {list(x)}",
        )
        n_batch = 1 if len(x) == 2 else x[1] if time_major else x[0]
        # TFLite reads the sizes off the output gate's weights: [n_cell, n_input] and
        # [n_cell, n_output] (n_output is the projection's size when there is one).
        to_output, recurrent = ctx.shape(4), ctx.shape(8)
        check_shape(
            len(to_output) == 2 and to_output[1] == x[-1],
            f"expected input-to-output weights of shape [n_cell, {x[-1]}], found {list(to_output)}",
        )
        n_cell = to_output[0]
        check_shape(
            len(recurrent) == 2 and recurrent[0] == n_cell,
            f"expected recurrent-to-output weights of shape [{n_cell}, n_output], found "
            f"{list(recurrent)}",
        )
        n_output = recurrent[1]
        for what, position, width in (
            ("output", OUTPUT_STATE, n_output),
            ("cell", CELL_STATE, n_cell),
        ):
            found = ctx.shape(position)
            check_shape(
                math.prod(found) == n_batch * width,
                f"expected a {what} state of {n_batch} x {width} values, found shape {list(found)}",
            )
        return [(*x[:-1], n_output)]

    @classmethod
    def state_inputs(cls, options: Any) -> tuple[int, ...]:
        return (OUTPUT_STATE, CELL_STATE)

    def setup(self) -> None:
        self.time_major = bool(self.options.get("time_major", False))
        integer = self.input_tensor(0).dtype == np.int8
        self.build_cell(IntegerLstmCell if integer else LstmCell)

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        cell = self.cell_for(inputs)
        work = cell.work_dtype
        h_state = self.required(inputs[OUTPUT_STATE], f"input {OUTPUT_STATE} (the output state)")
        c_state = self.required(inputs[CELL_STATE], f"input {CELL_STATE} (the cell state)")
        x_in = self.required(inputs[0], "input 0")
        x = np.asarray(x_in).astype(work)
        if x.ndim == 2:  # an unbatched sequence [T, I]
            x = x[:, None, :] if self.time_major else x[None]
        seq = x if self.time_major else np.swapaxes(x, 0, 1)
        n_batch = seq.shape[1]
        h = np.asarray(h_state).astype(work).reshape(n_batch, -1)
        c = np.asarray(c_state).astype(work).reshape(n_batch, -1)
        if isinstance(cell, IntegerLstmCell) and not self.time_major:
            # LiteRT steps a batch-major integer sequence one batch row at a time; rows are
            # independent except through its peephole quirk (see _lstm_integer).
            rows = [
                _scan(cell, seq[:, b : b + 1], h[b : b + 1], c[b : b + 1]) for b in range(n_batch)
            ]
            out = np.concatenate([r[0] for r in rows], axis=1)
            h = np.concatenate([r[1] for r in rows])
            c = np.concatenate([r[2] for r in rows])
        else:
            out, h, c = _scan(cell, seq, h, c)
        if not self.time_major:
            out = np.swapaxes(out, 0, 1)
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        shape = out.shape if x_in.ndim == 3 else out.reshape(-1, out.shape[-1]).shape
        return np.ascontiguousarray(out).reshape(shape).astype(self.outputs[0].dtype)
