"""RESIZE_NEAREST_NEIGHBOR (NHWC): copy the nearest source pixel, chosen as TFLite does (its
8-bit kernel uses a fixed-point scale unless align_corners or half_pixel_centers is set)."""

from __future__ import annotations

import numpy as np

from offload.ops._registry import register
from offload.ops._resize import ResizeOp, nearest_axis, nearest_fixed_axis, resized_shape
from offload.ops._types import accepts


@register
class ResizeNearestNeighbor(ResizeOp):
    op = "RESIZE_NEAREST_NEIGHBOR"
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 BOOL UINT16 UINT32")

    def setup(self) -> None:
        super().setup()
        eight_bit = self.outputs[0].dtype.itemsize == 1
        self.fixed = eight_bit and not (self.align_corners or self.half_pixel)
        self.tables: dict[tuple[int, int], np.ndarray] = {}

    def _axis(self, in_size: int, out_size: int) -> np.ndarray:
        key = (in_size, out_size)
        if key not in self.tables:
            if self.fixed:
                self.tables[key] = nearest_fixed_axis(in_size, out_size)
            else:
                self.tables[key] = nearest_axis(
                    in_size, out_size, self.align_corners, self.half_pixel
                )
        return self.tables[key]

    def _run(self, x: np.ndarray, size: np.ndarray) -> np.ndarray:
        _, out_h, out_w, _ = resized_shape(x.shape, size)
        return x[:, self._axis(x.shape[1], out_h)][:, :, self._axis(x.shape[2], out_w)]
