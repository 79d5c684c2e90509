"""RESHAPE: the same elements in a new shape, taken from the shape tensor or the options."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list, resolve_shape


@register
class Reshape(OpKernel):
    op = "RESHAPE"
    max_version = 1

    def setup(self) -> None:
        new_shape = list(self.options.get("new_shape", ()) or ())
        # TFLite's converter writes new_shape [0] for a reshape to a scalar.
        self.option_shape = [] if new_shape == [0] else new_shape
        self.has_options = bool(new_shape)

    def run(self, x: np.ndarray, shape: np.ndarray | None = None) -> np.ndarray:
        # Like TFLite: a rank-1 int32 shape tensor wins over the options.
        use_tensor = shape is not None and shape.ndim == 1 and shape.dtype == np.int32
        if shape is not None and not use_tensor and not self.has_options:
            use_tensor = True  # an int64 shape tensor is all there is: TFLite would fail
        target = int_list(shape) if use_tensor else self.option_shape
        return x.reshape(resolve_shape(target, x.shape))
