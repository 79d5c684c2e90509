"""The recurrent family (LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM, RNN, UNIDIRECTIONAL_SEQUENCE_RNN):
one time step in float32, or in LiteRT's *hybrid* form where int8 weights meet float
activations (dynamic-range models). The fully integer step is in ``_lstm_integer.py``.

The hybrid form follows ``lstm_eval.cc``/``basic_rnn.cc``: each step quantizes its float
operands per batch row (symmetric to +-127, or asymmetric when ``asymmetric_quantize_inputs``),
takes exact int32 dot products with the int8 weights, and scales them back by
``row_scale * weight_scale`` before accumulating into the float gate. Accumulation order
(bias, input term, recurrent term, peephole) is LiteRT's, so float rounding matches closely.

LSTM input positions (TFLite's ``lstm_shared.h``): 0 input; 1-4 input-to-{input, forget, cell,
output} weights; 5-8 recurrent weights; 9-11 peepholes; 12-15 gate biases; 16-17 projection
weights and bias; 18 output state and 19 cell state (variable tensors, updated in place);
20-23 layer-norm coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offload._graph import Tensor
from offload.errors import UnsupportedOpError
from offload.ops import _eigen
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, present
from offload.ops._quant import quantize_rows
from offload.quant import scale_zero_point

__all__ = [
    "Matrix",
    "LstmCell",
    "LstmKernelMixin",
    "RnnCell",
    "RnnKernelMixin",
    "batch_quantize",
    "sigmoid",
    "OUTPUT_STATE",
    "CELL_STATE",
]

OUTPUT_STATE = 18
CELL_STATE = 19
_GATES = ("input", "forget", "cell", "output")


def sigmoid(x: np.ndarray) -> np.ndarray:
    """A float32 gate buffer through Eigen's logistic, as LiteRT's ApplySigmoidToVector."""
    if np.asarray(x).dtype == np.float32:
        return _eigen.logistic(x)
    # exp(-x) overflows to inf for x < -88, and 1 / (1 + inf) is the right limit, 0.
    with np.errstate(over="ignore"):
        return (np.float32(1.0) / (np.float32(1.0) + np.exp(-x))).astype(np.float32)


def batch_quantize(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TFLite's per-batch-row input quantization of the hybrid kernels (shared with conv/FC)."""
    return quantize_rows(x, asymmetric=asymmetric)


@dataclass
class Matrix:
    """A weight matrix [rows, cols]: float32, or int8 with a per-tensor scale (hybrid)."""

    weights: np.ndarray  # float32, or int32 holding the int8 values
    scale: np.float32 | None = None  # None for float weights
    row_sums: np.ndarray | None = None

    @classmethod
    def from_tensor(cls, tensor: Tensor, value: np.ndarray) -> Matrix:
        if tensor.dtype == np.float32:
            return cls(np.ascontiguousarray(value, np.float32))
        if tensor.dtype == np.int8 or tensor.dtype == np.uint8:
            q = tensor.quantization
            if q is not None and q.per_channel:
                raise UnsupportedOpError(
                    f"expected per-tensor int8 recurrent weights, found per-channel scales on "
                    f"tensor {tensor.index} ({tensor.name!r})"
                )
            scale = np.float32(1.0) if q is None else scale_zero_point(q)[0]
            w = np.asarray(value).view(np.int8).astype(np.int32)
            return cls(w, scale, w.sum(axis=1))
        raise UnsupportedOpError(
            f"expected float32 or int8 weights, found {tensor.type_name} on tensor "
            f"{tensor.index} ({tensor.name!r})"
        )

    @property
    def hybrid(self) -> bool:
        return self.scale is not None

    def accumulate(self, acc: np.ndarray, x: np.ndarray, quantized: tuple | None) -> np.ndarray:
        """``acc + x @ W.T``; for int8 weights ``quantized`` is ``batch_quantize(x)`` or None
        when LiteRT skips the product (an all-zero operand)."""
        if not self.hybrid:
            return acc + (x @ self.weights.T).astype(np.float32)
        if quantized is None:
            return acc
        q, row_scale, zp = quantized
        # from_tensor sets row_sums with the scale of every int8 matrix.
        row_sums = present(self.row_sums, "the row sums of int8 weights")
        dot = q @ self.weights.T - zp[:, None] * row_sums[None, :]
        scale = (row_scale * self.scale).astype(np.float32)
        return acc + dot.astype(np.float32) * scale[:, None]


def maybe_quantize(x: np.ndarray, hybrid: bool, asymmetric: bool) -> tuple | None:
    if not hybrid or not np.any(x):
        return None
    return batch_quantize(x, asymmetric)


