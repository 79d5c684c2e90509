"""The fully integer LSTM step (TFLite's 8x8->16 kernel, ``EvalInteger8x8_16``): int8 input and
output state, int16 cell state, int8 weights with int32 biases, int16 gates.

Each gate is an int8 matmul of the input and one of the output state, each requantized into
the gate's int16 scale (Q3.12, or the scale of the node's intermediate when the LSTM has
layer norm) and summed with saturation; then an optional int16 peephole term, an optional
integer layer norm, and gemmlowp's fixed-point sigmoid or tanh into Q0.15. The cell state is
an int16 with a power-of-two scale; ``o * tanh(c)`` is requantized to the int8 hidden scale
(the fifth intermediate) and, with a projection, multiplied by the int8 projection weights.
Every partial result saturates to its integer type where LiteRT's portable ``tensor_utils``
do (the x86 build uses the portable versions for all of these), so the step is bit-exact.

Scale setup follows ``PopulateQuantizedLstmParams8x8_16``: effective scales are float32
products of tensor scales turned into fixed-point multipliers, and zero points are folded
into the biases (``bias - zp * row_sum(W)``) once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offload._graph import Tensor
from offload.errors import UnsupportedOpError
from offload.ops._base import OpKernel
from offload.ops._quant import (
    fixed_point_logistic_int16,
    fixed_point_tanh_int16,
    inv_sqrt_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from offload.quant import scale_zero_point

__all__ = ["IntegerLstmCell"]

_GATES = ("input", "forget", "cell", "output")
_INT16 = (-32768, 32767)
_INT8 = (-128, 127)
_GATE_SCALE = np.float32(2.0**-12)  # Q3.12: the gate accumulators without layer norm
_N_INTERMEDIATES = 5
_PEEPHOLE_INPUTS = {"input": 9, "forget": 10, "output": 11}


def _mbqm(x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier on int32 values, the left shift wrapping as in C++."""
    shift = np.asarray(shift, np.int64)
    shifted = np.asarray(x, np.int64) << np.maximum(shift, 0)
    shifted = ((shifted + 2**31) & 0xFFFFFFFF) - 2**31
    high = saturating_rounding_doubling_high_mul(shifted, multiplier)
    return rounding_divide_by_pot(high, np.maximum(-shift, 0))


def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + 32768) & 0xFFFF) - 32768


