"""TRANSPOSE_CONV: the gradient of CONV_2D. Inputs: output shape, OHWI weights, NHWC input,
optional bias (v3+); float, hybrid, int8 and 16x8.

One GEMM gives every input pixel's contribution to a KH x KW output patch; the patches are
then scatter-added tap by tap (col2im) and the padding cropped, as LiteRT's TransposeConvV2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.geometry import geometry
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._conv import (
    bias_is_wide,
    filter_scales,
    filter_zero_point,
    finish_quantized,
    kind_of,
    output_multipliers,
    quantize_rows,
    scale_zp,
    weight_value,
)
from offload.ops._registry import register
from offload.ops._shape import int_list


def _check_operands(x: Shape, f: Shape, bias: Shape | None, options: Any) -> None:
    """TFLite's Prepare checks: NHWC input, OHWI filter with the input's channels, one bias
    per output channel, positive strides."""
    check_shape(
        len(x) == 4 and len(f) == 4,
        f"expected a 4-D input and a 4-D filter, found {list(x)} and {list(f)}",
    )
    check_shape(x[3] == f[3], f"expected a filter of {x[3]} input channels, found {list(f)}")
    check_shape(
        bias is None or math.prod(bias) == f[0],
        f"expected a bias of {f[0]} values, found shape {list(bias or ())}",
    )
    strides = [options.get("stride_h", 1), options.get("stride_w", 1)]
    check_shape(min(strides) >= 1, f"expected positive strides, found {strides}")


def transposed_shape(output_shape: np.ndarray, x: Shape, f: Shape) -> Shape:
    """The output shape the first input asks for; its batch and channels must be those the
    kernel writes (the input's batch, the filter's output channels)."""
    dims = int_list(output_shape)
    check_shape(
        len(dims) == 4 and min(dims) >= 0 and dims[0] == x[0] and dims[3] == f[0],
        f"expected an output_shape [{x[0]}, height, width, {f[0]}], found {dims}",
    )
    return (dims[0], dims[1], dims[2], dims[3])


@register
class TransposeConv(OpKernel):
    op = "TRANSPOSE_CONV"
    max_version = 5

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, f = ctx.shape(2), ctx.shape(1)
        _check_operands(x, f, ctx.shapes[3] if ctx.has(3) else None, ctx.options)
        output_shape = ctx.constant(0)
        return [None if output_shape is None else transposed_shape(output_shape, x, f)]

    def setup(self) -> None:
        opts = self.options
        self.stride = (opts.get("stride_h", 1), opts.get("stride_w", 1))
        self.padding = opts.get("padding", "SAME")
        self.activation = opts.get("fused_activation_function", "NONE")
        f, x, out = self.inputs[1], self.inputs[2], self.outputs[0]
        self.kernel_hw = (f.shape[1], f.shape[2])
        self.kind = kind_of(x, f)
        self.w_zp = filter_zero_point(f) if self.kind == "quantized" else 0
        weights = weight_value(self, 1)
        self.w = None if weights is None else self._gemm_weights(weights)
        if self.kind == "hybrid":
            self.scales = filter_scales(f, f.shape[0])
        elif self.kind == "quantized":
            in_scale, self.x_zp = scale_zp(x)
            self.mult, self.shift = output_multipliers(
                in_scale, f.quantization, scale_zp(out)[0], f.shape[0]
            )
            bias = self.inputs[3] if len(self.inputs) > 3 else None
            wide = x.dtype == np.int16 and bias_is_wide(bias, opts.get("quantized_bias_type", 0))
            self.rounding = "wide" if wide else "double"

    def _gemm_weights(self, w: np.ndarray) -> np.ndarray:
        """OHWI -> (I, KH*KW*O): one row per input channel."""
        dtype = np.float32 if self.kind == "float" else np.float64
        mat = np.asarray(w, dtype)
        if self.kind == "quantized":
            mat = mat - np.reshape(self.w_zp, (-1, 1, 1, 1))
        return np.ascontiguousarray(mat.transpose(3, 1, 2, 0).reshape(w.shape[3], -1))

    def _col2im(self, cols: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
        """Scatter-add (N, H, W, KH, KW, O) contributions, then crop the padding."""
        n, h, w, kh, kw, o = cols.shape
        sh, sw = self.stride
        g = geometry(self.padding, out_hw, self.kernel_hw, self.stride)
        # Only rows and columns before the crop's far edge are kept: sizing the buffer by the
        # whole scatter would let a huge stride in a tiny model allocate gigabytes.
        end_h, end_w = g.pad_top + out_hw[0], g.pad_left + out_hw[1]
        buf = np.zeros((n, end_h, end_w, o), cols.dtype)
        for ky in range(kh):
            ys = range(ky, end_h, sh)[:h]  # the rows input rows land on, inside the buffer
            for kx in range(kw):
                xs = range(kx, end_w, sw)[:w]
                buf[:, ys.start : ys.stop : sh, xs.start : xs.stop : sw] += cols[
                    :, : len(ys), : len(xs), ky, kx
                ]
        return buf[:, g.pad_top :, g.pad_left :]

    def run(self, *inputs: np.ndarray | None) -> np.ndarray:
        out_shape, f, x = inputs[0], inputs[1], inputs[2]
        bias = inputs[3] if len(inputs) > 3 else None
        w = self.w if self.w is not None else self._gemm_weights(f)
        _, out_h, out_w, _ = transposed_shape(out_shape, x.shape, f.shape)
        out_hw = (out_h, out_w)
        n, h, wd, c = x.shape
        kh, kw = self.kernel_hw
        if self.kind == "float":
            cols = (np.asarray(x, np.float32).reshape(-1, c) @ w).reshape(n, h, wd, kh, kw, -1)
            out = np.ascontiguousarray(self._col2im(cols, out_hw))
            if bias is not None:
                out += bias
            return apply_fused_activation(out, self.activation)
        if self.kind == "hybrid":
            q, in_scale, offset = quantize_rows(x.reshape(n, -1), asymmetric=True)
            xs = q.reshape(n, -1, c).astype(np.float64) - offset[:, None, None]
        else:
            xs = x.astype(np.float64).reshape(n, -1, c) - self.x_zp
        cols = np.rint(xs @ w).astype(np.int64).reshape(n, h, wd, kh, kw, -1)
        acc = self._col2im(cols, out_hw)
        if self.kind == "hybrid":
            out = acc.astype(np.float32) * self.scales * in_scale[:, None, None, None]
            if bias is not None:
                out += bias
            return apply_fused_activation(out, self.activation)
        if bias is not None:
            acc = acc + bias.astype(np.int64)
        return finish_quantized(
            acc, self.mult, self.shift, self.outputs[0], self.activation, self.rounding
        )
