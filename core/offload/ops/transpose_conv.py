"""TRANSPOSE_CONV: the gradient of CONV_2D. Inputs: output shape, OHWI weights, NHWC input,
optional bias (v3+); float, hybrid, int8 and 16x8.

One GEMM gives every input pixel's contribution to a KH x KW output patch; the patches are
then scatter-added tap by tap (col2im) and the padding cropped, as LiteRT's TransposeConvV2.
The float GEMM stays whole (BLAS sums a row differently when a GEMM is cut in pieces), so
its KH*KW*O contributions per input pixel count against ``max_tensor_bytes``; the exact
integer sums go through it a few input rows at a time, which changes nothing but the memory.

Hybrid (float input, int8 filter) is LiteRT's reference loop, product by product in float
(:meth:`TransposeConv._hybrid_sums`): LiteRT runs no GEMM there, and its float additions fix
the last bits.

The integer paths (int8, 16x8) with a constant filter make the same sums where every
one is provably exact in float32, so in any order, and take the sub-pixel order instead: the
uncropped output row ``q * stride + p`` (phase ``p``) is the sum over ``j`` of input row
``q - j`` times filter row ``p + j * stride``, so every output cell ``q``, all phases at once,
reads one window of ``ceil(kernel / stride)`` input rows (and columns): one im2col and one
GEMM against weights that put each tap under its phase (zero where a phase has no such tap;
a second GEMM for the row phases with a tap row fewer), then the phases are interleaved and
the padding cropped. The int8 sums are requantized with
:class:`~offload.ops._exact_gemm.RuyRequantizer`: LiteRT's optimized kernel requantizes output
channels eight at a time like ruy (the second rounding sends halves up) and only the last
``channels % 8`` with TFLite's reference rounding (halves away from zero): rounding them all
the reference way was one step off on ~0.1% of small_cnn's outputs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from offload.geometry import geometry
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape, present
from offload.ops._bias import bias_types
from offload.ops._conv import (
    REQUANTIZE_BYTES,
    Rounding,
    RuyRequantizer,
    activation_scratch,
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
from offload.ops._types import WEIGHTS, accepts
from offload.quant import activation_range_quantized, dtype_range


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


def _cell_span(pad: int, size: int, stride: int) -> tuple[int, int]:
    """The first sub-pixel cell the crop keeps (uncropped output row ``cell * stride + phase``,
    the crop starting at row ``pad``) and how many cells the ``size`` kept rows span."""
    first = pad // stride
    return first, ((pad + size - 1) // stride - first + 1 if size else 0)


def _runs(a: np.ndarray) -> np.ndarray:
    """``a`` (last axis contiguous) with each last-axis run as one opaque element: numpy then
    copies a run per step of its inner loop instead of looping over a few values per run,
    several times faster where runs are a pixel's few channels."""
    return a.view(np.dtype((np.void, a.shape[-1] * a.itemsize)))[..., 0]


# The interleaved grid of whole cells may hold this many pixels more than the output before
# the phases are written into the output one by one instead: a stride far past the output
# would otherwise make a grid of stride_h * stride_w pixels for one output pixel.
_GRID_SLACK = 4096
# The exact integer path multiplies and scatters this many bytes of contributions at a time
# (whole input rows, at least one): each input pixel's contributions number KH*KW*O, so the
# whole product would grow with the window's area times the input's size.
_CHUNK_BYTES = 1 << 20
# The hybrid path's products per filter tap, in pieces of whole input rows of about this many
# bytes (at least one row): each row holds W * I * O floats.
_HYBRID_STEP_BYTES = 1 << 22
# Sums the exact path requantizes at a time (REQUANTIZE_BYTES each: 1 MiB of temporaries).
_REQUANTIZE_BLOCK = 1 << 14


def _tap_weights(codes: np.ndarray) -> np.ndarray:
    """OHWI int8 filter codes as (KH, KW, I, 1, 1, 1, O) float32 (exact): per tap, one input
    channel's weights against every output channel, as the hybrid path multiplies them."""
    taps = np.transpose(np.asarray(codes, np.float32), (1, 2, 3, 0))
    return np.ascontiguousarray(taps.reshape(*taps.shape[:3], 1, 1, 1, taps.shape[3]))


