"""LSTM: one step of a full LSTM cell (float, or hybrid int8 weights; see ``_lstm.py``), or of
the 5-input BASIC cell (float or uint8; see ``_lstm_basic.py``)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._lstm import CELL_STATE, OUTPUT_STATE, LstmKernelMixin
from offload.ops._lstm_basic import BasicLstm, is_basic
from offload.ops._registry import register


@register
class Lstm(LstmKernelMixin, OpKernel):
    op = "LSTM"
    max_version = 4

    def setup(self) -> None:
        self.basic = BasicLstm(self) if is_basic(self.options) else None
        if self.basic is None:
            self.build_cell()

    def run(self, *inputs: np.ndarray | None) -> np.ndarray | list[np.ndarray]:
        if self.basic is not None:
            return self.basic.run(inputs)
        cell = self.cell_for(inputs)
        h_state, c_state = inputs[OUTPUT_STATE], inputs[CELL_STATE]
        x = np.asarray(inputs[0], np.float32)
        x = x.reshape(-1, x.shape[-1])
        h, c = cell.step(x, h_state.reshape(x.shape[0], -1), c_state.reshape(x.shape[0], -1))
        # The states are the interpreter's persistent buffers: update them in place.
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        return h.reshape(self.outputs[0].shape if self.outputs[0].shape else h.shape).astype(
            self.outputs[0].dtype
        )
