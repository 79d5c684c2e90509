"""RNN: one step of a basic RNN cell, hidden state (input 4) updated in place."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._lstm import RnnKernelMixin
from offload.ops._registry import register


@register
class Rnn(RnnKernelMixin, OpKernel):
    op = "RNN"
    max_version = 3

    def setup(self) -> None:
        self.build_cell()

    def run(self, *inputs: np.ndarray | None) -> np.ndarray:
        cell = self.cell_for(inputs)
        state = inputs[4]
        x = np.asarray(inputs[0], np.float32)
        h = cell.step(x.reshape(-1, x.shape[-1]), state.reshape(x.shape[0], -1))
        state[...] = h.reshape(state.shape)
        return h.astype(self.outputs[0].dtype)
