"""UNIDIRECTIONAL_SEQUENCE_LSTM: a full LSTM run over a sequence (time-major [T, B, I] or
batch-major [B, T, I]); float or hybrid int8 weights; see ``_lstm.py``."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._lstm import CELL_STATE, OUTPUT_STATE, LstmKernelMixin
from offload.ops._registry import register


@register
class UnidirectionalSequenceLstm(LstmKernelMixin, OpKernel):
    op = "UNIDIRECTIONAL_SEQUENCE_LSTM"
    max_version = 4

    def setup(self) -> None:
        self.time_major = bool(self.options.get("time_major", False))
        self.build_cell()

    def run(self, *inputs: np.ndarray | None) -> np.ndarray:
        cell = self.cell_for(inputs)
        h_state, c_state = inputs[OUTPUT_STATE], inputs[CELL_STATE]
        x = np.asarray(inputs[0], np.float32)
        if x.ndim == 2:  # an unbatched sequence [T, I]
            x = x[:, None, :] if self.time_major else x[None]
        seq = x if self.time_major else np.swapaxes(x, 0, 1)
        n_batch = seq.shape[1]
        h = np.asarray(h_state, np.float32).reshape(n_batch, -1)
        c = np.asarray(c_state, np.float32).reshape(n_batch, -1)
        steps = []
        for t in range(seq.shape[0]):
            h, c = cell.step(seq[t], h, c)
            steps.append(h)
        out = np.stack(steps) if steps else np.zeros((0, n_batch, h.shape[1]), np.float32)
        if not self.time_major:
            out = np.swapaxes(out, 0, 1)
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        shape = out.shape if inputs[0].ndim == 3 else out.reshape(-1, out.shape[-1]).shape
        return np.ascontiguousarray(out).reshape(shape).astype(self.outputs[0].dtype)
