"""CONCATENATION: join tensors along ``axis``; 8-bit inputs whose scale or zero point differ
from the output's are requantized the way TFLite's ConcatenationWithScaling does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._quant import dtype_range, tflite_round
from offload.ops._registry import register
from offload.ops._shape import normalize_axis, zero_point
from offload.ops._types import accepts
from offload.quant import scale_zero_point


@register
class Concatenation(OpKernel):
    op = "CONCATENATION"
    max_version = 7
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL INT4 UINT32", data="all")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        check_shape(len(ctx.shapes) >= 1, "expected at least one input, found none")
        shapes = [ctx.shape(i) for i in range(len(ctx.shapes))]
        first = shapes[0]
        # LiteRT refuses scalars (there is no axis to join them along).
        check_shape(len(first) >= 1, "expected inputs of rank >= 1, found a scalar")
        axis = normalize_axis(int(ctx.options.get("axis", 0)), len(first))
        for s in shapes[1:]:
            check_shape(
                len(s) == len(first)
                and all(d == e for i, (d, e) in enumerate(zip(s, first)) if i != axis),
                f"expected inputs equal to {list(first)} except on axis {axis}, found {list(s)}",
            )
        return [first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1 :]]

    def setup(self) -> None:
        activation = self.options.get("fused_activation_function", "NONE")
        if activation != "NONE":
            raise ValueError(f"expected no fused activation (as LiteRT), found {activation}")
        out = self.outputs[0]
        # (scale, bias) per input that needs requantizing, None where a plain copy is exact.
        # TFLite only rescales uint8; it rejects int8 inputs whose quantization differs from
        # the output's. We rescale int8 the same way rather than refuse the model.
        self.rescale: list[tuple[np.float32, np.float32] | None] = [None] * len(self.inputs)
        if out.dtype in (np.uint8, np.int8) and out.quantization is not None:
            out_scale = scale_zero_point(out)[0]
            inverse = np.float32(1.0) / out_scale
            for i, t in enumerate(self.inputs):
                if t is None or t.quantization is None:
                    continue
                scale = scale_zero_point(t)[0]
                if scale == out_scale and zero_point(t) == zero_point(out):
                    continue
                s = scale * inverse
                self.rescale[i] = (s, np.float32(-zero_point(t)) * s)
        self.out_zero_point = zero_point(out)

    def _run(self, *xs: np.ndarray) -> np.ndarray:
        dtype = self.outputs[0].dtype
        xs = tuple(x if r is None else self._requantize(x, *r) for x, r in zip(xs, self.rescale))
        axis = normalize_axis(int(self.options.get("axis", 0)), xs[0].ndim)
        return np.concatenate(xs, axis=axis).astype(dtype, copy=False)

    def _requantize(self, x: np.ndarray, scale: np.float32, bias: np.float32) -> np.ndarray:
        # TFLite does this in float32: round(q * scale + bias) + output zero point, clamped.
        dtype = self.outputs[0].dtype
        lo, hi = dtype_range(dtype)
        value = tflite_round(x.astype(np.float32) * scale + bias) + self.out_zero_point
        return np.clip(value, lo, hi).astype(dtype)
