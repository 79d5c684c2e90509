"""DEPTHWISE_CONV_2D: each input channel c convolved with its own depth_multiplier filters,
output channel c * multiplier + m; float, hybrid, int8/uint8 and 16x8.

Every type runs the same loop over the KH*KW filter taps, each a vectorised multiply-add over
the whole output, in tap order, on per-shape buffers laid out so that each tap is a few long
contiguous passes (:class:`TapPlan`). Integer types accumulate ``(x - x_zp) * (w - w_zp)``
in floating point, exact while every partial sum stays below 2**24 (float32) or 2**53 (float64),
and the accumulator dtype is chosen from that bound once.

The arithmetic is the kernel LiteRT's builtin resolver runs on x86, optimized_ops with its NEON
code compiled through NEON_2_SSE, bit for bit:

- float (depthwiseconv_float.h): the accumulator starts at the bias, then each tap's product
  is added, a float32 multiply and a float32 add (no fused multiply-add), taps row by row;
- hybrid (depthwise_conv_hybrid.h): the input quantized per batch (``quantize_rows``), exact
  integer sums, then ``acc * filter_scale * input_scale + bias`` in float32, multiplied in that
  order in NEON lanes of 4 channels and as ``acc * input_scale * filter_scale`` in the channels
  left over;
- int8 per channel (integer_ops/depthwise_conv.h): exact sums plus bias, requantized 16 and 8
  channels at a time in NEON lanes and the rest by the scalar reference, which round halves
  differently (:func:`offload.quant.requantize_depthwise`; the float64 and int64 passes here
  are faster forms of the same rule);
- uint8 per tensor (depthwiseconv_uint8.h): its NEON lanes round as the reference does;
- int16 x int8: the reference kernel's int64 arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from offload.geometry import Geometry, window_geometry, window_options
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._bias import bias_types
from offload.ops._conv import (
    RuyRequantizer,
    activation_scratch,
    conv_output_shapes,
    filter_scales,
    filter_zero_point,
    kind_of,
    output_multipliers,
    scale_zp,
    weight_value,
    window_shape,
)
from offload.ops._depthwise_taps import (
    TapPlan,
    group_weights,
    phase_buffers,
    tap_groups,
    tile_taps,
)
from offload.ops._quant import (
    activation_range_quantized,
    dtype_range,
    multiply_by_quantized_multiplier_lanes,
    quantize_rows,
)
from offload.ops._registry import register
from offload.ops._types import WEIGHTS, accepts
from offload.quant import depthwise_vector_channels, requantize_depthwise

if TYPE_CHECKING:
    from offload._graph import Tensor

# Output channels LiteRT's hybrid kernel scales per NEON vector before its leftover loop.
_HYBRID_SCALE_LANES = 4
# Size of the int64 buffer the int8 requantization works through, a block of rows at a time.
_REQUANTIZE_BLOCK_BYTES = 256 * 1024
# The tap weights tiled over the output width (:class:`TapPlan`) are kept while they take at
# most this much. They grow with the window's area times the output's width (a 52x39 window
# over 17 columns of 64 channels is 8.8 MB for a 0.5 MB filter), so past it each tap's row is
# tiled into one reusable buffer when the tap is reached: the same values. Float convolutions
# run as fast that way (a row's copy is small beside the tap's multiply-add); integer ones,
# a multiply-add per tap instead of an einsum per phase, take about 1.5 times as long.
_TILED_WEIGHTS_MAX_BYTES = 2 << 20
# What one tap's view (a numpy array object) takes, about 150 bytes, with room to spare.
_VIEW_BYTES = 256


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


def _exact_dtype(taps: int, input_magnitude: int, weight_magnitude: int) -> np.dtype:
    """float32 when no partial sum of ``taps`` integer products can reach 2**24, else float64."""
    bound = taps * input_magnitude * weight_magnitude
    return np.dtype(np.float32 if bound < 2**24 else np.float64)


def _weight_magnitude(weights: np.ndarray | None, zero_point: np.ndarray | int) -> int:
    """The largest |weight - zero point| of a constant filter; 255 for a runtime one."""
    if weights is None:
        return 255
    return int(np.max(np.abs(np.asarray(weights, np.int64) - zero_point), initial=0))


def _input_magnitude(x: Tensor) -> int:
    """The largest |x - zero point| an integer input can hold."""
    lo, hi = dtype_range(x.dtype)
    zero_point = scale_zp(x)[1]
    return max(zero_point - lo, hi - zero_point)


def _tiles_weights(taps: int, row: int, dtype: np.dtype) -> bool:
    """Whether the tap weights are kept tiled to ``row`` (OW*C*M) values a tap."""
    return taps * row * dtype.itemsize <= _TILED_WEIGHTS_MAX_BYTES


@register
class DepthwiseConv2D(OpKernel):
    op = "DEPTHWISE_CONV_2D"
    max_version = 7
    types = accepts(
        "FLOAT32",
        "INT8 UINT8 INT16",
        others={1: WEIGHTS},
        across=bias_types(0, 2, "int64", option=False),
    )
    writes_into = True

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return conv_output_shapes(ctx, depthwise_shape)

    @classmethod
    def scratch_bytes(cls, ctx: ShapeContext, outputs: Sequence[Shape]) -> int:
        # What _tap_plan keeps: the padded input in phase buffers (repeated over the
        # multiplier), the tiled tap weights (or one row of them), two accumulators and the
        # per-channel rows; the weights less their zero point; then what run makes per kind.
        activation = window_options(ctx.options)[3]
        g, out = window_shape(ctx, depthwise_shape)
        x_shape, f_shape = ctx.shape(0), ctx.shape(1)
        elements, row = math.prod(out), out[2] * out[3]
        if elements == 0:
            return 0  # run returns zeros: no plan
        n, h, w, c = x_shape
        taps, channels = f_shape[1] * f_shape[2], f_shape[3]
        x, f = ctx.tensor(0), ctx.tensor(1)
        kind = "quantized" if x is None or f is None else kind_of(x, f)
        acc = np.dtype(np.float32)
        if kind != "float":
            zero_point = filter_zero_point(f) if f is not None and kind == "quantized" else 0
            weights = None if f is None or f.type_name == "INT4" else ctx.constant(1)
            magnitude = 8 if f is not None and f.type_name == "INT4" else 255
            if weights is not None:
                magnitude = _weight_magnitude(weights, zero_point)
            inputs = 255 if kind == "hybrid" else 65535 if x is None else _input_magnitude(x)
            acc = _exact_dtype(taps, inputs, magnitude)
        item = acc.itemsize
        padded = (g.pad_top + h + g.pad_bottom) * (g.pad_left + w + g.pad_right)
        need = taps * channels * (4 if kind == "float" else 8)  # _tap_weights
        need += n * padded * channels * item
        need += (taps if _tiles_weights(taps, row, acc) else 1) * row * item
        need += 2 * elements * item + 5 * 8 * row  # acc, scratch; rows (and a runtime bias's)
        need += _VIEW_BYTES * taps  # a view per tap
        if kind == "float":
            return need + activation_scratch(activation, elements)
        if kind == "hybrid":
            # The input's int8 codes, the float32 cast of float64 sums, the channels past the
            # last lane of 4, and the activation.
            need += n * h * w * c + (4 * elements if item == 8 else 0)
            need += 4 * elements // channels * (channels % _HYBRID_SCALE_LANES)
            return need + activation_scratch(activation, elements)
        in_type = np.dtype(np.int16) if x is None else np.dtype(x.dtype)
        vector = depthwise_vector_channels(channels, in_type)
        need += elements * in_type.itemsize  # the output, when the interpreter gives none
        if not vector:  # _finish_quantized: int64 sums and requantize_depthwise's int64 passes
            return need + 6 * 8 * elements
        # RuyRequantizer's float64 pass and its tiled constants, or the int64 row buffer;
        # then the channels past the lanes in int64 passes.
        need += 8 * elements + 2 * 8 * row
        need += 8 * row * max(1, min(out[1], _REQUANTIZE_BLOCK_BYTES // (8 * row)))
        return need + 6 * 8 * elements // channels * (channels - vector)

    def setup(self) -> None:
        self.stride, self.dilation, self.padding, self.activation = window_options(self.options)
        x, f, out = self.input_tensor(0), self.input_tensor(1), self.outputs[0]
        self.filter_shape = tuple(f.shape)
        self.kernel_hw = (f.shape[1], f.shape[2])
        self.kind = kind_of(x, f)
        self.out_dtype = np.dtype(out.dtype)
        out_ch = f.shape[3]
        self.w_zp = filter_zero_point(f) if self.kind == "quantized" else 0
        weights = weight_value(self, 1)
        self.w = None if weights is None else self._tap_weights(weights)
        bias = self.constant(2) if len(self.inputs) > 2 else None
        self.bias = None if bias is None else np.asarray(bias)
        self.acc_dtype = np.dtype(np.float32)
        self.vector_channels = 0
        if self.kind == "hybrid":
            self.scales = filter_scales(f, out_ch)
            self.acc_dtype = self._exact_dtype(255, weights)
        elif self.kind == "quantized":
            in_scale, self.x_zp = scale_zp(x)
            lo, hi = dtype_range(x.dtype)
            self.acc_dtype = self._exact_dtype(max(self.x_zp - lo, hi - self.x_zp), weights)
            f_quantization = self.required(f.quantization, "quantization on the filter (input 1)")
            self.mult, self.shift = output_multipliers(
                in_scale, f_quantization, scale_zp(out)[0], out_ch
            )
            _, self.out_zp = scale_zp(out)
            if out.quantization is None:
                self.clamp = dtype_range(out.dtype)
            else:
                self.clamp = activation_range_quantized(
                    self.activation or "NONE", out.quantization, out.dtype
                )
            # int8 requantizes per channel in NEON lanes of 16 and 8 with a scalar remainder;
            # the uint8 kernel's lanes round like the reference; int16 runs the reference in
            # int64 (offload.quant.requantize_depthwise).
            self.vector_channels = depthwise_vector_channels(out_ch, x.dtype)
        # int8 with NEON lanes: requantized in float64 where that is exact, else in int64
        # passes over row blocks (_requantize_lanes).
        self._lane_requantized = self.kind == "quantized" and self.vector_channels > 0
        self._requantizer = self._float_requantizer(bias) if self._lane_requantized else None
        # One plan, for the latest input shape: a resize replaces it rather than adding one.
        self._plan: tuple[tuple[int, ...], TapPlan | None] | None = None
        if len(x.shape) == 4 and all(d > 0 for d in x.shape):
            # Built here, at allocate_tensors, for the model's shape; a resized input
            # rebuilds it on the first run with the new shape.
            self._plan = (tuple(x.shape), self._tap_plan(tuple(x.shape)))

    def _float_requantizer(self, bias: np.ndarray | None) -> RuyRequantizer | None:
        """The NEON lanes' requantization of ``acc + bias`` in float64 passes (the lanes round
        as ruy does), or None where the bias is only known at run time or some channel's
        arithmetic would not be exact in float64."""
        if len(self.inputs) > 2 and self.inputs[2] is not None and bias is None:
            return None
        channels = self.filter_shape[3]
        offset = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64)
        return RuyRequantizer.build(
            self.mult, self.shift, offset, self.out_zp, self.clamp, self.out_dtype
        )

    def _exact_dtype(self, input_magnitude: int, weights: np.ndarray | None) -> np.dtype:
        """float32 when no partial sum of integer products can reach 2**24, else float64."""
        kh, kw = self.kernel_hw
        return _exact_dtype(kh * kw, input_magnitude, _weight_magnitude(weights, self.w_zp))

    def _shape(self, x_shape: Shape) -> tuple[Geometry, Shape]:
        return depthwise_shape(x_shape, self.filter_shape, self.padding, self.stride, self.dilation)

    def _tap_weights(self, w: np.ndarray) -> np.ndarray:
        """(1, KH, KW, C*M) -> (KH, KW, C*M): floats, or integers less their zero point."""
        if self.kind == "float":
            return np.asarray(w, np.float32)[0]
        return (np.asarray(w, np.int64) - self.w_zp)[0]

    def _tap_plan(self, shape: tuple[int, ...]) -> TapPlan | None:
        g, out_shape = self._shape(shape)
        if 0 in out_shape:
            return None
        phases, fills, taps = phase_buffers(
            shape, g, out_shape, self.stride, self.dilation, self.kernel_hw, self.acc_dtype
        )
        kh, kw = self.kernel_hw
        flat = (shape[0], g.out_h, g.out_w * out_shape[3])
        tiled = _tiles_weights(kh * kw, flat[2], self.acc_dtype)
        # Float sums must follow LiteRT's order; integer sums are exact in any order.
        groups = (
            []
            if self.kind == "float"
            else tap_groups(phases, flat, self.stride, self.dilation, self.kernel_hw)
        )
        weights, tiled_groups = None, None
        if self.w is not None and tiled:
            if self.kind == "float":
                weights = tile_taps(self.w, g.out_w, self.acc_dtype)
            else:
                tiled_groups = group_weights(self.w, g.out_w, groups, self.acc_dtype)
        return TapPlan(
            fills=fills,
            taps=taps,
            tiled=tiled,
            weights=weights,
            groups=groups,
            group_weights=tiled_groups,
            row=None if tiled else np.empty(flat[2], self.acc_dtype),
            rows=self._rows(g.out_w),
            acc=np.empty(flat, self.acc_dtype),
            scratch=np.empty(flat, self.acc_dtype),
            wide=self._wide_buffer(flat)
            if self._lane_requantized and not self._requantizer
            else None,
            out_shape=out_shape,
        )

    @staticmethod
    def _wide_buffer(flat: tuple[int, int, int]) -> np.ndarray:
        """(1, rows, OW*C*M) int64: as many output rows as fit in about 256 KiB, at least one."""
        rows = max(1, min(flat[1], _REQUANTIZE_BLOCK_BYTES // (8 * flat[2])))
        return np.empty((1, rows, flat[2]), np.int64)

    def _rows(self, out_w: int) -> dict[str, np.ndarray]:
        """Per-channel constants tiled over the output width, so that they apply in long
        contiguous passes rather than one C-long row at a time."""
        rows = {}
        if self.kind != "quantized" and self.bias is not None:
            rows["bias"] = np.tile(np.asarray(self.bias, np.float32), out_w)
        if self.kind == "hybrid":
            rows["scales"] = np.tile(self.scales, out_w)
        if self._lane_requantized:
            left = np.maximum(self.shift, 0)
            rows["multiplier"] = np.tile(self.mult.astype(np.int64) << left, out_w)
            rows["shift"] = np.tile(31 + np.maximum(-self.shift, 0), out_w)
            if self.bias is not None:
                rows["offset"] = np.tile(self._requantize_offset(self.bias), out_w)
        return rows

    def _requantize_offset(self, bias: np.ndarray | None) -> np.ndarray:
        """Per channel, what :func:`multiply_by_quantized_multiplier_lanes` adds before its
        shift in NEON lanes (2**30, then half the shift's divisor), plus the bias times the
        multiplier: ``(acc + bias) * m`` is ``acc * m + bias * m``."""
        right = np.maximum(-self.shift, 0)
        offset = (np.int64(1) << 30) + (np.int64(1) << 31) * ((np.int64(1) << right) >> 1)
        if bias is not None:
            left = np.maximum(self.shift, 0)
            offset = offset + np.asarray(bias, np.int64) * (self.mult.astype(np.int64) << left)
        return offset

    def _run(self, *inputs: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
        x = self.required(inputs[0], "input 0")
        bias = inputs[2] if len(inputs) > 2 else None
        shape = tuple(x.shape)
        if self._plan is None or self._plan[0] != shape:
            self._plan = (shape, self._tap_plan(shape))
        plan = self._plan[1]
        if plan is None:
            return np.zeros(self._shape(shape)[1], self.out_dtype)
        n, out_h, out_w, cm = plan.out_shape
        weights = self.w
        if weights is None:  # a runtime filter
            weights = self._tap_weights(self.required(inputs[1], "input 1"))
        writable = self.kind != "quantized" and self.fits(out, plan.out_shape, self.out_dtype)
        acc = out.reshape(plan.acc.shape) if writable and out is not None else plan.acc

        if self.kind == "float":
            plan.fill(x, None)
            bias_row = plan.rows.get("bias")
            if bias_row is None and bias is not None:  # a runtime bias
                bias_row = np.tile(np.asarray(bias, np.float32), out_w)
            plan.accumulate(weights, acc, bias_row)
            return apply_fused_activation(acc.reshape(plan.out_shape), self.activation)

        if self.kind == "hybrid":
            q, in_scale, offset = quantize_rows(x.reshape(n, -1), asymmetric=True)
            plan.fill(q.reshape(shape), offset.reshape(n, 1, 1, 1, 1))
            plan.sum_taps(weights, acc)
            return self._finish_hybrid(acc, in_scale, bias, plan)

        plan.fill(x, self.x_zp)
        plan.sum_taps(weights, acc)
        if self._lane_requantized:
            return self._requantize_lanes(acc, bias, plan, out)
        return self._finish_quantized(acc.reshape(plan.out_shape), bias, out)

    def _finish_hybrid(
        self, acc: np.ndarray, in_scale: np.ndarray, bias: np.ndarray | None, plan: TapPlan
    ) -> np.ndarray:
        """Integer sums -> float32 outputs, multiplied in the order of LiteRT's lanes."""
        out_shape = plan.out_shape
        n, cm = out_shape[0], out_shape[3]
        if acc.dtype != np.float32:
            acc = acc.astype(np.float32)  # vcvtq_f32_s32: to nearest, as float64 -> float32
        result = acc.reshape(out_shape)
        lanes = cm // _HYBRID_SCALE_LANES * _HYBRID_SCALE_LANES
        leftover = result[..., lanes:].copy() if lanes < cm else None
        acc *= plan.rows["scales"]
        acc *= in_scale.reshape(n, 1, 1)
        if leftover is not None:
            leftover *= in_scale.reshape(n, 1, 1, 1)
            leftover *= self.scales[lanes:]
            result[..., lanes:] = leftover
        if "bias" in plan.rows:
            acc += plan.rows["bias"]
        elif bias is not None:
            result += np.asarray(bias, np.float32)
        return apply_fused_activation(result, self.activation)

    def _requantize_lanes(
        self, acc: np.ndarray, bias: np.ndarray | None, plan: TapPlan, out: np.ndarray | None
    ) -> np.ndarray:
        """int8 per channel: every channel as a NEON lane, in float64 passes where that is
        exact (:class:`RuyRequantizer`), else with the bias folded into the offset, a block of
        output rows at a time through one small int64 buffer (it stays in cache across the
        passes); then the channels LiteRT leaves to its scalar loop (fewer than 8) are redone
        with the reference rounding."""
        lo, hi = self.clamp
        result = out if self.fits(out, plan.out_shape, self.out_dtype) else None
        if result is None:
            result = np.empty(plan.out_shape, self.out_dtype)
        assert result is not None
        if self._requantizer is not None:
            cm = plan.out_shape[3]
            self._requantizer(acc.reshape(-1, cm), result, block=plan.out_shape[2])
        else:
            self._requantize_wide(acc, bias, plan, result)
        v = self.vector_channels
        if v < plan.out_shape[3]:
            tail = acc.reshape(plan.out_shape)[..., v:].astype(np.int64)
            if bias is not None:
                tail += np.asarray(bias, np.int64)[v:]
            scaled = multiply_by_quantized_multiplier_lanes(tail, self.mult[v:], self.shift[v:], 0)
            result[..., v:] = np.clip(scaled + self.out_zp, lo, hi)
        return result

    def _requantize_wide(
        self, acc: np.ndarray, bias: np.ndarray | None, plan: TapPlan, result: np.ndarray
    ) -> None:
        """Every channel's NEON-lane requantization in int64 passes over row blocks."""
        rows, wide = plan.rows, plan.wide
        assert wide is not None
        offset = rows.get("offset")
        if offset is None:  # a runtime bias, or none
            offset = np.tile(self._requantize_offset(bias), plan.out_shape[2])
        lo, hi = self.clamp
        flat = result.reshape(acc.shape)
        block = wide.shape[1]
        for b in range(acc.shape[0]):
            for r0 in range(0, acc.shape[1], block):
                src = acc[b, r0 : r0 + block]
                buf = wide[0, : len(src)]
                np.copyto(buf, src, casting="unsafe")  # exact integers
                buf *= rows["multiplier"]
                buf += offset
                buf >>= rows["shift"]
                np.clip(buf, lo - self.out_zp, hi - self.out_zp, out=buf)
                np.copyto(flat[b, r0 : r0 + block], buf, casting="unsafe")
        flat += self.out_zp  # in range after the clip: no wrap-around

    def _finish_quantized(
        self, acc: np.ndarray, bias: np.ndarray | None, out: np.ndarray | None
    ) -> np.ndarray:
        """Exact sums (+ bias) -> output integers through the requantization LiteRT runs."""
        total = acc.astype(np.int64)
        if bias is not None:
            total += np.asarray(bias, np.int64)
        result = requantize_depthwise(
            total, self.mult, self.shift, self.out_zp, self.clamp, self.out_dtype
        )
        if self.fits(out, acc.shape, self.out_dtype):
            assert out is not None
            np.copyto(out, result)
            return out
        return result
