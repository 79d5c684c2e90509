"""TRANSPOSE_CONV: the gradient of CONV_2D. Inputs: output shape, OHWI weights, NHWC input,
optional bias (v3+); float, hybrid, int8 and 16x8.

One GEMM gives every input pixel's contribution to a KH x KW output patch; the patches are
then scatter-added tap by tap (col2im) and the padding cropped, as LiteRT's TransposeConvV2.
The int8 path runs the GEMM and the scatter in float32 where every sum is provably exact
(so in any order: tap-major, into one grid per output phase), then requantizes with
:class:`~offload.ops._conv.RuyRequantizer`. LiteRT's optimized kernel requantizes output
channels eight at a time like ruy (the second rounding sends halves up) and only the last
``channels % 8`` with TFLite's reference rounding (halves away from zero): rounding them all
the reference way was one step off on ~0.1% of small_cnn's outputs.
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
    Rounding,
    RuyRequantizer,
    bias_is_wide,
    filter_scales,
    filter_zero_point,
    finish_quantized,
    kind_of,
    output_multipliers,
    quantize_rows,
    scale_zp,
    scratch,
    weight_value,
)
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.quant import activation_range_quantized


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
        # Float32 weights where every sum the kernel makes of |codes| <= 255 stays exact.
        self._w32: np.ndarray | None = None
        if self.kind == "hybrid":
            self.scales = filter_scales(f, f.shape[0])
            if self.w is not None and self._exact_in_float32(255):
                self._w32 = self._tap_weights()
        elif self.kind == "quantized":
            in_scale, self.x_zp = scale_zp(x)
            self.mult, self.shift = output_multipliers(
                in_scale, f.quantization, scale_zp(out)[0], f.shape[0]
            )
            bias = self.inputs[3] if len(self.inputs) > 3 else None
            wide = x.dtype == np.int16 and bias_is_wide(bias, opts.get("quantized_bias_type", 0))
            self.rounding: Rounding = "wide" if wide else "double"
            # LiteRT's optimized kernel (int8, and 16x8 with an int32 bias and no zero points)
            # requantizes channels eight at a time with (emulated) NEON: rounding doubling
            # high multiply, then a rounding shift, both sending halves up, as ruy does; the
            # last out_channels % 8 channels go one by one through TFLite's reference
            # MultiplyByQuantizedMultiplier, halves away from zero.
            zero_points = self.x_zp or scale_zp(out)[1] or np.any(self.w_zp)
            optimized = x.dtype == np.int8 or (x.dtype == np.int16 and not wide and not zero_points)
            self.ruy_channels = 8 * (f.shape[0] // 8) if optimized else 0
        self._fast = self._setup_fast() if self.kind == "quantized" else None

    def _exact_in_float32(self, max_x: int) -> bool:
        """Whether inputs up to ``max_x`` in magnitude (less their zero point) keep every sum
        exact in float32: an output gathers at most all KH*KW*I products of its channel, so
        every partial sum, in the GEMM or the scatter, is bounded by their magnitudes."""
        channels = self.inputs[1].shape[0]
        per_output = np.abs(self.w).reshape(self.w.shape[0], -1, channels).sum(axis=(0, 1))
        return max_x * int(per_output.max(initial=0)) < 1 << 24

    def _setup_fast(self) -> tuple[np.ndarray, RuyRequantizer] | None:
        """Float32 GEMM weights and the requantizer of the int8 path, or None where a sum
        could be inexact in float32 or the requantization needs the int64 path."""
        x, f, out = self.inputs[2], self.inputs[1], self.outputs[0]
        if self.w is None or not self.ruy_channels:
            return None
        bias = np.zeros(f.shape[0], np.int64)
        if len(self.inputs) > 3 and self.inputs[3] is not None:
            bias = self.constant(3)
            if bias is None:
                return None
        info = np.iinfo(x.dtype)
        if not self._exact_in_float32(max(self.x_zp - int(info.min), int(info.max) - self.x_zp)):
            return None
        clamp = activation_range_quantized(self.activation, out.quantization, out.dtype)
        requantizer = RuyRequantizer.build(
            self.mult,
            self.shift,
            np.asarray(bias, np.int64).ravel(),
            scale_zp(out)[1],
            clamp,
            out.dtype,
        )
        return None if requantizer is None else (self._tap_weights(), requantizer)

    def _tap_weights(self) -> np.ndarray:
        """The GEMM weights (I, KH*KW*O) as float32 taps (KH*KW, I, O): see _exact_col2im."""
        channels, taps = self.w.shape[0], self.kernel_hw[0] * self.kernel_hw[1]
        w = self.w.reshape(channels, taps, -1).transpose(1, 0, 2)
        return np.ascontiguousarray(w, np.float32)

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

    def _exact_col2im(
        self, xs: np.ndarray, taps: np.ndarray, in_hw: tuple[int, int], out_hw: tuple[int, int]
    ) -> np.ndarray:
        """:meth:`_col2im` of ``xs`` (N, H*W, I) times the tap weights (KH*KW, I, O), where
        every sum is an exact integer in float32 (so its order is free): contiguous
        (N, OH, OW, O) float32.

        Output row Y = y * stride + ky has phase Y % stride = ky % stride, so each tap adds a
        whole shifted block to one of stride_h * stride_w phase grids, and the phases are
        interleaved into the output once: numpy's passes run along whole rows of W * O
        values instead of O values per pixel, several times faster on small layers."""
        n = xs.shape[0]
        (h, w), (kh, kw), (sh, sw) = in_hw, self.kernel_hw, self.stride
        channels = taps.shape[2]
        g = geometry(self.padding, out_hw, self.kernel_hw, self.stride)
        end_h, end_w = g.pad_top + out_hw[0], g.pad_left + out_hw[1]
        rows, cols = -(-end_h // sh), -(-end_w // sw)  # phase grid: rows r hold Y = r*sh + py
        contributions = np.matmul(xs[:, None], taps)  # (N, KH*KW, H*W, O)
        contributions = contributions.reshape(n, kh * kw, h, w, channels)
        phases = scratch("transpose_conv_phases", sh * sw * n * rows * cols * channels, np.float32)
        phases = phases.reshape(sh, sw, n, rows, cols, channels)
        phases.fill(0)
        for ky in range(kh):
            dy, py = divmod(ky, sh)
            count_y = min(h, rows - dy)
            for kx in range(kw):
                dx, px = divmod(kx, sw)
                count_x = min(w, cols - dx)
                if count_y > 0 and count_x > 0:
                    phases[py, px, :, dy : dy + count_y, dx : dx + count_x] += contributions[
                        :, ky * kw + kx, :count_y, :count_x
                    ]
        out = np.empty((n, *out_hw, channels), np.float32)
        for py in range(sh):
            y0 = (py - g.pad_top) % sh  # the first output row of this phase
            r0, count_y = (y0 + g.pad_top) // sh, len(range(y0, out_hw[0], sh))
            for px in range(sw):
                x0 = (px - g.pad_left) % sw
                c0, count_x = (x0 + g.pad_left) // sw, len(range(x0, out_hw[1], sw))
                out[:, y0::sh, x0::sw] = phases[py, px, :, r0 : r0 + count_y, c0 : c0 + count_x]
        return out

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
        if self._fast is not None:
            taps, requantize = self._fast
            xs = np.subtract(x.reshape(n, -1, c), np.float32(self.x_zp), dtype=np.float32)
            acc = self._exact_col2im(xs, taps, (h, wd), out_hw)
            result = np.empty(acc.shape, self.outputs[0].dtype)
            requantize(acc.reshape(-1, acc.shape[3]), result, block=acc.shape[2])
            v = self.ruy_channels
            if v < acc.shape[3]:  # the channels LiteRT requantizes one by one
                tail = acc[..., v:].astype(np.int64)
                if bias is not None:
                    tail += bias.astype(np.int64)[v:]
                result[..., v:] = finish_quantized(
                    tail,
                    self.mult[v:],
                    self.shift[v:],
                    self.outputs[0],
                    self.activation,
                    self.rounding,
                )
            return result
        if self.kind == "hybrid" and self._w32 is not None:
            q, in_scale, offset = quantize_rows(x.reshape(n, -1), asymmetric=True)
            xs = np.subtract(q.reshape(n, -1, c), offset[:, None, None], dtype=np.float32)
            acc = self._exact_col2im(xs, self._w32, (h, wd), out_hw)
            out = acc * self.scales * in_scale[:, None, None, None]
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
        out = finish_quantized(
            acc, self.mult, self.shift, self.outputs[0], self.activation, self.rounding
        )
        if self.ruy_channels:
            v = self.ruy_channels
            out[..., :v] = finish_quantized(
                acc[..., :v],
                self.mult[:v],
                self.shift[:v],
                self.outputs[0],
                self.activation,
                "ruy",
            )
        return out
