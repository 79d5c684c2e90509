"""FULLY_CONNECTED: output = input rows @ weights(O, K).T + bias; float, hybrid (symmetric or
asymmetric per-row input quantization), int8/uint8 and 16x8, per-tensor or per-channel.

Float outputs are clamped to [lowest, max] as LiteRT's GEMM does, so an overflow gives
+-FLT_MAX, not inf. Only the hybrid kernel takes a non-clamp fused activation (TANH,
SIGN_BIT, SIGMOID); the others refuse one at prepare, and so does this kernel.

With constant weights and bias, int8/uint8 runs one exact float GEMM on the raw input (the
input zero point's share is a per-channel constant) and requantizes in float64 where that is
exact (:class:`~offload.ops._exact_gemm.RuyRequantizer`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offload.errors import UnsupportedOpError
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._bias import bias_types
from offload.ops._conv import (
    IntegerGemm,
    Rounding,
    RuyRequantizer,
    bias_is_wide,
    eigen_order_gemv,
    filter_scales,
    filter_zero_point,
    finish_quantized,
    float_order_matters,
    kind_of,
    output_multipliers,
    quantize_rows,
    real_multipliers,
    scale_zp,
    scratch,
    weight_value,
)
from offload.ops._elementwise import float_clamp
from offload.ops._registry import register
from offload.ops._types import WEIGHTS, accepts, one_of
from offload.quant import activation_range_quantized, wrap_int32


def fc_shape(x: Shape, weights: Shape, keep_num_dims: bool) -> Shape:
    """The output of an input ``x`` and (units, depth) weights: ``x`` with its last dim
    replaced by units (keep_num_dims), else (rows, units) with ``x`` flattened to rows of depth."""
    check_shape(len(weights) == 2, f"expected 2-D weights, found shape {list(weights)}")
    units, depth = weights
    check_shape(depth >= 1, f"expected weights of depth >= 1, found shape {list(weights)}")
    if keep_num_dims:
        check_shape(
            len(x) >= 1 and x[-1] == depth,
            f"expected an input whose last dim is the weights' depth {depth} (keep_num_dims), "
            f"found {list(x)}",
        )
        return (*x[:-1], units)
    size = math.prod(x)
    # LiteRT floors the row count and ignores the remainder; a row cut short is a broken
    # model, so it is refused here.
    check_shape(
        size % depth == 0,
        f"expected an input size a multiple of the weights' depth {depth}, found {list(x)}",
    )
    return (size // depth, units)


# The fused activations LiteRT's float and quantized kernels take (clamps, all of them).
_CLAMP_ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6")


@register
class FullyConnected(OpKernel):
    op = "FULLY_CONNECTED"
    types = accepts(
        "FLOAT32",
        "INT8 UINT8 INT16",
        output=one_of("FLOAT32", "INT8 UINT8 INT16"),
        others={1: WEIGHTS},
        across=bias_types(0, 2, "either"),
    )
    # v8 (sparse weights) and v14 (int2 weights) are refused in setup.
    max_version = 13

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        weights = ctx.shape(1)
        shape = fc_shape(ctx.shape(0), weights, bool(ctx.options.get("keep_num_dims", False)))
        if ctx.has(2):
            bias = math.prod(ctx.shape(2))
            check_shape(
                bias == weights[0],
                f"expected {weights[0]} bias values (one per unit), found {bias}",
            )
        # Shuffled int8 weights add a workspace output, sized by the kernel; not a shape rule.
        return [shape, *[None] * (len(ctx.node.outputs) - 1)]

    def setup(self) -> None:
        opts = self.options
        self.activation = opts.get("fused_activation_function", "NONE") or "NONE"
        self.keep_num_dims = bool(opts.get("keep_num_dims", False))
        self.asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
        x, f, out = self.input_tensor(0), self.input_tensor(1), self.outputs[0]
        if f.sparsity is not None or opts.get("weights_format", 0) not in (0, "DEFAULT"):
            raise UnsupportedOpError(
                f"{self.node.describe()}: sparse or shuffled FULLY_CONNECTED weights are not "
                "supported by the CPU reference; densify the model's weights first"
            )
        self.kind = kind_of(x, f)
        self._litert_order = self.kind == "float" and float_order_matters(self.subgraph)
        if self.kind != "hybrid" and self.activation not in _CLAMP_ACTIVATIONS:
            raise UnsupportedOpError(
                f"{self.node.describe()}: expected a fused activation among "
                f"{', '.join(_CLAMP_ACTIVATIONS)} for {self.kind} FULLY_CONNECTED, found "
                f"{self.activation} (LiteRT refuses it at prepare; only the hybrid kernel "
                "takes it)"
            )
        if self.kind == "hybrid" and f.type_name == "INT4":
            raise UnsupportedOpError(
                f"{self.node.describe()}: hybrid FULLY_CONNECTED with INT4 weights (LiteRT's "
                "4-bit kernel) is not supported by the CPU reference"
            )
        self.units = f.shape[0]
        self.weights_shape = tuple(f.shape)
        self.w_zp = filter_zero_point(f) if self.kind == "quantized" else 0
        weights = weight_value(self, 1)
        self.w = None if weights is None else self._gemm_weights(weights)
        if self.kind == "hybrid":
            # Any per-channel quantization (even with equal scales) takes the per-channel path.
            self.scales = filter_scales(f, self.units)
            f_quantization = self.required(f.quantization, "quantization on the weights (input 1)")
            self.per_channel = f_quantization.scale.size > 1
        elif self.kind == "quantized":
            in_scale, self.x_zp = scale_zp(x)
            f_quantization = self.required(f.quantization, "quantization on the weights (input 1)")
            self.mult, self.shift = output_multipliers(
                in_scale, f_quantization, scale_zp(out)[0], self.units
            )
            bias = self.inputs[2] if len(self.inputs) > 2 else None
            # ruy's rounding unless int16 falls back to the reference kernel, which
            # scales by the real multiplier in double.
            self.rounding: Rounding = "ruy"
            wide = bias_is_wide(bias, opts.get("quantized_bias_type", 0))
            if x.dtype == np.int16 and (wide or self.x_zp or scale_zp(out)[1]):
                self.rounding = "real"
                self.mult = real_multipliers(in_scale, f_quantization, scale_zp(out)[0], self.units)
        self._fast = self._setup_fast() if self.kind == "quantized" else None
        self._hybrid: tuple[IntegerGemm, np.ndarray] | None = None
        if self.kind == "hybrid" and self.w is not None:
            self._hybrid = (IntegerGemm(np.int8, self.w), np.rint(self.w.sum(axis=0)))

    def _setup_fast(self) -> tuple[IntegerGemm, RuyRequantizer] | None:
        """The exact float path's GEMM weights and requantizer, or None where it does not
        apply (runtime weights or bias, ruy not LiteRT's rounding, or not provably exact)."""
        x, out = self.input_tensor(0), self.outputs[0]
        if self.w is None or self.rounding != "ruy":
            return None
        bias: np.ndarray = np.zeros(self.units, np.int64)
        if len(self.inputs) > 2 and self.inputs[2] is not None:
            bias_value = self.constant(2)
            if bias_value is None:
                return None
            bias = bias_value
        # sum (x - zx) * w + bias = sum x * w + (bias - zx * sum w)
        column_sums = np.rint(self.w.sum(axis=0)).astype(np.int64)
        offset = np.asarray(bias, np.int64).ravel() - self.x_zp * column_sums
        out_quantization = self.required(out.quantization, "quantization on the output")
        clamp = activation_range_quantized(self.activation, out_quantization, out.dtype)
        requantizer = RuyRequantizer.build(
            self.mult, self.shift, offset, scale_zp(out)[1], clamp, out.dtype
        )
        return None if requantizer is None else (IntegerGemm(x.dtype, self.w), requantizer)

    def _gemm_weights(self, w: np.ndarray) -> np.ndarray:
        """(O, K) -> contiguous (K, O): float32, or float64 without its zero point."""
        if self.kind == "float":
            return np.ascontiguousarray(np.asarray(w, np.float32).T)
        mat = np.asarray(w, np.float64)
        if self.kind == "quantized":
            mat = mat - np.reshape(self.w_zp, (-1, 1))
        return np.ascontiguousarray(mat.T)

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        x = self.required(inputs[0], "input 0")
        bias = inputs[2] if len(inputs) > 2 else None
        w = (
            self.w
            if self.w is not None
            else self._gemm_weights(self.required(inputs[1], "input 1"))
        )
        shape = fc_shape(x.shape, self.weights_shape, self.keep_num_dims)
        rows = x.reshape(-1, w.shape[0])
        if self.kind == "float":
            # An overflow to inf is expected here: the clamp turns it into +-FLT_MAX.
            with np.errstate(over="ignore", invalid="ignore"):
                if len(rows) == 1 and self._litert_order:
                    # One row is Eigen's matrix-vector product; its order is LiteRT's bits.
                    out = eigen_order_gemv(
                        np.asarray(rows[0], np.float32), w, np.empty((1, w.shape[1]), np.float32)
                    )
                else:
                    out = np.asarray(rows, np.float32) @ w
                if bias is not None:
                    out += bias
            return float_clamp(out.reshape(shape), self.activation)
        if self.kind == "hybrid":
            return self._run_hybrid(rows, w, bias).reshape(shape)
        if self._fast is not None:
            gemm, requantize = self._fast
            cols = scratch("fc_rows", rows.size, gemm.dtype).reshape(rows.shape)
            np.copyto(cols, rows)
            return requantize(gemm(cols), np.empty(shape, self.outputs[0].dtype))
        acc = np.rint((rows.astype(np.float64) - self.x_zp) @ w).astype(np.int64)
        if bias is not None:
            acc += bias.astype(np.int64)
        if x.dtype != np.int16:  # int16 inputs accumulate in int64 in LiteRT too
            acc = wrap_int32(acc)
        out = finish_quantized(
            acc, self.mult, self.shift, self.outputs[0], self.activation, self.rounding
        )
        return out.reshape(shape)

    def _run_hybrid(self, rows: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        q, in_scale, offset = quantize_rows(rows, self.asymmetric)
        if self._hybrid is not None:
            # The codes' exact GEMM less each row's zero point times the column sums, rounded
            # once to float32 as LiteRT converts its int32 accumulators (both terms are exact
            # in the GEMM's type, so a float32 subtraction rounds the exact difference).
            gemm, column_sums = self._hybrid
            acc = gemm(q.astype(gemm.dtype))
            if np.any(offset):
                acc -= offset[:, None].astype(acc.dtype) * column_sums.astype(acc.dtype)
            acc = acc.astype(np.float32)
        else:
            # Exact int32 dot products, less row_sum * offset for asymmetric inputs.
            acc = np.rint((q.astype(np.float64) - offset[:, None]) @ w).astype(np.float32)
        if self.per_channel:
            scale = (in_scale[:, None] * self.scales[None, :]).astype(np.float32)
        else:
            scale = (in_scale * self.scales[0]).astype(np.float32)[:, None]
        out = acc * scale
        if bias is not None:
            out = np.asarray(bias, np.float32) + out
        return apply_fused_activation(out, self.activation)