class LstmCell:
    """The weights of a full LSTM and its step function; built from the op's 24 inputs."""

    work_dtype = np.float32  # the dtype ``step`` computes in

    def __init__(self, kernel: OpKernel, values: list[np.ndarray | None]) -> None:
        inputs = kernel.inputs
        options = kernel.options
        describe = kernel.node.describe()
        self.describe = describe
        if options.get("kernel_type", "FULL") not in ("FULL", 0):
            raise UnsupportedOpError(
                f"{describe}: expected kernel_type FULL for the 24-input LSTM cell, found "
                f"{options.kernel_type}"
            )
        x_tensor = kernel.input_tensor(0)
        if x_tensor.dtype != np.float32:
            raise UnsupportedOpError(
                f"{describe}: expected a float32 input (float or dynamic-range model), found "
                f"{x_tensor.type_name}; the fully integer path takes int8 input and is "
                "implemented for UNIDIRECTIONAL_SEQUENCE_LSTM only"
            )

        def tensor(i: int) -> Tensor | None:
            return inputs[i] if i < len(inputs) else None

        def matrix(i: int) -> Matrix | None:
            t = tensor(i)
            if t is None:
                return None
            return Matrix.from_tensor(t, present(values[i], f"the value of input {i}", describe))

        def vector(i: int, what: str) -> np.ndarray | None:
            t = tensor(i)
            if t is None:
                return None
            v = np.asarray(values[i])
            if t.dtype in (np.int8, np.uint8):  # hybrid peepholes are int8 with a scale
                s = scale_zero_point(t)[0] if t.quantization else np.float32(1)
                return (v.view(np.int8).astype(np.float32) * s).astype(np.float32)
            if t.dtype != np.float32:
                raise UnsupportedOpError(
                    f"{describe}: expected float32 {what}, found {t.type_name}"
                )
            return v.astype(np.float32)

        self.input_w = {g: matrix(1 + k) for k, g in enumerate(_GATES)}
        self.recurrent_w = {g: matrix(5 + k) for k, g in enumerate(_GATES)}
        self.peephole = {
            "input": vector(9, "peephole"),
            "forget": vector(10, "peephole"),
            "output": vector(11, "peephole"),
        }
        self.bias = {g: vector(12 + k, "bias") for k, g in enumerate(_GATES)}
        self.projection = matrix(16)
        self.projection_bias = vector(17, "projection bias")
        self.layer_norm = {g: vector(20 + k, "layer norm") for k, g in enumerate(_GATES)}
        self.use_cifg = self.input_w["input"] is None
        self.use_layer_norm = self.layer_norm["forget"] is not None
        forget_w = present(
            self.input_w["forget"], "input 2 (the input-to-forget weights)", describe
        )
        self.hybrid = forget_w.hybrid
        self.asymmetric = bool(options.get("asymmetric_quantize_inputs", False))
        self.activation = options.get("fused_activation_function", "TANH")
        self.cell_clip = np.float32(options.get("cell_clip", 0.0))
        self.proj_clip = np.float32(options.get("proj_clip", 0.0))
        if options.get("diagonal_recurrent_tensors", False):
            raise UnsupportedOpError(f"{describe}: diagonal recurrent weights are not implemented")
        n_cell = forget_w.weights.shape[0]
        for g in _GATES:
            if self.bias[g] is None and not (g == "input" and self.use_cifg):
                self.bias[g] = np.zeros(n_cell, np.float32)

    def _gate(
        self,
        gate: str,
        x: np.ndarray,
        xq: tuple | None,
        h: np.ndarray,
        hq: tuple | None,
        c: np.ndarray | None,
        activation: str,
    ) -> np.ndarray:
        n_batch = x.shape[0]
        # A gate's weights and bias: the model may omit only the input gate's (CIFG), and then
        # this is not called for it; any other omission is a malformed model.
        input_w = present(self.input_w[gate], f"the {gate} gate's input weights", self.describe)
        recurrent_w = present(
            self.recurrent_w[gate], f"the {gate} gate's recurrent weights", self.describe
        )
        bias = present(self.bias[gate], f"the {gate} gate's bias", self.describe)
        n_cell = input_w.weights.shape[0]
        if self.use_layer_norm:
            acc = np.zeros((n_batch, n_cell), np.float32)
        else:
            acc = np.broadcast_to(bias, (n_batch, n_cell)).astype(np.float32)
        if self.hybrid or np.any(x):
            acc = input_w.accumulate(acc, x, xq)
        acc = recurrent_w.accumulate(acc, h, hq)
        peephole = self.peephole.get(gate)
        if peephole is not None and c is not None:
            acc = acc + peephole * c
        if self.use_layer_norm:
            mean = np.add.reduce(acc, axis=1, keepdims=True, dtype=np.float32) / np.float32(n_cell)
            diff = acc - mean
            var = np.add.reduce(diff * diff, axis=1, keepdims=True, dtype=np.float32)
            var = var / np.float32(n_cell)
            inv = np.float32(1) / np.sqrt(var + np.float32(1e-8))
            norm = present(
                self.layer_norm[gate], f"the {gate} gate's layer norm coefficients", self.describe
            )
            acc = (diff * inv) * norm + bias
        if activation == "SIGMOID":
            return sigmoid(acc)
        return np.asarray(apply_fused_activation(acc.astype(np.float32), activation), np.float32)

    def step(self, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One time step on [batch, features] rows: returns (new output state, new cell state)."""
        xq = maybe_quantize(x, self.hybrid, self.asymmetric)
        hq = maybe_quantize(h, self.hybrid, self.asymmetric)
        forget = self._gate("forget", x, xq, h, hq, c, "SIGMOID")
        cell_in = self._gate("cell", x, xq, h, hq, None, self.activation)
        if self.use_cifg:
            new_c = forget * c + cell_in * (np.float32(1) - forget)
        else:
            inp = self._gate("input", x, xq, h, hq, c, "SIGMOID")
            new_c = forget * c + cell_in * inp
        if self.cell_clip > 0:
            new_c = np.clip(new_c, -self.cell_clip, self.cell_clip)
        out_gate = self._gate("output", x, xq, h, hq, new_c, "SIGMOID")
        cell_act = np.asarray(
            apply_fused_activation(new_c.astype(np.float32).copy(), self.activation), np.float32
        )
        hidden = out_gate * cell_act
        if self.projection is not None:
            n_output = self.projection.weights.shape[0]
            bias = self.projection_bias
            acc = (
                np.zeros((x.shape[0], n_output), np.float32)
                if bias is None
                else (np.broadcast_to(bias, (x.shape[0], n_output)).astype(np.float32))
            )
            hidden_q = maybe_quantize(hidden, self.projection.hybrid, self.asymmetric)
            hidden = self.projection.accumulate(acc, hidden, hidden_q)
            if self.proj_clip > 0:
                hidden = np.clip(hidden, -self.proj_clip, self.proj_clip)
        return hidden.astype(np.float32), new_c.astype(np.float32)


_STATE_INPUTS = (0, OUTPUT_STATE, CELL_STATE)


class LstmKernelMixin(OpKernel):
    """Builds the cell (:class:`LstmCell` unless told otherwise) once from constant weights,
    or per run if they are not constant. An OpKernel itself, as the cells read the kernel's
    inputs, options and node."""

    def build_cell(self, cell_class: type = LstmCell) -> None:
        self.cell_class = cell_class
        positions = [i for i in range(len(self.inputs)) if i not in _STATE_INPUTS]
        values = [self.constant(i) for i in range(len(self.inputs))]
        missing = [i for i in positions if self.inputs[i] is not None and values[i] is None]
        self.cell = None if missing else cell_class(self, values)

    def cell_for(self, inputs: tuple) -> LstmCell:
        return self.cell if self.cell is not None else self.cell_class(self, list(inputs))


class RnnCell:
    """A basic RNN step, ``h = act(bias + W x + R h)``, float or hybrid int8 weights
    (TFLite's ``basic_rnn.cc``: inputs 0 input, 1 weights, 2 recurrent weights, 3 bias,
    4 hidden state)."""

    def __init__(self, kernel: OpKernel, values: list[np.ndarray | None]) -> None:
        options = kernel.options
        describe = kernel.node.describe()
        self.input_w = Matrix.from_tensor(
            kernel.input_tensor(1), present(values[1], "the value of input 1", describe)
        )
        self.recurrent_w = Matrix.from_tensor(
            kernel.input_tensor(2), present(values[2], "the value of input 2", describe)
        )
        self.bias = np.asarray(values[3], np.float32)
        self.hybrid = self.input_w.hybrid
        self.asymmetric = bool(options.get("asymmetric_quantize_inputs", False))
        self.activation = options.get("fused_activation_function", "TANH")

    def step(self, x: np.ndarray, h: np.ndarray) -> np.ndarray:
        acc = np.broadcast_to(self.bias, (x.shape[0], self.bias.size)).astype(np.float32)
        acc = self.input_w.accumulate(acc, x, maybe_quantize(x, self.hybrid, self.asymmetric))
        acc = self.recurrent_w.accumulate(acc, h, maybe_quantize(h, self.hybrid, self.asymmetric))
        if self.activation == "SIGMOID":
            return sigmoid(acc)
        return np.asarray(apply_fused_activation(acc, self.activation), np.float32)


class RnnKernelMixin(OpKernel):
    """Builds the :class:`RnnCell` once from constant weights (or per run if they are not).
    An OpKernel itself, as the cell reads the kernel's inputs, options and node."""

    def build_cell(self) -> None:
        values = [self.constant(i) for i in range(len(self.inputs))]
        self.cell = None if any(values[i] is None for i in (1, 2, 3)) else RnnCell(self, values)

    def cell_for(self, inputs: tuple) -> RnnCell:
        return self.cell if self.cell is not None else RnnCell(self, list(inputs))
