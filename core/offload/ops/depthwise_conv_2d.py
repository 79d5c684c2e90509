"""DEPTHWISE_CONV_2D: each input channel c convolved with its own depth_multiplier filters,
output channel c * multiplier + m; float, hybrid, int8/uint8 and 16x8.

The work is a loop over the KH*KW filter taps, each a vectorised multiply-add over the
whole output, in tap order. The float path with constant weights (every float model) runs
on per-shape buffers laid out so that each tap is a few long contiguous passes; see
:class:`_FloatPlan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from offload.geometry import Geometry, window_geometry, window_options
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._conv import (
    check_bias,
    filter_scales,
    filter_zero_point,
    finish_quantized,
    kind_of,
    output_multipliers,
    pad_spatial,
    quantize_rows,
    scale_zp,
    weight_value,
)
from offload.ops._registry import register


def depthwise_shape(
    x: Shape,
    f: Shape,
    padding: str,
    stride: tuple[int, int],
    dilation: tuple[int, int],
) -> tuple[Geometry, Shape]:
    """The window geometry and NHWC output shape of an NHWC input ``x`` and a [1, H, W, C*M]
    filter ``f``, after LiteRT's Prepare checks. The multiplier M is out / in channels, as
    LiteRT computes it; the ``depth_multiplier`` option is not read (LiteRT ignores it)."""
    check_shape(
        len(x) == 4 and len(f) == 4,
        f"expected a 4-D NHWC input and a 4-D [1, H, W, C] filter, found {list(x)} and {list(f)}",
    )
    check_shape(f[0] == 1, f"expected a depthwise filter of shape [1, H, W, C], found {list(f)}")
    check_shape(
        x[3] >= 1 and f[3] % x[3] == 0,
        f"expected filter channels a multiple of the input channels {x[3]}, found {f[3]}",
    )
    g = window_geometry(padding, (x[1], x[2]), (f[1], f[2]), stride, dilation)
    return g, (x[0], g.out_h, g.out_w, f[3])


@dataclass
class _FloatPlan:
    """Buffers of the float path for one input shape, built at setup (or on a resize).

    numpy multiplies an (..., C) array by a (C,) weight vector one C-long row at a time, which
    is several times slower than a contiguous pass when C is a few dozen channels. So the
    padded input lives in persistent buffers, one per column phase of the width stride (all
    columns congruent modulo stride_w), in which every tap's output rows are contiguous runs
    of OW*C values; weights and bias are tiled to that length once. Padding stays zero from
    allocation: only the interior is rewritten on each run.
    """

    fills: list[tuple[np.ndarray, slice]]  # (interior of a phase buffer, its input columns)
    taps: list[np.ndarray]  # (N, OH, OW*C) read-only views into the phases, in filter order
    weights: np.ndarray  # (KH*KW, OW*C)
    bias: np.ndarray | None  # (OW*C,) when the bias is constant
    scratch: np.ndarray  # (N, OH, OW*C)
    out_shape: Shape


@register
class DepthwiseConv2D(OpKernel):
    op = "DEPTHWISE_CONV_2D"
    max_version = 7

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        stride, dilation, padding, _ = window_options(ctx.options)
        f = ctx.shape(1)
        _, shape = depthwise_shape(ctx.shape(0), f, padding, stride, dilation)
        check_bias(ctx, f[3])
        return [shape]

    def setup(self) -> None:
        self.stride, self.dilation, self.padding, self.activation = window_options(self.options)
        x, f, out = self.inputs[0], self.inputs[1], self.outputs[0]
        self.filter_shape = tuple(f.shape)
        self.kernel_hw = (f.shape[1], f.shape[2])
        self.kind = kind_of(x, f)
        self.w_zp = filter_zero_point(f) if self.kind == "quantized" else 0
        weights = weight_value(self, 1)
        self.w = None if weights is None else self._tap_weights(weights)
        out_ch = f.shape[3]
        if self.kind == "hybrid":
            self.scales = filter_scales(f, out_ch)
        elif self.kind == "quantized":
            in_scale, self.x_zp = scale_zp(x)
            self.mult, self.shift = output_multipliers(
                in_scale, f.quantization, scale_zp(out)[0], out_ch
            )
            # The int16 kernel accumulates in int64 with an int64 bias.
            self.rounding = "wide" if x.dtype == np.int16 else "double"
        # One plan, for the latest input shape: a resize replaces it rather than adding one.
        self._plan: tuple[tuple[int, ...], _FloatPlan] | None = None
        self._fast = self.kind == "float" and self.w is not None and out_ch == x.shape[3]
        self.writes_into = self._fast
        if self._fast and len(x.shape) == 4 and all(d > 0 for d in x.shape):
            # Built here, at allocate_tensors, for the model's shape; a resized input
            # rebuilds it on the first run with the new shape.
            self._plan = (tuple(x.shape), self._float_plan(tuple(x.shape)))

    def _shape(self, x_shape: Shape) -> tuple[Geometry, Shape]:
        return depthwise_shape(x_shape, self.filter_shape, self.padding, self.stride, self.dilation)

    def _tap_weights(self, w: np.ndarray) -> np.ndarray:
        """(1, KH, KW, C*M) -> (KH, KW, C*M) in the arithmetic's dtype, zero point removed."""
        if self.kind == "float":
            return np.asarray(w, np.float32)[0]
        return (np.asarray(w, np.int64) - self.w_zp)[0]

    def _accumulate(self, x: np.ndarray, g: Geometry, w: np.ndarray, acc: np.ndarray) -> None:
        """acc (N, OH, OW, C*M) += each tap's strided slice of padded x times its weights."""
        multiplier = acc.shape[3] // x.shape[3]
        if multiplier > 1:
            # Repeat channels so every array keeps C*M as its innermost, contiguous axis.
            x = np.repeat(x, multiplier, axis=3)
        (sh, sw), (dh, dw) = self.stride, self.dilation
        tmp = np.empty_like(acc)
        first = True
        for ky in range(self.kernel_hw[0]):
            for kx in range(self.kernel_hw[1]):
                tap = x[
                    :,
                    ky * dh : ky * dh + (g.out_h - 1) * sh + 1 : sh,
                    kx * dw : kx * dw + (g.out_w - 1) * sw + 1 : sw,
                ]
                # The first tap writes the accumulator directly: one pass fewer per call.
                np.multiply(tap, w[ky, kx], out=acc if first else tmp)
                if not first:
                    acc += tmp
                first = False

    def _float_plan(self, shape: tuple[int, ...]) -> _FloatPlan:
        assert self.w is not None
        n, h, wd, c = shape
        (sh, sw), (dh, dw) = self.stride, self.dilation
        kh, kw = self.kernel_hw
        g, out_shape = self._shape(shape)
        padded_h = g.pad_top + h + g.pad_bottom
        padded_w = g.pad_left + wd + g.pad_right
        phases, fills = [], []
        for phase in range(sw):
            buf = np.zeros((n, padded_h, len(range(phase, padded_w, sw)), c), np.float32)
            first = (phase - g.pad_left) % sw  # the first input column that lands here
            count = len(range(first, wd, sw))
            col = (first + g.pad_left - phase) // sw
            if count:
                interior = buf[:, g.pad_top : g.pad_top + h, col : col + count]
                fills.append((interior, slice(first, wd, sw)))
            phases.append(buf)
        taps = []
        itemsize = np.dtype(np.float32).itemsize
        for ky in range(kh):
            for kx in range(kw):
                buf = phases[(kx * dw) % sw]
                start = buf[:, ky * dh :, (kx * dw) // sw :]
                taps.append(
                    np.lib.stride_tricks.as_strided(
                        start,
                        (n, g.out_h, g.out_w * c),
                        (buf.strides[0], buf.strides[1] * sh, itemsize),
                        writeable=False,
                    )
                )
        weights = np.tile(self.w.reshape(kh * kw, 1, c), (1, g.out_w, 1))
        bias = self.constant(2) if len(self.inputs) > 2 else None
        return _FloatPlan(
            fills=fills,
            taps=taps,
            weights=weights.reshape(kh * kw, g.out_w * c),
            bias=None if bias is None else np.tile(np.asarray(bias, np.float32), g.out_w),
            scratch=np.empty((n, g.out_h, g.out_w * c), np.float32),
            out_shape=out_shape,
        )

    def _run_float_plan(
        self, x: np.ndarray, bias: np.ndarray | None, out: np.ndarray | None
    ) -> np.ndarray:
        if self._plan is None or self._plan[0] != x.shape:
            self._plan = (x.shape, self._float_plan(x.shape))
        plan = self._plan[1]
        for interior, columns in plan.fills:
            np.copyto(interior, x[:, :, columns])
        if self.fits(out, plan.out_shape, np.dtype(np.float32)):
            assert out is not None
            acc = out.reshape(plan.scratch.shape)
        else:
            acc = np.empty(plan.scratch.shape, np.float32)
        np.multiply(plan.taps[0], plan.weights[0], out=acc)
        for tap, weights in zip(plan.taps[1:], plan.weights[1:]):
            np.multiply(tap, weights, out=plan.scratch)
            acc += plan.scratch
        out = acc.reshape(plan.out_shape)
        if plan.bias is not None:
            acc += plan.bias  # TFLite adds the bias after the taps
        elif bias is not None:
            out += bias
        return apply_fused_activation(out, self.activation)

    def run(self, *inputs: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
        x, f = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        if self._fast and x.dtype == np.float32:
            return self._run_float_plan(x, bias, out)
        w = self.w if self.w is not None else self._tap_weights(f)
        n = x.shape[0]
        g, shape = self._shape(x.shape)
        if self.kind == "float":
            acc = np.empty(shape, np.float32)
            self._accumulate(pad_spatial(np.asarray(x, np.float32), g), g, w, acc)
            if bias is not None:
                acc += bias  # TFLite adds the bias after the taps
            return apply_fused_activation(acc, self.activation)
        if self.kind == "hybrid":
            q, in_scale, offset = quantize_rows(x.reshape(n, -1), asymmetric=True)
            xs = q.reshape(x.shape).astype(np.int64) - offset.reshape(-1, 1, 1, 1)
        else:
            xs = x.astype(np.int64) - self.x_zp
        acc = np.zeros(shape, np.int64)
        self._accumulate(pad_spatial(xs, g), g, w, acc)
        if self.kind == "hybrid":
            out = acc.astype(np.float32) * in_scale[:, None, None, None] * self.scales
            if bias is not None:
                out += bias
            return apply_fused_activation(out, self.activation)
        if bias is not None:
            acc += bias.astype(np.int64)
        return finish_quantized(
            acc, self.mult, self.shift, self.outputs[0], self.activation, self.rounding
        )
