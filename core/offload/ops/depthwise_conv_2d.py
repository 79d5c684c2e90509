"""DEPTHWISE_CONV_2D: each input channel c convolved with its own depth_multiplier filters,
output channel c * multiplier + m; float, hybrid, int8/uint8 and 16x8.

The work is a loop over the KH*KW filter taps, each a vectorised multiply-add over the
whole output, in tap order (as LiteRT accumulates, starting from the bias for float).
"""

from __future__ import annotations

import numpy as np

from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel
from offload.ops._conv import (
    Geometry,
    filter_scales,
    filter_zero_point,
    finish_quantized,
    geometry,
    kind_of,
    output_multipliers,
    pad_spatial,
    quantize_rows,
    scalar_quant,
    weight_value,
    window_options,
)
from offload.ops._registry import register


@register
class DepthwiseConv2D(OpKernel):
    op = "DEPTHWISE_CONV_2D"
    max_version = 7

    def setup(self) -> None:
        self.stride, self.dilation, self.padding, self.activation = window_options(self.options)
        x, f, out = self.inputs[0], self.inputs[1], self.outputs[0]
        self.kernel_hw = (f.shape[1], f.shape[2])
        self.kind = kind_of(x, f)
        self.w_zp = filter_zero_point(f) if self.kind == "quantized" else 0
        weights = weight_value(self, 1)
        self.w = None if weights is None else self._tap_weights(weights)
        out_ch = f.shape[3]
        if self.kind == "hybrid":
            self.scales = filter_scales(f, out_ch)
        elif self.kind == "quantized":
            in_scale, self.x_zp = scalar_quant(x)
            self.mult, self.shift = output_multipliers(
                in_scale, f.quantization, scalar_quant(out)[0], out_ch
            )
            # The int16 kernel accumulates in int64 with an int64 bias.
            self.rounding = "wide" if x.dtype == np.int16 else "double"

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

    def run(self, *inputs: np.ndarray | None) -> np.ndarray:
        x, f = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        w = self.w if self.w is not None else self._tap_weights(f)
        n, h, wd, c = x.shape
        out_ch = w.shape[2]
        g = geometry(self.padding, (h, wd), self.kernel_hw, self.stride, self.dilation)
        shape = (n, g.out_h, g.out_w, out_ch)
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
