"""RESIZE_BILINEAR (NHWC): float32 and uint8 interpolate in float32 like TFLite's optimized
kernel; int8 and int16 use its 10-bit fixed-point kernel, rounding half away from zero."""

from __future__ import annotations

import numpy as np

from offload.ops._registry import register
from offload.ops._resize import ResizeOp, bilinear_fixed_axis, bilinear_float_axis, resized_shape
from offload.ops._types import accepts


@register
class ResizeBilinear(ResizeOp):
    op = "RESIZE_BILINEAR"
    types = accepts("FLOAT32 INT8 UINT8 INT16")

    def setup(self) -> None:
        super().setup()
        if self.align_corners and self.half_pixel:
            raise ValueError("half_pixel_centers and align_corners cannot both be set")
        self.dtype = self.outputs[0].dtype
        self.fixed = self.dtype in (np.int8, np.int16)
        self.tables: dict[tuple[int, int, int, int], tuple] = {}

    def _tables(self, in_h: int, in_w: int, out_h: int, out_w: int) -> tuple:
        key = (in_h, in_w, out_h, out_w)
        if key not in self.tables:
            axis = bilinear_fixed_axis if self.fixed else bilinear_float_axis
            ys = axis(in_h, out_h, self.align_corners, self.half_pixel)
            xs = axis(in_w, out_w, self.align_corners, self.half_pixel)
            self.tables[key] = (ys, xs)
        return self.tables[key]

    def _run(self, x: np.ndarray, size: np.ndarray) -> np.ndarray:
        _, out_h, out_w, _ = resized_shape(x.shape, size)
        _, in_h, in_w, _ = x.shape
        exact_2x = out_h == 2 * in_h and out_w == 2 * in_w
        if self.dtype == np.float32 and exact_2x and not (self.align_corners or self.half_pixel):
            return _upsample_2x(x)
        (y0, y1, dy), (x0, x1, dx) = self._tables(in_h, in_w, out_h, out_w)
        rows0, rows1 = x[:, y0], x[:, y1]
        corners = (rows0[:, :, x0], rows0[:, :, x1], rows1[:, :, x0], rows1[:, :, x1])
        dy, dx = dy[:, None, None], dx[None, :, None]
        if self.fixed:
            one_q = np.int64(1 << 10)
            weights = ((one_q - dy) * (one_q - dx), (one_q - dy) * dx, dy * (one_q - dx), dy * dx)
            acc = sum(c.astype(np.int64) * w for c, w in zip(corners, weights))
            # (acc +- 2**19) / 2**20 with C's truncating division: round half away from zero.
            rounded = np.where(acc > 0, (acc + (1 << 19)) >> 20, -((-acc + (1 << 19)) >> 20))
            return rounded.astype(self.dtype)
        one = np.float32(1)
        weights = ((one - dy) * (one - dx), (one - dy) * dx, dy * (one - dx), dy * dx)
        # Summed corner by corner in float32, in TFLite's order, so rounding matches.
        acc = corners[0] * weights[0]
        for c, w in zip(corners[1:], weights[1:]):
            acc = acc + c * w
        if self.dtype == np.float32:
            return acc.astype(np.float32, copy=False)
        # Integer types without a fixed-point kernel (uint8): add 0.5 and truncate.
        return (acc + np.float32(0.5)).astype(self.dtype)


def _upsample_2x(x: np.ndarray) -> np.ndarray:
    """TFLite's float special case for an exact 2x upscale without align_corners or half-pixel
    centers: pairwise means, whose float32 rounding differs from the generic weighted sum."""
    n, h, w, depth = x.shape
    right = x[:, :, np.minimum(np.arange(w) + 1, w - 1)]
    below = x[:, np.minimum(np.arange(h) + 1, h - 1)]
    below_right = below[:, :, np.minimum(np.arange(w) + 1, w - 1)]
    two = np.float32(2)
    out = np.empty((n, 2 * h, 2 * w, depth), np.float32)
    down = (x + below) / two
    out[:, 0::2, 0::2] = x
    out[:, 0::2, 1::2] = (x + right) / two
    out[:, 1::2, 0::2] = down
    out[:, 1::2, 1::2] = (down + (right + below_right) / two) / two
    return out
