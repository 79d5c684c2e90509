"""BATCH_MATMUL: lhs @ rhs over broadcast batch dimensions, adj_x / adj_y transposing the
last two; float, hybrid (float lhs, int8 rhs), int8 (to int8 or int32) and int16."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._conv import (
    Rounding,
    filter_scales,
    finish_quantized,
    kind_of,
    output_multipliers,
    quantize_rows,
    scale_zp,
    weight_value,
)
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


def matmul_shape(lhs: Shape, rhs: Shape, adj_x: bool, adj_y: bool) -> Shape:
    """LiteRT's BATCH_MATMUL output: broadcast batch dims, then lhs rows by rhs columns."""
    check_shape(
        2 <= len(lhs) <= 5 and 2 <= len(rhs) <= 5,
        f"expected lhs and rhs of rank 2 to 5, found {list(lhs)} and {list(rhs)}",
    )
    rows, k_lhs = (lhs[-1], lhs[-2]) if adj_x else (lhs[-2], lhs[-1])
    k_rhs, cols = (rhs[-1], rhs[-2]) if adj_y else (rhs[-2], rhs[-1])
    check_shape(
        k_lhs == k_rhs,
        f"expected lhs and rhs to agree on the accumulation depth, found {k_lhs} and {k_rhs} "
        f"(adj_x={adj_x}, adj_y={adj_y})",
    )
    rank = max(len(lhs), len(rhs))
    a = (1,) * (rank - len(lhs)) + lhs[:-2]
    b = (1,) * (rank - len(rhs)) + rhs[:-2]
    check_shape(
        all(x == y or x == 1 or y == 1 for x, y in zip(a, b)),
        f"expected batch dimensions that broadcast, found {list(lhs[:-2])} and {list(rhs[:-2])}",
    )
    return tuple(y if x == 1 else x for x, y in zip(a, b)) + (rows, cols)


@register
class BatchMatMul(OpKernel):
    op = "BATCH_MATMUL"
    max_version = 4
    types = accepts(
        "FLOAT32 FLOAT16", "INT8 INT16", output=one_of("FLOAT32 FLOAT16 INT32", "INT8 INT16")
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        adj_x, adj_y = cls.adjoints(ctx.options)
        return [matmul_shape(ctx.shape(0), ctx.shape(1), adj_x, adj_y)]

    @staticmethod
    def adjoints(options: Mapping[str, Any]) -> tuple[bool, bool]:
        return bool(options.get("adj_x", False)), bool(options.get("adj_y", False))

    def setup(self) -> None:
        opts = self.options
        self.adj_x, self.adj_y = self.adjoints(opts)
        self.asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
        lhs, rhs, out = self.input_tensor(0), self.input_tensor(1), self.outputs[0]
        self.kind = kind_of(lhs, rhs)
        rhs_value = weight_value(self, 1)
        self.rhs = None if rhs_value is None else self._rhs(rhs_value)
        if self.kind == "hybrid":
            cols = rhs.shape[-2] if self.adj_y else rhs.shape[-1]
            self.scales = filter_scales(rhs, cols)
            rhs_quantization = self.required(rhs.quantization, "quantization on input 1")
            self.per_channel = rhs_quantization.scale.size > 1
        elif self.kind == "quantized" and out.dtype != np.int32:
            l_scale, _ = scale_zp(lhs)
            # BATCH_MATMUL's multiplier rounds lhs_scale * rhs_scale to float32 first.
            rhs_quantization = self.required(rhs.quantization, "quantization on input 1")
            self.mult, self.shift = output_multipliers(
                l_scale, rhs_quantization, scale_zp(out)[0], 1, float_product=True
            )
            self.rounding: Rounding = "wide" if lhs.dtype == np.int16 else "double"

    def _rhs(self, rhs: np.ndarray) -> np.ndarray:
        """rhs as (..., K, N): float32, or float64 without its zero point."""
        if self.adj_y:
            rhs = np.swapaxes(rhs, -1, -2)
        if self.kind == "float":
            return np.ascontiguousarray(rhs, np.float32)
        zp = scale_zp(self.inputs[1])[1] if self.kind == "quantized" else 0
        if self.kind == "quantized" and self.outputs[0].dtype == np.int32:
            zp = 0  # the int8 -> int32 kernel ignores zero points
        return np.ascontiguousarray(rhs, np.float64) - zp

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        lhs = self.required(inputs[0], "input 0")
        rhs = self.rhs if self.rhs is not None else self._rhs(self.required(inputs[1], "input 1"))
        if self.adj_x:
            lhs = np.swapaxes(lhs, -1, -2)
        if self.kind == "float":
            return np.matmul(np.asarray(lhs, np.float32), rhs)
        if self.kind == "hybrid":
            return self._run_hybrid(lhs, rhs)
        out = self.outputs[0]
        zp = 0 if out.dtype == np.int32 else scale_zp(self.inputs[0])[1]
        acc = np.rint(np.matmul(lhs.astype(np.float64) - zp, rhs)).astype(np.int64)
        if out.dtype == np.int32:
            return acc.astype(np.int32)
        return finish_quantized(acc, self.mult, self.shift, out, None, self.rounding)

    def _run_hybrid(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(lhs, np.float32).reshape(-1, lhs.shape[-1])
        q, in_scale, offset = quantize_rows(rows, self.asymmetric)
        xq = (q.astype(np.float64) - offset[:, None]).reshape(lhs.shape)
        acc = np.rint(np.matmul(xq, rhs)).astype(np.float32)
        row_scale = in_scale.reshape(*lhs.shape[:-1], 1)
        if self.per_channel:
            scale = (row_scale * self.scales).astype(np.float32)
        else:
            scale = (row_scale * self.scales[0]).astype(np.float32)
        return (scale * acc).astype(np.float32)