def transposed_shape(output_shape: np.ndarray, x: Shape, f: Shape) -> Shape:
    """The output shape the first input asks for; its batch and channels must be those the
    kernel writes (the input's batch, the filter's output channels)."""
    dims = int_list(output_shape)
    check_shape(
        len(dims) == 4 and min(dims) >= 0 and dims[0] == x[0] and dims[3] == f[0],
        f"expected an output_shape [{x[0]}, height, width, {f[0]}], found {dims}",
    )
    check_shape(  # LiteRT's Prepare refuses an empty output too
        dims[1] > 0 and dims[2] > 0,
        f"expected an output_shape of positive height and width, found {dims}",
    )
    return (dims[0], dims[1], dims[2], dims[3])


@register
class TransposeConv(OpKernel):
    op = "TRANSPOSE_CONV"
    max_version = 5
    types = accepts(
        "FLOAT32",
        "INT8 UINT8 INT16",
        data=(2,),
        others={1: WEIGHTS},
        across=bias_types(2, 3, "requested"),
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, f = ctx.shape(2), ctx.shape(1)
        _check_operands(x, f, ctx.shapes[3] if ctx.has(3) else None, ctx.options)
        output_shape = ctx.constant(0)
        return [None if output_shape is None else transposed_shape(output_shape, x, f)]

    @classmethod
    def scratch_bytes(cls, ctx: ShapeContext, outputs: Sequence[Shape]) -> int:
        # Float: the whole GEMM product (KH*KW*O per input pixel: its sums must keep BLAS's
        # order, which a GEMM in pieces does not), the uncropped output and the crop.
        # Integers: the exact path in pieces of _CHUNK_BYTES, and where the filter allows
        # it the sub-pixel path (padded input, patches, sums per phase, interleaving).
        x_shape, f_shape = ctx.shape(2), ctx.shape(1)
        n, h, w, ci = x_shape
        co, kh, kw, _ = f_shape
        (out,) = outputs
        elements = math.prod(out)
        x, f = ctx.tensor(2), ctx.tensor(1)
        kind = "quantized" if x is None or f is None else kind_of(x, f)
        activation = ctx.options.get("fused_activation_function", "NONE")
        stride = (max(ctx.options.get("stride_h", 1), 1), max(ctx.options.get("stride_w", 1), 1))
        g = geometry(ctx.options.get("padding", "SAME"), out[1:3], (kh, kw), stride)
        uncropped = n * (g.pad_top + out[1]) * (g.pad_left + out[2]) * co
        crop = elements if g.pad_top or g.pad_left else 0
        filter_size = ci * kh * kw * co
        act = activation_scratch(activation, elements)
        if kind == "float":
            product = n * h * w * kh * kw * co
            return 4 * (filter_size + product + uncropped + crop) + act
        if kind == "hybrid":  # codes, shifted (int32, float32), filter, grid, products, crop
            piece = min(_HYBRID_STEP_BYTES, 4 * n * h * w * ci * co)
            return 9 * n * h * w * ci + 4 * (filter_size + uncropped + crop) + piece + act
        # The exact path: the GEMM weights in float64, one chunk of the product, its input
        # rows in float64, the uncropped int64 sums, then the epilogue.
        row = w * kh * kw * co * 8
        chunk = row * max(1, min(h, _CHUNK_BYTES // max(row, 1)))
        rows = chunk // max(row, 1)
        # (Setup holds two float64 copies of the filter at once while it makes the layout.)
        exact = 8 * (2 * filter_size + n * rows * w * ci) + n * chunk + 8 * uncropped
        # The output, and the requantization's int64 passes over a block of rows.
        rows_per_block = max(1, _REQUANTIZE_BLOCK // max(1, out[2] * co))
        exact += 2 * elements + REQUANTIZE_BYTES * min(out[1], rows_per_block) * out[2] * co
        subpixel_path = cls._subpixel_path(ctx, kind)
        if subpixel_path is False:
            return exact
        (sh, sw), (jh, jw) = stride, (-(-kh // stride[0]), -(-kw // stride[1]))
        phases = min(sh, kh) * min(sw, kw)
        _, cells_h = _cell_span(g.pad_top, out[1], sh)
        _, cells_w = _cell_span(g.pad_left, out[2], sw)
        pixels = n * cells_h * cells_w
        sums = pixels * phases * co
        grid = n * cells_h * sh * cells_w * sw * co
        subpixel = 16 * filter_size + 2 * 4 * jh * jw * ci * phases * co  # weights, as set up
        subpixel += 4 * n * (cells_h + jh - 1) * (cells_w + jw - 1) * ci  # padded input
        subpixel += 4 * pixels * jh * jw * ci + 4 * sums  # patches, sums
        # The requantizer's float64 pass and constants, the last channels in int64;
        tail = sums // co * (co % 8)
        subpixel += 8 * sums + 2 * 8 * cells_w * phases * co + REQUANTIZE_BYTES * tail
        subpixel += 2 * (sums + grid + elements)  # the requantized sums, grid and crop
        return subpixel if subpixel_path else max(exact, subpixel)

    @staticmethod
    def _subpixel_path(ctx: ShapeContext, kind: str) -> bool | None:
        """Whether the kernel takes the sub-pixel path (:meth:`_setup_fast`): a constant
        filter whose sums are exact in float32 for every input its type holds, for int8 and
        16x8 with a lane of 8 output channels. None where it may: int8 and 16x8
        also need a requantizer exact in float64, packed INT4 weights are not read here."""
        x, f, weights = ctx.tensor(2), ctx.tensor(1), ctx.constant(1)
        if x is None or f is None or f.type_name == "INT4":
            return None
        if weights is None or (kind == "quantized" and (f.shape[0] < 8 or x.dtype == np.uint8)):
            return False
        zero_point = filter_zero_point(f)
        less = np.asarray(weights, np.int64) - np.reshape(zero_point, (-1, 1, 1, 1))
        per_output = int(np.abs(less).reshape(less.shape[0], -1).sum(axis=1).max(initial=0))
        lo, hi = dtype_range(x.dtype)
        zero = scale_zp(x)[1]
        return None if max(zero - lo, hi - zero) * per_output < 1 << 24 else False

    def setup(self) -> None:
        opts = self.options
        self.stride = (opts.get("stride_h", 1), opts.get("stride_w", 1))
        self.padding = opts.get("padding", "SAME")
        self.activation = opts.get("fused_activation_function", "NONE")
        f, x, out = self.input_tensor(1), self.input_tensor(2), self.outputs[0]
        self.kernel_hw = (f.shape[1], f.shape[2])
        (kh, kw), (sh, sw) = self.kernel_hw, self.stride
        # Sub-pixel geometry: each output cell reads a window of ceil(kernel / stride) input
        # rows and columns; phases from the kernel's size on (kernel < stride) get no tap.
        self.window = (-(-kh // sh), -(-kw // sw))
        self.phases = (min(sh, kh), min(sw, kw))
        self.kind = kind_of(x, f)
        self.w_zp = filter_zero_point(f) if self.kind == "quantized" else 0
        weights = weight_value(self, 1)
        hybrid = self.kind == "hybrid"  # reads the filter as it is (_hybrid_sums)
        self.w = None if weights is None or hybrid else self._gemm_weights(weights)
        if hybrid:
            self.scales = filter_scales(f, f.shape[0])
            self._taps = None if weights is None else _tap_weights(weights)
        elif self.kind == "quantized":
            in_scale, self.x_zp = scale_zp(x)
            f_quantization = self.required(f.quantization, "quantization on the filter (input 1)")
            self.mult, self.shift = output_multipliers(
                in_scale, f_quantization, scale_zp(out)[0], f.shape[0]
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

    def _exact_in_float32(self, w: np.ndarray, max_x: int) -> bool:
        """Whether inputs up to ``max_x`` in magnitude (less their zero point) keep every sum
        exact in float32 with the constant GEMM weights ``w`` (``self.w``): an output gathers
        at most all KH*KW*I products of its channel, so every partial sum, in the GEMM or the
        scatter, is bounded by their magnitudes."""
        channels = self.input_tensor(1).shape[0]
        per_output = np.abs(w).reshape(w.shape[0], -1, channels).sum(axis=(0, 1))
        return max_x * int(per_output.max(initial=0)) < 1 << 24

    def _setup_fast(self) -> tuple[list[tuple[int, slice, np.ndarray]], RuyRequantizer] | None:
        """Float32 GEMM weights and the requantizer of the int8 path, or None where a sum
        could be inexact in float32 or the requantization needs the int64 path."""
        x, f, out = self.input_tensor(2), self.input_tensor(1), self.outputs[0]
        w = self.w
        if w is None or not self.ruy_channels:
            return None
        bias: np.ndarray = np.zeros(f.shape[0], np.int64)
        if len(self.inputs) > 3 and self.inputs[3] is not None:
            bias_value = self.constant(3)
            if bias_value is None:
                return None
            bias = bias_value
        info = np.iinfo(x.dtype)
        if not self._exact_in_float32(w, max(self.x_zp - int(info.min), int(info.max) - self.x_zp)):
            return None
        out_quantization = self.required(out.quantization, "quantization on the output")
        clamp = activation_range_quantized(self.activation, out_quantization, out.dtype)
        requantizer = RuyRequantizer.build(
            self.mult,
            self.shift,
            np.asarray(bias, np.int64).ravel(),
            scale_zp(out)[1],
            clamp,
            out.dtype,
        )
        return None if requantizer is None else (self._subpixel_weights(w), requantizer)

    def _subpixel_weights(self, w: np.ndarray) -> list[tuple[int, slice, np.ndarray]]:
        """The constant GEMM weights ``w`` (``self.w``, (I, KH*KW*O)) laid out for
        :meth:`_subpixel_sums`, in float32.

        Window row (a_h, a_w, i) against phase column (p_h, p_w, o) holds tap
        (p_h + (J_h - 1 - a_h) * s_h, p_w + (J_w - 1 - a_w) * s_w), or zero where that tap
        lies past the kernel. A row phase with fewer taps than J_h (a kernel not a multiple
        of the stride) reads only the last window rows: the row phases are grouped by their
        first window row, and each group is (that row, its row phases, weights
        ((J_h - row) * J_w * I, phases * P_w * O)), so no GEMM multiplies whole zero rows.
        At most two groups, together at most four times the filter's size."""
        (kh, kw), (sh, sw) = self.kernel_hw, self.stride
        (jh, jw), (ph, pw) = self.window, self.phases
        channels = w.shape[0]
        taps = w.reshape(channels, kh, kw, -1)
        mat = np.zeros((jh, jw, channels, ph, pw, taps.shape[3]), np.float32)
        for a_h, p_h, a_w, p_w in itertools.product(range(jh), range(ph), range(jw), range(pw)):
            ky, kx = p_h + (jh - 1 - a_h) * sh, p_w + (jw - 1 - a_w) * sw
            if ky < kh and kx < kw:
                mat[a_h, a_w, :, p_h, p_w] = taps[:, ky, kx]
        first_rows = [jh - len(range(p_h, kh, sh)) for p_h in range(ph)]
        groups = []
        for row in sorted(set(first_rows)):
            phases = [p_h for p_h in range(ph) if first_rows[p_h] == row]
            rows = slice(phases[0], phases[-1] + 1)  # n_h falls with p_h: consecutive phases
            group = mat[row:, :, :, rows].reshape((jh - row) * jw * channels, -1)
            groups.append((row, rows, np.ascontiguousarray(group)))
        return groups

    def _gemm_weights(self, w: np.ndarray) -> np.ndarray:
        """OHWI -> (I, KH*KW*O): one row per input channel."""
        dtype = np.float32 if self.kind == "float" else np.float64
        mat = np.asarray(w, dtype)
        if self.kind == "quantized":
            mat = mat - np.reshape(self.w_zp, (-1, 1, 1, 1))
        return np.ascontiguousarray(mat.transpose(3, 1, 2, 0).reshape(w.shape[3], -1))

    def _uncropped(self, n: int, out_hw: tuple[int, int], channels: int, dtype: type) -> np.ndarray:
        """Zeros for the output before the crop, (N, pad_top + OH, pad_left + OW, O): only
        rows and columns before the crop's far edge are kept, since sizing the buffer by the
        whole scatter would let a huge stride in a tiny model allocate gigabytes."""
        g = geometry(self.padding, out_hw, self.kernel_hw, self.stride)
        return np.zeros((n, g.pad_top + out_hw[0], g.pad_left + out_hw[1], channels), dtype)

    def _col2im(self, cols: np.ndarray, buf: np.ndarray, first_row: int = 0) -> None:
        """Scatter-add the (N, H, W, KH, KW, O) contributions of input rows ``first_row`` on
        into :meth:`_uncropped` ``buf``, tap by tap in filter order (LiteRT's float order).
        Into an integer ``buf`` float contributions add exactly: they are whole numbers with
        every sum below 2**53."""
        _, h, w, kh, kw, _ = cols.shape
        _, end_h, end_w, _ = buf.shape
        sh, sw = self.stride
        for ky in range(kh):
            ys = range(first_row * sh + ky, end_h, sh)[:h]  # the rows input rows land on
            for kx in range(kw):
                xs = range(kx, end_w, sw)[:w]
                target = buf[:, ys.start : ys.stop : sh, xs.start : xs.stop : sw]
                source = cols[:, : len(ys), : len(xs), ky, kx]
                np.add(target, source, out=target, casting="unsafe")

    def _cropped(self, buf: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
        """The output in :meth:`_uncropped` ``buf``, the padding cropped: a view."""
        g = geometry(self.padding, out_hw, self.kernel_hw, self.stride)
        return buf[:, g.pad_top :, g.pad_left :]

    def _exact_sums(
        self, x: np.ndarray, less: np.ndarray | int, w: np.ndarray, out_hw: tuple[int, int]
    ) -> np.ndarray:
        """The exact integer sums of ``x`` (N, H, W, I) less ``less`` (per batch, or the zero
        point) through the float64 GEMM weights ``w``, cropped: (N, OH, OW, O) int64. Every
        product and sum is a whole number below 2**53, so the GEMM and the scatter go in
        pieces of whole input rows (:data:`_CHUNK_BYTES`) in any order, with the same result."""
        n, h, wd, c = x.shape
        kh, kw = self.kernel_hw
        buf = self._uncropped(n, out_hw, w.shape[1] // (kh * kw), np.int64)
        step = max(1, _CHUNK_BYTES // max(1, 8 * wd * w.shape[1]))
        work = np.empty(n * min(step, h) * wd * w.shape[1], np.float64)  # a chunk's products
        for first in range(0, h, step):
            rows = np.subtract(x[:, first : first + step], less, dtype=np.float64)
            cols = work[: rows.size // c * w.shape[1]].reshape(-1, w.shape[1])
            np.matmul(rows.reshape(-1, c), w, out=cols)
            np.rint(cols, out=cols)
            self._col2im(cols.reshape(n, rows.shape[1], wd, kh, kw, -1), buf, first)
        return self._cropped(buf, out_hw)

    def _subpixel_sums(
        self,
        x: np.ndarray,
        zero_point: np.floating | np.ndarray,
        weights: list[tuple[int, slice, np.ndarray]],
        out_hw: tuple[int, int],
    ) -> np.ndarray:
        """The exact sums of integer ``x`` (N, H, W, I) less ``zero_point`` through
        :meth:`_subpixel_weights`, for the sub-pixel cells the crop keeps: float32
        (N, Q_h, Q_w, P_h, P_w, O), cell (q_h, q_w) phase (p_h, p_w) being uncropped output
        pixel (q * stride + p) counting cells from :func:`_cell_span`'s first."""
        n, h, w, c = x.shape
        (sh, sw), (jh, jw) = self.stride, self.window
        g = geometry(self.padding, out_hw, self.kernel_hw, self.stride)
        first_h, cells_h = _cell_span(g.pad_top, out_hw[0], sh)
        first_w, cells_w = _cell_span(g.pad_left, out_hw[1], sw)
        # Padded row r holds input row r - (J_h - 1) (zero outside the input) and cell q reads
        # padded rows q .. q + J_h - 1: only the rows of the kept cells are stored.
        rows, cols = cells_h + jh - 1, cells_w + jw - 1
        padded = scratch("transpose_conv_input", n * rows * cols * c, np.float32)
        padded = padded.reshape(n, rows, cols, c)
        padded.fill(0)
        y0, y1 = max(0, first_h - jh + 1), min(h, first_h + cells_h)
        x0, x1 = max(0, first_w - jw + 1), min(w, first_w + cells_w)
        if y0 < y1 and x0 < x1:
            r, k = y0 + jh - 1 - first_h, x0 + jw - 1 - first_w
            target = padded[:, r : r + y1 - y0, k : k + x1 - x0]
            np.subtract(x[:, y0:y1, x0:x1], zero_point, out=target, dtype=np.float32)
        # im2col: a window row's J_w pixels are one contiguous run of the padded row, copied
        # as one element (numpy's strided views take a buffer, not a view, so via the base).
        pixels = n * cells_h * cells_w
        im2col = scratch("transpose_conv_cols", pixels * jh * jw * c, np.float32)
        im2col = im2col.reshape(n, cells_h, cells_w, jh, jw * c)
        if im2col.size:
            run = np.dtype((np.void, jw * c * padded.itemsize))
            stride_n, stride_r, stride_c, _ = padded.strides
            windows = np.ndarray(
                (n, cells_h, cells_w, jh), run, padded, 0, (stride_n, stride_r, stride_c, stride_r)
            )
            for a_h in range(jh):  # one window row a pass: numpy's inner loop runs along cells
                np.copyto(_runs(im2col[:, :, :, a_h]), windows[..., a_h])
        im2col = im2col.reshape(pixels, -1)
        channels = self.input_tensor(1).shape[0]
        sums = scratch(
            "transpose_conv_sums", pixels * math.prod(self.phases) * channels, np.float32
        )
        sums = sums.reshape(pixels, *self.phases, channels)
        for first_row, phase_rows, group in weights:
            # Rows of phases whose taps miss the first window rows skip those columns.
            target = sums[:, phase_rows].reshape(pixels, -1)
            np.matmul(im2col[:, first_row * jw * c :], group, out=target)
        return sums.reshape(n, cells_h, cells_w, *self.phases, -1)

    def _interleave(
        self,
        sums: np.ndarray,
        finish: Callable[[np.ndarray], np.ndarray],
        out_hw: tuple[int, int],
    ) -> np.ndarray:
        """``finish`` (the requantization or the dequantization, elementwise) of the
        sub-pixel ``sums`` (N, Q_h, Q_w, P_h, P_w, O), interleaved into the cropped output
        (N, OH, OW, O); phases without a tap take ``finish`` of a zero sum."""
        n, cells_h, cells_w, ph, pw, channels = sums.shape
        (sh, sw), (out_h, out_w) = self.stride, out_hw
        values = finish(sums)
        fill = None
        if ph < sh or pw < sw:
            fill = finish(np.zeros((n, 1, 1, 1, 1, channels), np.float32))
        g = geometry(self.padding, out_hw, self.kernel_hw, self.stride)
        top, left = g.pad_top % sh, g.pad_left % sw  # the crop's offset into the first cell
        if cells_h * sh * cells_w * sw <= 4 * out_h * out_w + _GRID_SLACK:
            grid = np.empty((n, cells_h, sh, cells_w, sw, channels), values.dtype)
            if fill is not None:
                grid[...] = fill
            if values.size:  # each cell's P_w phases of a row phase: one run in both layouts
                runs = np.ascontiguousarray(values).reshape(n, cells_h, cells_w, ph, -1)
                target = grid.reshape(n, cells_h, sh, cells_w, -1)[:, :, :ph, :, : pw * channels]
                np.copyto(_runs(target), _runs(runs).transpose(0, 1, 3, 2))
            grid = grid.reshape(n, cells_h * sh, cells_w * sw, channels)
            return np.ascontiguousarray(grid[:, top : top + out_h, left : left + out_w])
        # A stride far past the output: only the phases the output holds, one by one.
        out = np.empty((n, out_h, out_w, channels), values.dtype)
        for y in range(min(sh, out_h)):
            cell_h, p_h = divmod(y + top, sh)
            count_h = len(range(y, out_h, sh))
            for x in range(min(sw, out_w)):
                cell_w, p_w = divmod(x + left, sw)
                count_w = len(range(x, out_w, sw))
                if p_h < ph and p_w < pw:
                    block = values[:, cell_h : cell_h + count_h, cell_w : cell_w + count_w]
                    out[:, y::sh, x::sw] = block[:, :, :, p_h, p_w]
                else:  # a phase without a tap: ph < sh or pw < sw, so ``fill`` is made
                    tap_fill = present(fill, "the value of phases without a tap")
                    out[:, y::sh, x::sw] = tap_fill.reshape(n, 1, 1, channels)
        return out

    def _requantize(
        self, requantize: RuyRequantizer, sums: np.ndarray, bias: np.ndarray | None
    ) -> np.ndarray:
        """Exact integer ``sums`` (..., O) -> the output integers: ``requantize`` (the fast
        path's RuyRequantizer) for the channels LiteRT requantizes eight at a time, TFLite's
        reference rounding after."""
        flat = sums.reshape(-1, sums.shape[-1])
        result = np.empty(flat.shape, self.outputs[0].dtype)
        # One block of rows per cell row, for the requantizer's tiled constants.
        requantize(flat, result, block=math.prod(sums.shape[2:-1]))
        v = self.ruy_channels
        if v < flat.shape[1]:  # the channels LiteRT requantizes one by one
            tail = flat[:, v:].astype(np.int64)
            if bias is not None:
                tail += bias.astype(np.int64)[v:]
            result[:, v:] = finish_quantized(
                tail, self.mult[v:], self.shift[v:], self.outputs[0], self.activation, self.rounding
            )
        return result.reshape(sums.shape)

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        out_shape = self.required(inputs[0], "input 0 (the output shape)")
        f = self.required(inputs[1], "input 1 (the filter)")
        x = self.required(inputs[2], "input 2")
        bias = inputs[3] if len(inputs) > 3 else None
        shape = transposed_shape(out_shape, x.shape, f.shape)
        if 0 in shape:  # a batch or output channels of 0: nothing to compute
            return np.zeros(shape, self.outputs[0].dtype)
        out_hw = (shape[1], shape[2])
        n, h, wd, c = x.shape
        kh, kw = self.kernel_hw
        if self.kind == "hybrid":
            taps = self._taps if self._taps is not None else _tap_weights(f)
            out = self._hybrid_sums(x, taps, out_hw)
            if bias is not None:
                out += bias
            return apply_fused_activation(out, self.activation)
        w = self.w if self.w is not None else self._gemm_weights(f)
        if self.kind == "float":
            buf = self._uncropped(n, out_hw, f.shape[0], np.float32)
            cols = np.asarray(x, np.float32).reshape(-1, c) @ w
            self._col2im(cols.reshape(n, h, wd, kh, kw, -1), buf)
            del cols  # before the crop's copy
            out = np.ascontiguousarray(self._cropped(buf, out_hw))
            if bias is not None:
                out += bias
            return apply_fused_activation(out, self.activation)
        if self._fast is not None:
            fast_weights, requantizer = self._fast
            sums = self._subpixel_sums(x, np.float32(self.x_zp), fast_weights, out_hw)
            return self._interleave(sums, lambda s: self._requantize(requantizer, s, bias), out_hw)
        acc = self._exact_sums(x, self.x_zp, w, out_hw)
        if bias is not None:
            acc += bias.astype(np.int64)
        return self._requantize_exact(acc)

    def _hybrid_sums(self, x: np.ndarray, taps: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
        """LiteRT's hybrid kernel (reference_ops::HybridTransposeConv, which its optimized
        registration runs too): each batch quantized asymmetrically, then every single product
        ``(code - offset) * weight`` turned to float, times the channel's scale, times the
        batch's, and added to a zeroed output in the loop order input row, column, channel,
        filter row, column. For one output element that is input row, column, channel in
        turn, so filter taps from the last back and, within a tap, channels in order: per tap,
        all its scaled products at once (in pieces of input rows), then added to the output one
        input channel after another. The weights' zero point is ignored, as LiteRT ignores it.
        (N, OH, OW, O) float32, cropped."""
        n, h, wd, c = x.shape
        q, in_scale, offset = quantize_rows(x.reshape(n, -1), asymmetric=True)
        # Channels first, as float32 (|code - offset| <= 255 and every product below is exact).
        shifted = q.reshape(x.shape).astype(np.int32) - offset.reshape(n, 1, 1, 1)
        less = np.ascontiguousarray(np.moveaxis(shifted, 3, 0), dtype=np.float32)
        batch_scale = in_scale.astype(np.float32).reshape(1, n, 1, 1, 1)
        scales = np.asarray(self.scales, np.float32)
        outs = taps.shape[-1]
        buf = self._uncropped(n, out_hw, outs, np.float32)
        _, end_h, end_w, _ = buf.shape
        (kh, kw), (sh, sw) = self.kernel_hw, self.stride
        for ky in reversed(range(kh)):
            for kx in reversed(range(kw)):
                xs = range(kx, end_w, sw)[:wd]
                ys = range(ky, end_h, sh)[:h]
                weights = taps[ky, kx]
                step = max(1, _HYBRID_STEP_BYTES // max(1, 4 * n * len(xs) * c * outs))
                for first in range(0, len(ys), step):
                    rows = ys[first : first + step]
                    if not len(rows) or not len(xs):
                        continue
                    target = buf[:, rows.start : rows.stop : sh, xs.start : xs.stop : sw]
                    pixels = less[:, :, first : first + len(rows), : len(xs), None]
                    products = np.empty((c, n, len(rows), len(xs), outs), np.float32)
                    # |code - offset| * |weight| <= 255 * 128: exact in float32
                    np.multiply(pixels, weights, out=products)
                    products *= scales
                    products *= batch_scale
                    total = np.array(target)  # contiguous: adds over strided rows cost 3x
                    for channel in products:  # in turn: each output's chain of additions
                        total += channel
                    target[...] = total
        return np.ascontiguousarray(self._cropped(buf, out_hw))

    def _requantize_exact(self, acc: np.ndarray) -> np.ndarray:
        """int64 sums (N, OH, OW, O) -> the output integers: the channels LiteRT requantizes
        eight at a time round as ruy does, the rest by the kernel's rule. In blocks of output
        rows, since the requantization makes several int64 temporaries of its input's size."""
        n, out_h, out_w, channels = acc.shape
        v = self.ruy_channels
        out = np.empty(acc.shape, self.outputs[0].dtype)
        parts: list[tuple[slice, Rounding]] = [
            (slice(0, v), "ruy"),
            (slice(v, channels), self.rounding),
        ]
        step = max(1, _REQUANTIZE_BLOCK // max(1, out_w * channels))
        for b, top in itertools.product(range(n), range(0, out_h, step)):
            for lanes, rounding in parts:
                if lanes.stop > lanes.start:
                    out[b, top : top + step, :, lanes] = finish_quantized(
                        acc[b, top : top + step, :, lanes],
                        self.mult[lanes],
                        self.shift[lanes],
                        self.outputs[0],
                        self.activation,
                        rounding,
                    )
        return out
