"""RNN: one step of a basic RNN cell, hidden state (input 4) updated in place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._lstm import RnnKernelMixin
from offload.ops._registry import register
from offload.ops._types import accepts


def rnn_units(ctx: ShapeContext, n_batch: int, n_input: int) -> int:
    """num_units of RNN and UNIDIRECTIONAL_SEQUENCE_RNN, after TFLite's checks of the weights
    (input 1), recurrent weights (2), bias (3) and hidden state (4) against one another."""
    weights, recurrent, bias, state = (ctx.shape(i) for i in range(1, 5))
    check_shape(
        len(weights) == 2 and weights[1] == n_input,
        f"expected weights of shape [num_units, {n_input}], found {list(weights)}",
    )
    units = weights[0]
    for what, found, want in (
        ("recurrent weights", recurrent, (units, units)),
        ("bias", bias, (units,)),
        ("hidden state", state, (n_batch, units)),
    ):
        check_shape(found == want, f"expected {what} of shape {list(want)}, found {list(found)}")
    return units


@register
class Rnn(RnnKernelMixin, OpKernel):
    op = "RNN"
    max_version = 3
    types = accepts("FLOAT32")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x = ctx.shape(0)
        check_shape(len(x) == 2, f"expected an input of shape [batch, input], found {list(x)}")
        return [(x[0], rnn_units(ctx, x[0], x[1]))]

    @classmethod
    def state_inputs(cls, options: Any) -> tuple[int, ...]:
        return (4,)

    def setup(self) -> None:
        self.build_cell()

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        cell = self.cell_for(inputs)
        state = self.required(inputs[4], "input 4 (the hidden state)")
        x = np.asarray(inputs[0], np.float32)
        h = cell.step(x.reshape(-1, x.shape[-1]), state.reshape(x.shape[0], -1))
        state[...] = h.reshape(state.shape)
        return h.astype(self.outputs[0].dtype)