def _trunc_div(a: np.ndarray, b: int) -> np.ndarray:
    """C++ integer division (toward zero) of an int64 array by a positive int."""
    return np.where(a >= 0, a // b, -((-a) // b))


def _matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Exact ``x @ w.T`` of small integers via a float64 GEMM (every partial sum < 2**53)."""
    return (x.astype(np.float64) @ w.T).astype(np.int64)


def _multiplier(real: float | np.floating) -> tuple[int, int]:
    return quantize_multiplier(float(real))


@dataclass
class _LayerNorm:
    """TFLite's integer layer norm of one gate (``ApplyLayerNorm``)."""

    weight: np.ndarray  # int64 [n_cell], the int16 coefficients
    bias: np.ndarray  # int64 [n_cell], the gate's int32 bias
    multiplier: int
    shift: int
    variance_guard: int

    def __call__(self, gate: np.ndarray) -> np.ndarray:
        n = gate.shape[1]
        mean = _trunc_div(gate.sum(axis=1) * 1024, n)
        variance = (gate * gate).sum(axis=1) * ((1 << 20) // n) - mean * mean
        variance = _trunc_div(variance, 1 << 20)
        variance = np.where(variance < 1, self.variance_guard, variance)
        pairs = [inv_sqrt_quantized_multiplier(int(v), -1) for v in variance]
        inv = np.array([p[0] for p in pairs], np.int64)[:, None]
        inv_shift = np.array([p[1] for p in pairs], np.int64)[:, None]
        rescaled = _mbqm(1024 * gate - mean[:, None], inv, inv_shift)
        # int32 arithmetic in TFLite (not saturated): wrap as the C++ does.
        scaled = ((rescaled * self.weight + self.bias + 2**31) & 0xFFFFFFFF) - 2**31
        scaled = _trunc_div(scaled + np.where(scaled > 0, 512, -512), 1024)
        out = _mbqm(scaled, self.multiplier, self.shift + 12)
        return np.clip(out, *_INT16)


@dataclass
class _Gate:
    """One gate's weights, folded biases and multipliers."""

    input_w: np.ndarray  # float64 [n_cell, n_input] holding int8 values
    input_bias: np.ndarray  # int64 [n_cell]: bias (unless layer norm) - input_zp * row sums
    input_mult: tuple[int, int]
    recurrent_w: np.ndarray
    recurrent_bias: np.ndarray  # int64 [n_cell]: -output_state_zp * row sums
    recurrent_mult: tuple[int, int]
    peephole: np.ndarray | None  # int64 [n_cell], the int16 cell-to-gate weights
    peephole_mult: tuple[int, int]
    layer_norm: _LayerNorm | None
    sigmoid: bool

    def __call__(self, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> np.ndarray:
        gate = np.clip(_mbqm(_matmul(x, self.input_w) + self.input_bias, *self.input_mult), *_INT16)
        recurrent = _mbqm(_matmul(h, self.recurrent_w) + self.recurrent_bias, *self.recurrent_mult)
        gate = np.clip(gate + recurrent, *_INT16)
        if self.peephole is not None:
            gate = self._add_peephole(self.peephole, gate, c)
        if self.layer_norm is not None:
            gate = self.layer_norm(gate)
        if self.sigmoid:
            return fixed_point_logistic_int16(gate, 3).astype(np.int64)
        return fixed_point_tanh_int16(gate, 3).astype(np.int64)

    def _add_peephole(self, peephole: np.ndarray, gate: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``peephole`` (``self.peephole``) added to the gate. LiteRT's integer peephole walks
        the flattened [batch, cell] arrays in rows of n_output, not n_cell: with a projection
        (n_output < n_cell) only the first batch * n_output elements get a term, each weighted
        by ``peephole[i % n_output]``. Without a projection this is the plain per-cell
        product."""
        n_output = self.recurrent_w.shape[1]
        count = gate.shape[0] * n_output
        flat, cells = gate.reshape(-1).copy(), c.reshape(-1)[:count]
        weights = np.tile(peephole[:n_output], gate.shape[0])
        term = _mbqm(weights * cells, *self.peephole_mult)
        flat[:count] = np.clip(flat[:count] + term, *_INT16)
        return flat.reshape(gate.shape)


class IntegerLstmCell:
    """The weights and scales of a fully integer LSTM and its step function, built from the
    op's 24 inputs and 5 intermediates. Works on int64 arrays holding the integer values."""

    work_dtype = np.int64

    def __init__(self, kernel: OpKernel, values: list[np.ndarray | None]) -> None:
        inputs = kernel.inputs
        options = kernel.options
        node = kernel.node
        subgraph = kernel.subgraph
        describe = node.describe()

        def fail(message: str) -> UnsupportedOpError:
            return UnsupportedOpError(f"{describe}: fully integer LSTM: {message}")

        def tensor(i: int) -> Tensor | None:
            return inputs[i] if i < len(inputs) else None

        def scale_of(t: Tensor, what: str) -> np.float32:
            q = t.quantization
            if q is None or q.scale.size == 0:
                raise fail(
                    f"expected a quantized {what}, found tensor {t.index} ({t.name!r}) "
                    "without quantization"
                )
            if q.scale.size != 1:
                raise fail(
                    f"expected a per-tensor {what} scale, found {q.scale.size} scales "
                    f"on tensor {t.index} ({t.name!r})"
                )
            return scale_zero_point(q)[0]

        def zero_point_of(t: Tensor) -> int:
            return scale_zero_point(t)[1]

        def typed(i: int, dtype: type, what: str) -> np.ndarray | None:
            t = tensor(i)
            if t is None:
                return None
            if t.dtype != np.dtype(dtype):
                raise fail(
                    f"expected {np.dtype(dtype).name} {what} (input {i}), found {t.type_name}"
                )
            return np.asarray(values[i]).astype(np.int64)

        if options.get("kernel_type", "FULL") not in ("FULL", 0):
            raise fail(f"expected kernel_type FULL, found {options.kernel_type}")
        if options.get("diagonal_recurrent_tensors", False):
            raise fail("diagonal recurrent weights are not implemented")
        if len(node.intermediates) != _N_INTERMEDIATES:
            raise fail(
                f"expected {_N_INTERMEDIATES} intermediate tensors (the gate and hidden scales "
                f"the TFLite converter records for 8x8->16 integer LSTM), found "
                f"{len(node.intermediates)}; other integer LSTM variants are not implemented"
            )
        intermediates = [subgraph.tensors[i] for i in node.intermediates]
        x_t, h_t, c_t = kernel.input_tensor(0), tensor(18), tensor(19)
        if h_t is None or c_t is None:
            raise fail("expected output and cell state tensors (inputs 18 and 19)")
        if h_t.dtype != np.int8 or c_t.dtype != np.int16:
            raise fail(
                f"expected an int8 output state and an int16 cell state, found "
                f"{h_t.type_name} and {c_t.type_name}"
            )
        input_scale, input_zp = scale_of(x_t, "input"), zero_point_of(x_t)
        state_scale, state_zp = scale_of(h_t, "output state"), zero_point_of(h_t)
        cell_log2 = float(np.log2(np.float64(scale_of(c_t, "cell state"))))
        self.cell_scale = int(round(cell_log2))
        if abs(cell_log2 - self.cell_scale) >= 1e-3 or not -15 <= self.cell_scale <= -9:
            raise fail(
                f"expected a power-of-two cell state scale between 2**-15 and 2**-9, "
                f"found {2.0**cell_log2:g}"
            )

        weights: dict[tuple[str, str], tuple[np.ndarray | None, np.float32 | None]] = {}
        for k, g in enumerate(_GATES):
            for base, kind in ((1, "input"), (5, "recurrent")):
                w = typed(base + k, np.int8, f"{kind}-to-{g} weights")
                w_t = tensor(base + k)  # None exactly when w is
                weights[kind, g] = (w, None if w_t is None else scale_of(w_t, "weight"))
        self.use_cifg = weights["input", "input"][0] is None
        gates = _GATES[1:] if self.use_cifg else _GATES
        for g in gates:
            if weights["input", g][0] is None or weights["recurrent", g][0] is None:
                raise fail(f"expected input and recurrent weights for the {g} gate")
        layer_norm = {g: typed(20 + k, np.int16, f"{g} layer norm") for k, g in enumerate(_GATES)}
        use_layer_norm = layer_norm["forget"] is not None
        gate_scales = []
        for k in range(4):
            if use_layer_norm:
                gate_scales.append(scale_of(intermediates[k], f"gate intermediate {k}"))
            else:
                gate_scales.append(_GATE_SCALE)
        hidden_scale = scale_of(intermediates[4], "hidden intermediate")
        hidden_zp = zero_point_of(intermediates[4])

        self.gates: dict[str, _Gate] = {}
        for k, g in enumerate(_GATES):
            if g not in gates:
                continue
            w_in, s_in = weights["input", g]
            w_rec, s_rec = weights["recurrent", g]
            if w_in is None or s_in is None or w_rec is None or s_rec is None:  # checked above
                raise fail(f"expected input and recurrent weights for the {g} gate")
            bias = typed(12 + k, np.int32, f"{g} gate bias")
            bias = np.zeros(w_in.shape[0], np.int64) if bias is None else bias
            peep_at = _PEEPHOLE_INPUTS.get(g)
            peep_t = None if peep_at is None else tensor(peep_at)
            peephole = None if peep_at is None else typed(peep_at, np.int16, f"cell-to-{g} weights")
            peephole_mult = (0, 0)
            if peephole is not None and peep_t is not None:  # present together
                if w_rec.shape[1] > w_in.shape[0]:
                    raise fail(
                        f"peepholes with more outputs ({w_rec.shape[1]}) than cells "
                        f"({w_in.shape[0]}) are not implemented (LiteRT reads past its buffers)"
                    )
                s_peep = np.float64(scale_of(peep_t, "peephole weight"))
                real = np.float32(2.0**self.cell_scale * s_peep / np.float64(gate_scales[k]))
                peephole_mult = _multiplier(real)
            norm = None
            if use_layer_norm:
                ln_weight, ln_t = layer_norm[g], tensor(20 + k)  # None together
                if ln_weight is None or ln_t is None:
                    raise fail(f"expected {g} layer norm coefficients, as the forget gate has")
                ln_scale = scale_of(ln_t, "layer norm")
                guard = max(1, int(np.float32(10000) * ln_scale))
                norm = _LayerNorm(ln_weight, bias, *_multiplier(ln_scale), guard)
            self.gates[g] = _Gate(
                input_w=w_in.astype(np.float64),
                input_bias=(0 if use_layer_norm else bias) - input_zp * w_in.sum(axis=1),
                input_mult=_multiplier(s_in * input_scale / gate_scales[k]),
                recurrent_w=w_rec.astype(np.float64),
                recurrent_bias=-state_zp * w_rec.sum(axis=1),
                recurrent_mult=_multiplier(s_rec * state_scale / gate_scales[k]),
                peephole=peephole,
                peephole_mult=peephole_mult,
                layer_norm=norm,
                sigmoid=g != "cell",
            )

        self.hidden_mult = _multiplier(np.float32(2.0**-15 / np.float64(hidden_scale) * 2.0**-15))
        self.hidden_zp = hidden_zp
        self.state_zp = state_zp
        projection = typed(16, np.int8, "projection weights")
        proj_t = tensor(16)  # None exactly when projection is
        self.projection = None if projection is None else projection.astype(np.float64)
        if projection is not None and proj_t is not None:
            proj_bias = typed(17, np.int32, "projection bias")
            proj_bias = np.zeros(projection.shape[0], np.int64) if proj_bias is None else proj_bias
            self.projection_bias = proj_bias + hidden_zp * projection.sum(axis=1)
            proj_scale = scale_of(proj_t, "projection weight")
            self.projection_mult = _multiplier(proj_scale * hidden_scale / state_scale)
        cell_clip = np.float32(options.get("cell_clip", 0.0))
        proj_clip = np.float32(options.get("proj_clip", 0.0))
        out_scale = scale_of(kernel.outputs[0], "output")
        # float -> int16/int8 by truncation, as static_cast does. The float32 quotients are
        # widened to Python floats (exactly) for the comparisons with the int bounds.
        cell_clip_q = float(cell_clip / scale_of(c_t, "cell state"))
        self.cell_clip = int(min(max(cell_clip_q, -32768), 32767))
        self.cell_clip = self.cell_clip if cell_clip > 0 else 0
        self.proj_clip = (
            int(min(max(float(proj_clip / out_scale), -128), 127)) if proj_clip > 0 else 0
        )

    def step(self, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One time step on [batch, features] int64 rows holding int8 ``x``/``h`` and int16
        ``c``: returns (new output state, new cell state)."""
        forget = self.gates["forget"](x, h, c)
        cell_in = self.gates["cell"](x, h, c)
        if self.use_cifg:
            input_gate = _wrap16(32767 - forget)
        else:
            input_gate = self.gates["input"](x, h, c)
        kept = _wrap16(rounding_divide_by_pot(forget * c, 15))
        added = _wrap16(rounding_divide_by_pot(input_gate * cell_in, 30 + self.cell_scale))
        new_c = np.clip(kept + added, *_INT16)
        if self.cell_clip > 0:
            new_c = np.clip(new_c, -self.cell_clip, self.cell_clip)
        out_gate = self.gates["output"](x, h, new_c)
        hidden = out_gate * fixed_point_tanh_int16(new_c, 15 + self.cell_scale)
        if self.projection is None:
            new_h = np.clip(_mbqm(hidden, *self.hidden_mult) + self.hidden_zp, *_INT8)
            return new_h, new_c
        # LiteRT stores the projection input offset by -hidden_zp (b/246629213) and folds
        # +hidden_zp * row sums into the projection bias: replicate both.
        hidden = np.clip(_mbqm(hidden, *self.hidden_mult) - self.hidden_zp, *_INT8)
        acc = _matmul(hidden, self.projection) + self.projection_bias
        new_h = np.clip(_mbqm(acc, *self.projection_mult) + self.state_zp, *_INT8)
        if self.proj_clip > 0:
            new_h = np.clip(new_h, -self.proj_clip, self.proj_clip)
        return new_h, new_c
