"""Source-pixel tables of RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR along one axis.

Each table is computed once per (input size, output size) and reused; the kernels then gather
whole rows and columns with numpy. The arithmetic follows TFLite's kernels step for step in
float32 (or in its 10-bit fixed point for int8/int16), because the choice of source pixel and
the rounding of the result depend on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._quant import tflite_round

__all__ = [
    "ResizeOp",
    "output_size",
    "resized_shape",
    "resize_output_shape",
    "bilinear_float_axis",
    "bilinear_fixed_axis",
    "nearest_axis",
    "nearest_fixed_axis",
]


def output_size(size: np.ndarray) -> tuple[int, int]:
    """(new_height, new_width) from the int32 ``size`` input."""
    flat = np.asarray(size).reshape(-1)
    if flat.size != 2 or flat.min() <= 0:
        raise ValueError(f"expected a size of two positive ints, found {flat.tolist()}")
    return int(flat[0]), int(flat[1])


def _check_nhwc(shape: Shape) -> None:
    check_shape(len(shape) == 4, f"expected a 4-D NHWC input, found shape {list(shape)}")


def resized_shape(input_shape: Shape, size: np.ndarray) -> Shape:
    """The NHWC output shape: the input's batch and channels, the height and width of
    ``size``."""
    _check_nhwc(input_shape)
    height, width = output_size(size)
    return (input_shape[0], height, width, input_shape[3])


def resize_output_shape(ctx: ShapeContext) -> Shape | None:
    """RESIZE_BILINEAR's and RESIZE_NEAREST_NEIGHBOR's output shape, or None when ``size``
    is computed at run time (the input must be 4-D either way)."""
    x, size = ctx.shape(0), ctx.constant(1)
    if size is None:
        _check_nhwc(x)
        return None
    return resized_shape(x, size)


class ResizeOp(OpKernel):
    """RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR: an NHWC input resized to the height and
    width of input 1, with the two options both read (``align_corners``,
    ``half_pixel_centers``)."""

    max_version = 4

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [resize_output_shape(ctx)]

    def setup(self) -> None:
        self.align_corners = bool(self.options.get("align_corners", False))
        self.half_pixel = bool(self.options.get("half_pixel_centers", False))


def _float_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def bilinear_float_axis(
    in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, float32 fraction) per output position, as TFLite's
    ComputeInterpolationValues computes them."""
    scale = _float_scale(in_size, out_size, align_corners)
    pos = np.arange(out_size, dtype=np.float32)
    if half_pixel_centers:
        src = (pos + np.float32(0.5)) * scale - np.float32(0.5)
    else:
        src = pos * scale
    lower = np.maximum(np.floor(src), 0).astype(np.intp)
    upper = np.minimum(np.ceil(src).astype(np.intp), in_size - 1)
    # The fraction is taken from the clamped lower index, so it can be negative near the
    # border with half-pixel centers; TFLite keeps it that way (the two weights still sum to 1).
    return lower, upper, (src - lower.astype(np.float32)).astype(np.float32)


def bilinear_fixed_axis(
    in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, int64 fraction in 1/1024) per output position, the 10-bit
    fixed point of TFLite's ResizeBilinearInteger (its int8 and int16 path)."""
    one = 1 << 10
    if align_corners and out_size > 1:
        scale = (one * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = (one * in_size + out_size // 2) // out_size
    pos = np.arange(out_size, dtype=np.int64)
    src = pos * scale + (scale // 2 - (1 << 9) if half_pixel_centers else 0)
    # src >= -512, so floor division agrees with C's truncation after the clamps.
    lower = np.maximum(src // one, 0)
    upper = np.minimum((src + one - 1) // one, in_size - 1)
    return lower.astype(np.intp), upper.astype(np.intp), src - one * lower


def nearest_axis(
    in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool
) -> np.ndarray:
    """Source index per output position, TFLite's reference GetNearestNeighbor in float32."""
    scale = _float_scale(in_size, out_size, align_corners)
    offset = np.float32(0.5 if half_pixel_centers else 0.0)
    src = (np.arange(out_size, dtype=np.float32) + offset) * scale
    index = tflite_round(src) if align_corners else np.floor(src)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    if half_pixel_centers:
        index = np.maximum(index, 0)
    return index.astype(np.intp)


def nearest_fixed_axis(in_size: int, out_size: int) -> np.ndarray:
    """Source index per output position in TFLite's optimized 8-bit kernel (no align_corners,
    no half-pixel centers): a 16.16 fixed-point scale with a +1 nudge."""
    scale = (in_size << 16) // out_size + 1
    src = (np.arange(out_size, dtype=np.int64) * scale) >> 16
    return np.minimum(src, in_size - 1).astype(np.intp)
