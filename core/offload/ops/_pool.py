"""Shared machinery of the 2-D pooling ops: window views over the padded input, the number
of in-bounds taps per output pixel (TFLite averages over those only), activation ranges."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.geometry import Geometry, geometry
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._conv import pad_spatial, patches
from offload.ops._elementwise import float_clamp
from offload.ops._quant import activation_range_quantized, dtype_range

__all__ = ["PoolKernel"]

# The fused activations a float pool honours, each a clamp (CalculateActivationRange).
_CLAMP_ACTIVATIONS = ("RELU", "RELU_N1_TO_1", "RELU6")


class PoolKernel(OpKernel):
    """Base of AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D: reads Pool2DOptions once."""

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shape = ctx.shape(0)
        check_shape(len(shape) == 4, f"expected a 4-D NHWC input, found shape {list(shape)}")
        opts = ctx.options
        filter_hw = (opts.filter_height, opts.filter_width)
        stride = (opts.get("stride_h", 1), opts.get("stride_w", 1))
        check_shape(
            min(*filter_hw, *stride) >= 1,
            f"expected filter sizes and strides >= 1, found filter {list(filter_hw)} and "
            f"stride {list(stride)}",
        )
        g = geometry(opts.get("padding", "SAME"), shape[1:3], filter_hw, stride)
        # An empty output is legal (a real keyword-spotting model pools 2x2 VALID over a
        # height of 1); a negative one means the window cannot fit at all.
        check_shape(
            g.out_h >= 0 and g.out_w >= 0,
            f"expected a {opts.get('padding')} window of {list(filter_hw)} that fits the "
            f"input's {list(shape[1:3])}, found an output of {g.out_h}x{g.out_w}",
        )
        return [(shape[0], g.out_h, g.out_w, shape[3])]

    def setup(self) -> None:
        opts = self.options
        self.kernel_hw = (opts.filter_height, opts.filter_width)
        self.stride = (opts.get("stride_h", 1), opts.get("stride_w", 1))
        self.padding = opts.get("padding", "SAME")
        self.activation = opts.get("fused_activation_function", "NONE")
        self.out_dtype = self.outputs[0].dtype

    def windows(self, x: np.ndarray, pad_value: float) -> tuple[np.ndarray, Geometry]:
        """The (N, OH, OW, KH, KW, C) view of x padded with ``pad_value``."""
        g = geometry(self.padding, x.shape[1:3], self.kernel_hw, self.stride)
        return patches(pad_spatial(x, g, pad_value), g, self.kernel_hw, self.stride), g

    def tap_counts(self, in_hw: tuple[int, int], g: Geometry) -> np.ndarray:
        """(OH, OW, 1) count of window taps that fall inside the unpadded input."""
        ones = np.ones((1, *in_hw, 1), np.int64)
        view = patches(pad_spatial(ones, g, 0), g, self.kernel_hw, self.stride)
        return view.sum(axis=(3, 4))[0]

    def taps(self, view: np.ndarray):
        """Each (N, OH, OW, C) tap slice of the window view, in filter order."""
        for ky in range(self.kernel_hw[0]):
            for kx in range(self.kernel_hw[1]):
                yield view[:, :, :, ky, kx, :]

    def finish(self, out: np.ndarray) -> np.ndarray:
        """Apply the fused activation: a clamp, in float or in quantized space."""
        if np.issubdtype(self.out_dtype, np.floating):
            # LiteRT's float pools clamp to the activation's range, [lowest, max] for NONE (an
            # overflow gives +-FLT_MAX, not inf), and take no other part of it: TANH, SIGMOID
            # and SIGN_BIT leave the values as they are.
            clamp = self.activation if self.activation in _CLAMP_ACTIVATIONS else "NONE"
            return float_clamp(out.astype(self.out_dtype, copy=False), clamp)
        q = self.outputs[0].quantization
        if q is None:
            lo, hi = dtype_range(self.out_dtype)
        else:
            lo, hi = activation_range_quantized(self.activation, q, self.out_dtype)
        return np.clip(out, lo, hi).astype(self.out_dtype)
