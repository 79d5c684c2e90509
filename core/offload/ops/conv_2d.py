"""CONV_2D: NHWC input, OHWI filter, optional bias; float, hybrid, int8/uint8 and 16x8.

Every path is im2col + one GEMM per group. Constant filters are reshaped to the GEMM layout
once in setup; runtime filters (float16 models dequantize them on the fly) on every run.
The int8/uint8 path with constant weights and bias (every int8 model) streams over chunks
of output rows: patches cast from the integer input into a float32 work array, one exact
float GEMM on the raw input (the zero point's share is a per-channel constant), and the
exact float requantization of :class:`~offload.ops._exact_gemm.RuyRequantizer`. The other
integer paths (16x8, grouped, uint8 and int8 where that requantization is not exact) stream
too, in smaller chunks through float64 and int64: their sums are exact, so the chunks change
nothing but the memory, which ``scratch_bytes`` declares and ``max_tensor_bytes`` bounds.
Float products stay whole, since BLAS sums a row differently when the GEMM is cut in pieces.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from offload.geometry import Geometry, window_geometry, window_options
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._bias import bias_types
from offload.ops._conv import (
    REQUANTIZE_BYTES,
    ROWS_PER_CHUNK_ELEMENTS,
    TRANSPOSED_GATHER_MAX_CHANNELS,
    IntegerGemm,
    Rounding,
    RuyRequantizer,
    activation_scratch,
    bias_is_wide,
    conv_output_shapes,
    eigen_order_dots,
    eigen_order_gemv,
    eigen_order_matmul,
    filter_scales,
    filter_zero_point,
    finish_quantized,
    float_order_matters,
    im2col,
    kind_of,
    output_multipliers,
    pad_spatial,
    patches,
    quantize_rows,
    scale_zp,
    scratch,
    weight_value,
    window_shape,
)
from offload.ops._registry import register
from offload.ops._types import WEIGHTS, accepts
from offload.quant import activation_range_quantized

if TYPE_CHECKING:
    from offload._graph import Tensor


def conv_shape(
    x: Shape,
    f: Shape,
    padding: str,
    stride: tuple[int, int],
    dilation: tuple[int, int],
) -> tuple[Geometry, Shape]:
    """The window geometry and NHWC output shape of an NHWC input ``x`` and OHWI filter ``f``,
    after LiteRT's Prepare checks (grouped convolutions: input channels a multiple of the
    filter's, output channels a multiple of the groups)."""
    check_shape(
        len(x) == 4 and len(f) == 4,
        f"expected a 4-D NHWC input and a 4-D OHWI filter, found {list(x)} and {list(f)}",
    )
    check_shape(
        f[3] >= 1 and x[3] >= 1 and x[3] % f[3] == 0,
        f"expected input channels a positive multiple of the filter's in-channels {f[3]}, "
        f"found {x[3]}",
    )
    groups = x[3] // f[3]
    check_shape(
        f[0] % groups == 0,
        f"expected filter out-channels a multiple of the {groups} groups, found {f[0]}",
    )
    g = window_geometry(padding, (x[1], x[2]), (f[1], f[2]), stride, dilation)
    return g, (x[0], g.out_h, g.out_w, f[0])


# The exact integer path works in chunks of this share of the float path's: requantizing a
# sum makes REQUANTIZE_BYTES of int64 temporaries.
_EXACT_CHUNK_SHARE = 8


