"""UNIDIRECTIONAL_SEQUENCE_RNN: a basic RNN over a sequence (time-major [T, B, I] or
batch-major [B, T, I]); hidden state (input 4) updated in place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._lstm import RnnKernelMixin
from offload.ops._registry import register
from offload.ops._types import accepts
from offload.ops.rnn import rnn_units


@register
class UnidirectionalSequenceRnn(RnnKernelMixin, OpKernel):
    op = "UNIDIRECTIONAL_SEQUENCE_RNN"
    max_version = 3
    types = accepts("FLOAT32")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x = ctx.shape(0)
        time_major = bool(ctx.options.get("time_major", False))
        layout = "[time, batch, input]" if time_major else "[batch, time, input]"
        check_shape(len(x) == 3, f"expected an input of shape {layout}, found {list(x)}")
        n_batch = x[1] if time_major else x[0]
        return [(x[0], x[1], rnn_units(ctx, n_batch, x[2]))]

    @classmethod
    def state_inputs(cls, options: Any) -> tuple[int, ...]:
        return (4,)

    def setup(self) -> None:
        self.time_major = bool(self.options.get("time_major", False))
        self.build_cell()

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        cell = self.cell_for(inputs)
        state = self.required(inputs[4], "input 4 (the hidden state)")
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
