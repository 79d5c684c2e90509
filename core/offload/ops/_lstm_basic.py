"""The BASIC kernel of the LSTM op (``kernel_type`` BASIC, op version 2): TFLite's 5-input
LSTM cell (``lstm.cc``, namespace ``basic``; ``reference_ops::LstmCell`` in ``lstm_cell.h``).

Inputs: 0 input [B, I], 1 previous activation [B, O], 2 weights [4*O, I+O], 3 biases [4*O],
4 previous state [B, O]. Outputs: 0 activation [B, O], 1 state [B, O], 2 the concatenation
``[input, previous activation]`` [B, I+O], 3 the fully connected pre-activations [B, 4*O].

The four gate blocks of output 3 are, in order: input gate (sigmoid), new input (tanh),
forget gate (sigmoid), output gate (sigmoid). Then ``state = i * n + f * prev_state`` and
``activation = o * tanh(state)``. LiteRT's kernel reads neither the fused activation nor the
clips of the options (always tanh, never clipped), and neither does this one. After the step
LiteRT copies the new activation and state back into inputs 1 and 4, which makes them the
cell's persistent state; so does this kernel, where those arrays are writable.

Two type combinations exist, as in LiteRT: all float32, or the quantized cell with uint8
input, activation and weights, int32 biases and an int16 state of scale 2**-11 (gemmlowp
fixed point: Q3.12 pre-activations, Q4.11 state, Q0.15 gates; bit-exact with LiteRT).
"""

from __future__ import annotations

import math

import numpy as np

from offload._graph import Tensor
from offload.errors import TensorShapeError, UnsupportedOpError
from offload.ops._lstm import sigmoid
from offload.ops._quant import (
    fixed_point_logistic_int16,
    fixed_point_tanh_int16,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    scale_zp,
)

__all__ = ["BasicLstm", "is_basic"]

_N_INPUTS = 5
_N_OUTPUTS = 4
_INPUT_NAMES = ("input", "previous activation", "weights", "biases", "previous state")
_OUTPUT_NAMES = ("activation", "state", "concat temp", "activation temp")
_FLOAT_TYPES = (np.float32,) * 9
# input, prev activation, weights, biases, prev state; activation, state, concat, activ temp.
_QUANTIZED_TYPES = (
    np.uint8,
    np.uint8,
    np.uint8,
    np.int32,
    np.int16,
    np.uint8,
    np.int16,
    np.uint8,
    np.int16,
)
_STATE_INTEGER_BITS = 4  # the only quantized state format LiteRT supports (scale 2**-11)
_GATE_INTEGER_BITS = 3  # the pre-activations are Q3.12: [-8, 8)
# The four gate blocks of the pre-activations, in LiteRT's order: input, new input, forget, output.
_GATE_FUNCTIONS = (
    fixed_point_logistic_int16,
    fixed_point_tanh_int16,
    fixed_point_logistic_int16,
    fixed_point_logistic_int16,
)


def is_basic(options: object) -> bool:
    """Whether LSTM options select the BASIC kernel (the loader gives enums by name)."""
    return options.get("kernel_type", "FULL") in ("BASIC", 1)  # type: ignore[attr-defined]


def check_shapes(shapes: list[tuple[int, ...]], describe: str) -> None:
    """LiteRT's Prepare checks on the five input shapes; raises TensorShapeError."""
    x, h, w, b, c = (tuple(s) for s in shapes)
    problems = []
    if len(x) != 2:
        problems.append(f"a 2-D input [batch, input depth], found {list(x)}")
    if len(h) != 2 or (len(x) == 2 and h[0] != x[0]):
        problems.append(f"a previous activation [batch, depth] matching the input, found {list(h)}")
    if not problems:
        n_out, total = h[1], x[1] + h[1]
        if w != (4 * n_out, total):
            problems.append(f"weights of shape {[4 * n_out, total]}, found {list(w)}")
        if b != (4 * n_out,):
            problems.append(f"biases of shape {[4 * n_out]}, found {list(b)}")
        if c != h:
            problems.append(f"a previous state of shape {list(h)}, found {list(c)}")
    if problems:
        raise TensorShapeError(f"{describe}: the BASIC LSTM kernel expects " + "; ".join(problems))


def _check_log2(scale: float) -> int | None:
    """TFLite's CheckedLog2: the rounded log2 of a power-of-two scale, else None."""
    log2 = math.log(scale) / math.log(2.0)
    rounded = round(log2)
    return int(rounded) if abs(log2 - rounded) < 1e-3 else None


def _per_tensor(tensor: Tensor, describe: str) -> tuple[float, int]:
    q = tensor.quantization
    if q is None or q.scale.size != 1:
        found = "none" if q is None else f"{q.scale.size} per-channel scales"
        raise UnsupportedOpError(
            f"{describe}: expected per-tensor quantization on tensor {tensor.index} "
            f"({tensor.name!r}) of the quantized BASIC LSTM, found {found}"
        )
    return scale_zp(tensor)