def _chunk_lines(elements: int, out_w: int, width: int) -> int:
    """Output lines a chunk of :meth:`Conv2D._patch_rows` takes: about ``elements`` values of
    patches or sums (``width`` a pixel), and at least 256 pixels for an efficient GEMM."""
    return max(elements // max(out_w * width, 1), -(-256 // max(out_w, 1)), 1)


# Fused activations that apply_fused_activation computes in place, chunk by chunk.
_IN_PLACE_ACTIVATIONS = (None, "NONE", "RELU", "RELU6", "RELU_N1_TO_1")


class _HybridRows(NamedTuple):
    """The hybrid path's per-channel constants tiled to one output row (OW*C)."""

    scales: np.ndarray
    column_sums: np.ndarray
    bias: np.ndarray | None


@register
class Conv2D(OpKernel):
    op = "CONV_2D"
    max_version = 8
    types = accepts(
        "FLOAT32", "INT8 UINT8 INT16", others={1: WEIGHTS}, across=bias_types(0, 2, "requested")
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return conv_output_shapes(ctx, conv_shape)

    @classmethod
    def scratch_bytes(cls, ctx: ShapeContext, outputs: Sequence[Shape]) -> int:
        # Float: the padded input, the whole patch matrix and product (BLAS's order must stay
        # whole), a grouped product's copies or the ordered sums of a dynamic-range model.
        # Integers: the weights in float64 and the exact GEMM's layout, then chunks of output
        # rows (_patch_rows) through the GEMM and the requantization; the hybrid kernel of a
        # grouped or runtime filter works on the whole output in float64.
        stride, _, _, activation = window_options(ctx.options)
        g, out = window_shape(ctx, conv_shape)
        x_shape, f_shape = ctx.shape(0), ctx.shape(1)
        n, h, w, c = x_shape
        co, kh, kw, f_in = f_shape
        elements, rows, ow = math.prod(out), math.prod(out[:3]), out[2]
        depth, weights = kh * kw * c, co * kh * kw * f_in
        padded = n * (g.pad_top + h + g.pad_bottom) * (g.pad_left + w + g.pad_right) * c
        x, f = ctx.tensor(0), ctx.tensor(1)
        kind = "quantized" if x is None or f is None else kind_of(x, f)
        act = activation_scratch(activation, elements)
        if kind == "float":
            pointwise = (kh, kw) == (1, 1) and stride == (1, 1) and out[1:3] == (h, w)
            need = 4 * (weights + elements + ow * co) + act
            need += 0 if pointwise else 4 * (padded + rows * depth)
            if c != f_in:  # grouped: the patches regrouped, the product transposed back
                return need + 4 * (rows * depth + elements)
            # Where LiteRT's order is followed (only the kernel knows): eigen_order_matmul's
            # transposed patches, pixel chunks and a depth block's sums, gemv's products, or
            # eigen_order_dots' products and four chains over every pixel
            pixels = rows if co == 1 else min(rows, max(4096, 65536 // max(co, 1)))
            return need + 4 * (rows * depth + 5 * co * pixels + weights + rows * co)
        width = max(depth, co)
        fast = min(out[1], _chunk_lines(ROWS_PER_CHUNK_ELEMENTS, ow, width)) * ow  # pixels
        exact = min(out[1], _chunk_lines(ROWS_PER_CHUNK_ELEMENTS // _EXACT_CHUNK_SHARE, ow, width))
        exact *= ow
        # self.w in float64 and the exact GEMM's copy (setup holds as much again while it
        # builds them), per-channel constants tiled to an output row
        need = 16 * weights + 5 * 8 * ow * co
        # a chunk of the float path: its patches, sums and parts, and their requantization
        chunk = 8 * fast * (depth + 3 * co)
        if kind == "hybrid":
            if c != f_in or ctx.constant(1) is None:  # _run_hybrid: whole arrays in float64
                need += 17 * n * h * w * c + 8 * padded + 16 * rows * depth
                return need + 3 * 8 * elements + 3 * 4 * elements + act
            # the input's codes, one batch's padded codes, a chunk, the output
            return need + n * h * w * c + padded // max(n, 1) + chunk + 4 * elements + act
        # or of the exact path: patches (and their copy regrouped), sums, rounded, cast,
        # requantized
        patches = depth * (2 if c != f_in else 1)
        chunk = max(chunk, 8 * exact * (patches + 4 * co) + REQUANTIZE_BYTES * exact * co)
        item = 2 if x is None else np.dtype(x.dtype).itemsize
        return need + item * (padded + elements) + chunk

    def setup(self) -> None:
        self.stride, self.dilation, self.padding, self.activation = window_options(self.options)
        x, f = self.input_tensor(0), self.input_tensor(1)
        out_ch, kh, kw, f_in = f.shape
        self.filter_shape = tuple(f.shape)
        self.kernel_hw = (kh, kw)
        self.groups = x.shape[3] // f_in if x.shape and f_in else 1
        self.kind = kind_of(x, f)
        self.w_zp = filter_zero_point(f) if self.kind == "quantized" else 0
        weights = weight_value(self, 1)
        self.w = None if weights is None else np.ascontiguousarray(self._gemm_weights(weights))
        if self.kind == "hybrid":
            scales = filter_scales(f, out_ch)
            # LiteRT's per-channel hybrid path (asymmetric inputs) runs only when the channel
            # scales actually differ, or for grouped convolutions.
            self.per_channel = bool(np.any(scales != scales[0])) or self.groups != 1
            self.scales = scales if self.per_channel else scales[:1]
        elif self.kind == "quantized":
            self._setup_quantized(out_ch)
        self._fast: tuple[IntegerGemm, RuyRequantizer] | None = None
        if self.kind == "quantized" and self.w is not None and self.rounding == "ruy":
            self._fast = self._setup_fast(self.w)
        # The hybrid path's exact GEMM on the raw int8 input codes and its weights' column
        # sums (the input zero point's share), for constant weights without groups.
        self._hybrid: tuple[IntegerGemm, np.ndarray] | None = None
        if self.kind == "hybrid" and self.w is not None and self.groups == 1:
            column_sums = np.rint(self.w[0].sum(axis=0))
            self._hybrid = (IntegerGemm(np.int8, self.w[0]), column_sums)
        # Where float results are quantized again (dynamic-range and QAT models), float
        # convolutions sum in LiteRT's order.
        self._sequential = (
            self.kind == "float"
            and self.w is not None
            and self.groups == 1
            and float_order_matters(self.subgraph)
        )
        self.writes_into = (
            self.kind == "float" or self._fast is not None or self._hybrid is not None
        )
        self._bias_const = self.constant(2) if len(self.inputs) > 2 else None
        # The constant bias tiled to one output row (OW*C), for the latest output shape.
        self._bias_row: tuple[tuple[int, ...], np.ndarray] | None = None
        self._hybrid_tiles: tuple[int, _HybridRows] | None = None

    def _setup_quantized(self, out_ch: int) -> None:
        x, f = self.input_tensor(0), self.input_tensor(1)
        bias, out = self._bias_tensor(), self.outputs[0]
        in_scale, self.x_zp = scale_zp(x)
        f_quantization = self.required(f.quantization, "quantization on the filter (input 1)")
        self.mult, self.shift = output_multipliers(
            in_scale, f_quantization, scale_zp(out)[0], out_ch
        )
        # LiteRT runs the ruy GEMM unless it falls back to the reference kernel: grouped
        # convolutions, and 16x8 with zero points or int64 accumulators.
        self.rounding: Rounding = "ruy" if self.groups == 1 else "double"
        if x.dtype == np.int16:
            if bias_is_wide(bias, self.options.get("quantized_bias_type", 0)):
                self.rounding = "wide"
            elif self.x_zp or scale_zp(out)[1] or np.any(self.w_zp):
                self.rounding = "double"

    def _setup_fast(self, weights: np.ndarray) -> tuple[IntegerGemm, RuyRequantizer] | None:
        """The exact GEMM and requantizer of the float path for the constant ``weights``
        (``self.w``), or None where it does not apply (a runtime bias, or a multiplier it
        cannot hold exactly)."""
        x, out = self.input_tensor(0), self.outputs[0]
        bias: np.ndarray = np.zeros(weights.shape[2], np.int64)
        if self._bias_tensor() is not None:
            bias_value = self.constant(2)
            if bias_value is None:
                return None
            bias = bias_value
        w = weights[0]  # (K, Cout) float64, weight zero point already subtracted
        # sum (x - zx) * w + bias = sum x * w + (bias - zx * sum w): the GEMM reads the raw
        # input, padded with the zero point, and the rest is a per-channel constant.
        column_sums = np.rint(w.sum(axis=0)).astype(np.int64)
        offset = np.asarray(bias, np.int64).ravel() - self.x_zp * column_sums
        out_quantization = self.required(out.quantization, "quantization on the output")
        clamp = activation_range_quantized(self.activation or "NONE", out_quantization, out.dtype)
        requantizer = RuyRequantizer.build(
            self.mult, self.shift, offset, scale_zp(out)[1], clamp, out.dtype
        )
        if requantizer is None:
            return None
        return IntegerGemm(x.dtype, w), requantizer

    def _patch_rows(
        self,
        x: np.ndarray,
        g: Geometry,
        shape: Shape,
        pad_value: int,
        dtype: type,
        share: int = 1,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(first output row, patch rows cast to ``dtype``) chunk by chunk of whole output
        lines, of ROWS_PER_CHUNK_ELEMENTS / ``share`` elements or so; the rows live in a
        per-thread work array, valid until the next chunk."""
        n, oh, ow, cout = shape
        if self.kernel_hw == (1, 1) and self.stride == (1, 1) and (oh, ow) == x.shape[1:3]:
            source = x.reshape(n, oh, ow, 1, 1, -1)  # a pointwise conv reads the input as is
        else:
            source = patches(
                pad_spatial(x, g, pad_value), g, self.kernel_hw, self.stride, self.dilation
            )
        depth = source.shape[3] * source.shape[4] * source.shape[5]
        # Few input channels: gathered transposed, along output pixels (see im2col).
        transposed = depth > 1 and source.shape[5] <= TRANSPOSED_GATHER_MAX_CHANNELS
        # Enough rows for an efficient GEMM, few enough to stay in cache.
        lines = _chunk_lines(ROWS_PER_CHUNK_ELEMENTS // share, ow, max(depth, cout))
        for b in range(n):
            for top in range(0, oh, lines):
                window = source[b, top : top + lines]
                count = window.shape[0] * ow
                cols = scratch("conv_cols", count * depth, dtype)
                if transposed:
                    gathered = window.transpose(2, 3, 4, 0, 1)
                    np.copyto(cols.reshape(gathered.shape), gathered)
                    yield (b * oh + top) * ow, cols.reshape(depth, count).T
                else:
                    np.copyto(cols.reshape(window.shape), window)
                    yield (b * oh + top) * ow, cols.reshape(count, depth)

    def _run_fast(
        self,
        fast: tuple[IntegerGemm, RuyRequantizer],
        x: np.ndarray,
        g: Geometry,
        shape: Shape,
        out: np.ndarray | None,
    ) -> np.ndarray:
        """The exact float path (``self._fast``), chunk by chunk of output rows (see the
        module docstring)."""
        gemm, requantize = fast
        result = out if self.fits(out, shape, self.outputs[0].dtype) else None
        if result is None:
            result = np.empty(shape, self.outputs[0].dtype)
        flat = result.reshape(-1, shape[3])
        for row, cols in self._patch_rows(x, g, shape, self.x_zp, gemm.dtype):
            requantize(gemm(cols), flat[row : row + cols.shape[0]], block=shape[2])
        return result

    def _bias_tensor(self) -> Tensor | None:
        return self.inputs[2] if len(self.inputs) > 2 else None

    def _gemm_weights(self, w: np.ndarray) -> np.ndarray:
        """OHWI -> (groups, KH*KW*Cin_per_group, Cout_per_group), float64 for integer paths."""
        g = self.groups
        dtype = np.float32 if self.kind == "float" else np.float64
        mat = np.asarray(w, dtype)
        if self.kind == "quantized":
            mat = mat - np.reshape(self.w_zp, (-1, 1, 1, 1))
        # A transposed view: BLAS takes it as is, so runtime filters are not copied per run;
        # constant ones are made contiguous once in setup.
        return mat.reshape(g, w.shape[0] // g, -1).transpose(0, 2, 1)

    def _gemm(self, cols: np.ndarray, w: np.ndarray) -> np.ndarray:
        if self.groups == 1:
            return cols @ w[0]
        g = self.groups
        m = cols.shape[0]
        taps = self.kernel_hw[0] * self.kernel_hw[1]
        grouped = cols.reshape(m, taps, g, -1).transpose(2, 0, 1, 3).reshape(g, m, -1)
        return np.matmul(grouped, w).transpose(1, 0, 2).reshape(m, -1)

    def _add_bias(self, out: np.ndarray, bias: np.ndarray) -> None:
        """out (N, OH, OW, C) += bias. A constant bias is tiled to whole rows once: numpy
        broadcasts a (C,) vector C values at a time, several times slower on small C."""
        if self._bias_const is None or out.ndim != 4 or out.size == 0 or not out.flags.c_contiguous:
            out += bias
            return
        if self._bias_row is None or self._bias_row[0] != out.shape:
            row = np.tile(np.asarray(self._bias_const, np.float32).ravel(), out.shape[2])
            self._bias_row = (out.shape, row)
        out.reshape(-1, out.shape[2] * out.shape[3])[...] += self._bias_row[1]

    def _run(self, *inputs: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
        x = self.required(inputs[0], "input 0")
        bias = inputs[2] if len(inputs) > 2 else None
        w = (
            self.w
            if self.w is not None
            else self._gemm_weights(self.required(inputs[1], "input 1"))
        )
        g, shape = conv_shape(x.shape, self.filter_shape, self.padding, self.stride, self.dilation)
        if 0 in shape:  # a window wider than a VALID input: LiteRT returns the empty output
            return np.zeros(shape, self.outputs[0].dtype)
        if self.kind == "float":
            cols = im2col(np.asarray(x, np.float32), g, self.kernel_hw, self.stride, self.dilation)
            if self.groups == 1 and (self._sequential or self.fits(out, shape, np.float32)):
                result = (
                    out
                    if self.fits(out, shape, np.dtype(np.float32))
                    else np.empty(shape, np.float32)
                )
                flat = result.reshape(cols.shape[0], shape[3])
                # Eigen computes a single output pixel or channel as a matrix-vector product;
                # tiny products in orders not emulated: BLAS there.
                tiny = sum(cols.shape) + flat.shape[1] < 20
                if self._sequential and flat.shape[0] == 1 and flat.shape[1] > 1:
                    eigen_order_gemv(cols[0], w[0], flat[0])
                elif self._sequential and flat.shape[1] == 1 and flat.shape[0] > 1:
                    eigen_order_dots(cols, w[0][:, 0], flat[:, 0])
                elif self._sequential and min(flat.shape) > 1 and not tiny:
                    eigen_order_matmul(cols, w[0], flat)
                else:
                    np.matmul(cols, w[0], out=flat)
            else:
                result = self._gemm(cols, w).reshape(shape)
            if bias is not None:
                self._add_bias(result, bias)
            return apply_fused_activation(result, self.activation)
        if self._hybrid is not None:
            return self._run_hybrid_fast(self._hybrid, x, bias, g, shape, out)
        if self.kind == "hybrid":
            return self._run_hybrid(x, w, bias, g, shape)
        if self._fast is not None:
            return self._run_fast(self._fast, x, g, shape, out)
        return self._run_exact(x, w, bias, g, shape)

    def _run_exact(
        self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, g: Geometry, shape: Shape
    ) -> np.ndarray:
        """The integer path where the float one does not apply: exact sums of ``x`` less its
        zero point through the float64 GEMM ``w`` (every product and sum a whole number below
        2**53), plus the bias, requantized by the kernel's rule. Chunk by chunk of output
        rows, as exact sums come out the same in any pieces, so that the patches, sums and
        int64 requantization passes take a chunk's memory rather than the whole output's."""
        result = np.empty(shape, self.outputs[0].dtype)
        flat = result.reshape(-1, shape[3])
        wide_bias = None if bias is None else bias.astype(np.int64).ravel()
        chunks = self._patch_rows(x, g, shape, self.x_zp, np.float64, _EXACT_CHUNK_SHARE)
        for row, cols in chunks:
            cols -= self.x_zp  # the padding, the zero point, becomes 0
            acc = np.rint(self._gemm(cols, w)).astype(np.int64)
            if wide_bias is not None:
                acc += wide_bias
            flat[row : row + len(acc)] = finish_quantized(
                acc, self.mult, self.shift, self.outputs[0], self.activation, self.rounding
            )
        return result

    def _run_hybrid_fast(
        self,
        hybrid: tuple[IntegerGemm, np.ndarray],
        x: np.ndarray,
        bias: np.ndarray | None,
        g: Geometry,
        shape: Shape,
        out: np.ndarray | None,
    ) -> np.ndarray:
        """The hybrid kernel with an exact float32 GEMM on the int8 codes, chunked.

        LiteRT converts each int32 accumulator to float once, then scales and adds the bias
        in float32. Here the codes' GEMM is exact; less the zero point's share (an exact
        float32 too: |zero point * column sum| is under the GEMM's own bound) the result is
        rounded once, as the int32 -> float conversion rounds; the float32 steps follow."""
        gemm, _ = hybrid
        n, _, ow, cout = shape
        codes, in_scale, zero_points = quantize_rows(x.reshape(n, -1), asymmetric=self.per_channel)
        codes = codes.reshape(x.shape)
        result = out if self.fits(out, shape, np.dtype(np.float32)) else None
        if result is None:
            result = np.empty(shape, np.float32)
        flat = result.reshape(-1, cout)
        rows_per_batch = shape[1] * ow
        rows = self._hybrid_rows(hybrid, ow, bias)
        bias_row = rows.bias
        in_place = self.activation in _IN_PLACE_ACTIVATIONS
        scale = scratch("hybrid_scale", ow * cout, np.float32)
        share_row = scratch("hybrid_share", ow * cout, gemm.acc_dtype)
        for b in range(n):
            # One float32 scale per channel: the input scale folded into the filter's first.
            np.multiply(rows.scales, in_scale[b], out=scale)
            # The input zero point's share of the GEMM (an exact integer in either type).
            np.multiply(rows.column_sums, gemm.acc_dtype(zero_points[b]), out=share_row)
            first = b * rows_per_batch
            batch_shape = (1, *shape[1:])
            for row, cols in self._patch_rows(
                codes[b : b + 1], g, batch_shape, int(zero_points[b]), gemm.dtype
            ):
                acc = gemm(cols).reshape(-1, ow * cout)
                dst = flat[first + row : first + row + cols.shape[0]].reshape(acc.shape)
                if zero_points[b]:
                    np.subtract(acc, share_row, out=acc)
                if acc.dtype == np.float32:  # exact integers, or rounded once: as the int32
                    np.multiply(acc, scale, out=dst)  # -> float conversion rounds
                else:
                    np.copyto(dst, acc)  # float64 sums: the one rounding to float32
                    np.multiply(dst, scale, out=dst)
                if bias_row is not None:
                    np.add(dst, bias_row, out=dst)
                if in_place:  # while the chunk is in cache
                    apply_fused_activation(dst, self.activation)
        return result if in_place else apply_fused_activation(result, self.activation)

    def _hybrid_rows(
        self, hybrid: tuple[IntegerGemm, np.ndarray], out_w: int, bias: np.ndarray | None
    ) -> _HybridRows:
        """The hybrid path's per-channel constants tiled to one output row (OW*C): filter
        scales, weight column sums and the bias (a runtime bias is tiled on each run).
        numpy applies a short per-channel vector a few values at a time; a whole row is one
        long pass, and tiling it once per width saves a copy per run."""
        cached = self._hybrid_tiles
        if cached is None or cached[0] != out_w:
            gemm, column_sums = hybrid
            cout = gemm.width
            bias_row = None
            if self._bias_const is not None:
                bias_row = np.tile(np.asarray(self._bias_const, np.float32).ravel(), out_w)
            rows = _HybridRows(
                np.tile(np.broadcast_to(self.scales, (cout,)), out_w),
                np.tile(column_sums.astype(gemm.acc_dtype), out_w),
                bias_row,
            )
            cached = self._hybrid_tiles = (out_w, rows)
        rows = cached[1]
        if bias is not None and rows.bias is None:
            rows = rows._replace(bias=np.tile(np.asarray(bias, np.float32).ravel(), out_w))
        return rows

    def _run_hybrid(self, x, w, bias, g, shape) -> np.ndarray:
        n = x.shape[0]
        q, in_scale, offset = quantize_rows(x.reshape(n, -1), asymmetric=self.per_channel)
        xq = q.reshape(x.shape).astype(np.float64) - offset.reshape(-1, 1, 1, 1)
        cols = im2col(xq, g, self.kernel_hw, self.stride, self.dilation)
        acc = np.rint(self._gemm(cols, w)).astype(np.float32).reshape(n, -1, shape[3])
        if not self.per_channel:
            out = acc * (in_scale * self.scales[0]).astype(np.float32)[:, None, None]
        elif self.groups == 1:
            # The optimized kernel folds the input scale into the channel scales first.
            out = acc * (self.scales[None, :] * in_scale[:, None])[:, None, :]
        else:
            out = acc * self.scales * in_scale[:, None, None]
        if bias is not None:
            out += bias
        return apply_fused_activation(out.reshape(shape), self.activation)
