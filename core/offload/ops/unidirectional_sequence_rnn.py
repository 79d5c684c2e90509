"""UNIDIRECTIONAL_SEQUENCE_RNN: a basic RNN over a sequence (time-major [T, B, I] or
batch-major [B, T, I]); hidden state (input 4) updated in place."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._lstm import RnnKernelMixin
from offload.ops._registry import register


@register
class UnidirectionalSequenceRnn(RnnKernelMixin, OpKernel):
    op = "UNIDIRECTIONAL_SEQUENCE_RNN"
    max_version = 3

    def setup(self) -> None:
        self.time_major = bool(self.options.get("time_major", False))
        self.build_cell()

    def run(self, *inputs: np.ndarray | None) -> np.ndarray:
        cell = self.cell_for(inputs)
        state = inputs[4]
        x = np.asarray(inputs[0], np.float32)
        seq = x if self.time_major else np.swapaxes(x, 0, 1)
        h = np.asarray(state, np.float32).reshape(seq.shape[1], -1)
        steps = []
        for t in range(seq.shape[0]):
            h = cell.step(seq[t], h)
            steps.append(h)
        out = np.stack(steps)
        state[...] = h.reshape(state.shape)
        out = out if self.time_major else np.swapaxes(out, 0, 1)
        return np.ascontiguousarray(out).astype(self.outputs[0].dtype)