def _mul_q15(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp's fixed-point product of int16 values (SaturatingRoundingDoublingHighMul)."""
    ab = a.astype(np.int64) * b
    total = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(total >= 0, total >> 15, -((-total) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


class BasicLstm:
    """Checks a BASIC LSTM node as LiteRT's Prepare/Eval do and runs its step."""

    def __init__(self, kernel: object) -> None:
        inputs: list[Tensor | None] = kernel.inputs  # type: ignore[attr-defined]
        outputs: list[Tensor] = kernel.outputs  # type: ignore[attr-defined]
        self.describe = describe = kernel.node.describe()  # type: ignore[attr-defined]
        if len(inputs) != _N_INPUTS or len(outputs) != _N_OUTPUTS:
            raise UnsupportedOpError(
                f"{describe}: expected {_N_INPUTS} inputs and {_N_OUTPUTS} outputs for the BASIC "
                f"LSTM kernel, found {len(inputs)} inputs and {len(outputs)} outputs"
            )
        missing = [name for name, t in zip(_INPUT_NAMES, inputs) if t is None]
        if missing:
            raise UnsupportedOpError(
                f"{describe}: expected all 5 inputs of the BASIC LSTM kernel, found "
                f"{', '.join(missing)} omitted"
            )
        tensors: list[Tensor] = [*inputs, *outputs]  # type: ignore[list-item]
        check_shapes([t.shape for t in inputs], describe)  # type: ignore[union-attr]
        found = tuple(t.dtype for t in tensors)
        self.quantized = found == tuple(np.dtype(d) for d in _QUANTIZED_TYPES)
        if not self.quantized and found != tuple(np.dtype(d) for d in _FLOAT_TYPES):
            names = [*_INPUT_NAMES, *_OUTPUT_NAMES]
            listed = ", ".join(f"{n} {t.type_name}" for n, t in zip(names, tensors))
            raise UnsupportedOpError(
                f"{describe}: expected float32 tensors throughout for the BASIC LSTM kernel, or "
                "uint8 input/activations/weights with int32 biases and int16 state (the "
                f"quantized cell); found {listed}"
            )
        if self.quantized:
            self._setup_quantized(tensors)

    def _setup_quantized(self, tensors: list[Tensor]) -> None:
        describe = self.describe
        state_scale, _ = _per_tensor(tensors[_N_INPUTS + 1], describe)
        log2 = _check_log2(state_scale)
        if log2 is None or 15 + log2 != _STATE_INTEGER_BITS:
            raise UnsupportedOpError(
                f"{describe}: expected the quantized BASIC LSTM state output to have scale "
                f"2**-{15 - _STATE_INTEGER_BITS} ({_STATE_INTEGER_BITS} integer bits, the only "
                f"format LiteRT supports), found scale {state_scale!r}"
            )
        _, self.weights_zero_point = _per_tensor(tensors[2], describe)
        bias_scale, _ = _per_tensor(tensors[3], describe)
        # The accumulators are rescaled to Q3.12, i.e. multiplied by bias_scale * 2**12.
        self.accum_multiplier, self.accum_shift = quantize_multiplier(4096.0 * bias_scale)

    def step(
        self, x: np.ndarray, h: np.ndarray, w: np.ndarray, b: np.ndarray, c: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One step: (activation, state, concat temp, activation temp)."""
        check_shapes([x.shape, h.shape, w.shape, b.shape, c.shape], self.describe)
        if self.quantized:
            return self._step_quantized(x, h, w, b, c)
        n = h.shape[1]
        concat = np.concatenate([x, h], axis=1).astype(np.float32)
        pre = (concat @ w.T + b).astype(np.float32)
        input_gate = sigmoid(pre[:, :n])
        new_input = np.tanh(pre[:, n : 2 * n])
        forget_gate = sigmoid(pre[:, 2 * n : 3 * n])
        output_gate = sigmoid(pre[:, 3 * n :])
        state = (input_gate * new_input + forget_gate * c).astype(np.float32)
        activation = (output_gate * np.tanh(state)).astype(np.float32)
        return activation, state, concat, pre

    def _step_quantized(
        self, x: np.ndarray, h: np.ndarray, w: np.ndarray, b: np.ndarray, c: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        n = h.shape[1]
        concat = np.concatenate([x, h], axis=1).astype(np.uint8)
        # The uint8 activations are fixed at zero point 128; the products are exact in float64.
        centred = concat.astype(np.float64) - 128
        weights = w.astype(np.float64) - self.weights_zero_point
        acc = (centred @ weights.T).astype(np.int64) + b.astype(np.int64)
        acc = multiply_by_quantized_multiplier(acc, self.accum_multiplier, self.accum_shift)
        pre = np.clip(acc, -32768, 32767)
        gates = [
            fn(pre[:, k * n : (k + 1) * n], _GATE_INTEGER_BITS).astype(np.int64)
            for k, fn in enumerate(_GATE_FUNCTIONS)
        ]
        input_gate, new_input, forget_gate, output_gate = gates
        gated_input = _mul_q15(input_gate, new_input)  # Q0.15
        kept = _mul_q15(forget_gate, c.astype(np.int64))  # Q4.11
        state = np.clip(
            rounding_divide_by_pot(gated_input, _STATE_INTEGER_BITS) + kept, -32768, 32767
        )
        # tanh is taken on the state rescaled to Q3.12, saturating.
        shift = _STATE_INTEGER_BITS - _GATE_INTEGER_BITS
        state_q3 = np.clip(state << shift, -32768, 32767)
        tanh_state = fixed_point_tanh_int16(state_q3, _GATE_INTEGER_BITS).astype(np.int64)
        out = _mul_q15(output_gate, tanh_state)
        activation = np.clip(rounding_divide_by_pot(out, 8), -128, 127) + 128
        return (
            activation.astype(np.uint8),
            state.astype(np.int16),
            concat,
            pre.astype(np.int16),
        )

    def run(self, inputs: tuple[np.ndarray | None, ...]) -> list[np.ndarray]:
        """The node's four outputs; the new activation and state also overwrite inputs 1 and 4
        (LiteRT's persistent cell state) where those arrays can be written."""
        x, h, w, b, c = (np.asarray(a) for a in inputs)
        activation, state, concat, pre = self.step(x, h, w, b, c)
        for target, value in ((inputs[1], activation), (inputs[4], state)):
            if isinstance(target, np.ndarray) and target.flags.writeable:
                target[...] = value
        return [activation, state, concat, pre]
