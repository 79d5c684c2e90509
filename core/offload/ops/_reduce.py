"""The reduction family (MEAN, SUM, REDUCE_PROD/MAX/MIN/ANY/ALL): axis handling and the
integer requantization paths of TFLite's ``reduce.cc``.

Every reducer takes ``(input, axis)``; axes may be negative or repeated and are resolved the way
TFLite does (``axis + rank`` for negatives, duplicates dropped). ``keep_dims`` keeps the reduced
axes as size 1. The output shape is computed from the run-time input shape, not the stored
output shape, because converters often store a placeholder there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._quant import dtype_range, multiply_by_quantized_multiplier, quantize_multiplier

__all__ = [
    "ReduceKernel",
    "float_extreme",
    "reduced_shape",
    "resolve_axes",
    "multiply_by_quantized_multiplier_int64",
    "mean_multiplier_for_count",
    "sequential",
    "reduces_trailing",
]

_QUANTIZED = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def resolve_axes(axis: np.ndarray, ndim: int) -> tuple[int, ...]:
    """TFLite's ResolveAxis: negatives wrapped, duplicates dropped, first-seen order kept."""
    if ndim == 0:
        return ()
    out: list[int] = []
    for a in np.asarray(axis).reshape(-1).tolist():
        a = int(a) + ndim if int(a) < 0 else int(a)
        if not 0 <= a < ndim:
            raise ValueError(f"expected reduction axes in [-{ndim}, {ndim}), found {int(a)}")
        if a not in out:
            out.append(a)
    return tuple(out)


def multiply_by_quantized_multiplier_int64(
    x: np.ndarray, multiplier: int, shift: int
) -> np.ndarray:
    """TFLite's int64-input MultiplyByQuantizedMultiplier: a 16-bit multiplier, single rounding.

    Used by quantized REDUCE_PROD, whose running products do not fit the int32 version.
    """
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    total_shift = 15 - shift
    result = (np.asarray(x, np.int64) * reduced + (np.int64(1) << (total_shift - 1))) >> total_shift
    # The C++ narrows the int64 result to int32 without saturation.
    return result.astype(np.int32).astype(np.int64)


def mean_multiplier_for_count(multiplier: int, shift: int, count: int) -> tuple[int, int]:
    """Fold 1/count into a quantized multiplier, keeping as many bits as TFLite keeps."""
    extra = min(count.bit_length() - 1, 32, 31 + shift)
    return (multiplier << extra) // count, shift - extra


def float_extreme(x: np.ndarray, axes: tuple[int, ...], minimum: bool) -> np.ndarray:
    """LiteRT's optimized float REDUCE_MIN (``minimum``) or REDUCE_MAX, reduced axes kept.

    Its kernel folds each output's elements in memory order with ``acc = (acc < x) ? acc : x``
    (``>`` for the maximum) from the first element, not from a neutral value. A NaN compares
    false either way, so a NaN element replaces the running value and the next element
    replaces the NaN: the answer is the extreme of the elements after the last NaN, NaN where
    a NaN comes last; and of equal values (0.0 and -0.0) the last one wins.
    """
    rest = [a for a in range(x.ndim) if a not in axes]
    # Reduced axes last, in ascending order: each row is then one output's elements in the
    # order the kernel reads them.
    n = math.prod(x.shape[a] for a in axes)
    rows = np.transpose(x, rest + sorted(axes)).reshape(-1, n)
    nan = np.isnan(rows)
    last_nan = np.where(nan.any(axis=1), n - 1 - np.argmax(nan[:, ::-1], axis=1), -1)
    live = np.arange(n) > last_nan[:, None]
    fill = np.inf if minimum else -np.inf
    masked = np.where(live, rows, rows.dtype.type(fill))
    best = masked.min(axis=1) if minimum else masked.max(axis=1)
    hit = live & (rows == best[:, None])
    pick = n - 1 - np.argmax(hit[:, ::-1], axis=1)
    # A row that ends in NaN has nothing live and keeps that NaN.
    pick[last_nan == n - 1] = n - 1
    result = rows[np.arange(rows.shape[0]), pick]
    return result.reshape(reduced_shape(x.shape, axes, True))


def reduced_shape(shape: Sequence[int], axes: tuple[int, ...], keep_dims: bool) -> Shape:
    """The shape after reducing ``axes``: kept as size 1, or dropped."""
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


# Outputs per reduced position from which a Python loop over the rows beats accumulate.
_WIDE_ROWS = 256


def sequential(ufunc: np.ufunc, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``ufunc`` over ``axes`` (kept as size 1) in the order LiteRT's reduce loops take the
    elements: each output's reduced elements one after another, in input memory order, each
    step rounded to ``x``'s type. numpy's own reductions add pairwise along a contiguous axis,
    which rounds differently in floating point."""
    kept = [a for a in range(x.ndim) if a not in axes]
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if count == 0:  # nothing to reduce: the operation's identity (0 for a sum)
        return np.full(reduced_shape(x.shape, axes, True), ufunc.identity, x.dtype)
    # Reduced axes first: one row per reduced position, every output a column.
    rows = np.transpose(x, sorted(axes) + kept).reshape(count, -1)
    if rows.shape[1] >= _WIDE_ROWS:
        # Row by row in place: numpy's accumulate along axis 0 is slow on wide rows (0.7 ms
        # against 0.09 ms for InceptionV3's 64 x 2048 global mean), with the same roundings.
        result = rows[0].copy()
        for row in rows[1:]:
            ufunc(result, row, out=result)
    else:
        result = ufunc.accumulate(rows, axis=0, dtype=x.dtype)[-1]
    return result.reshape(reduced_shape(x.shape, axes, True))


def reduces_trailing(shape: Sequence[int], axes: tuple[int, ...]) -> bool:
    """Whether, once size-1 dimensions are dropped and neighbours of the same kind merged, the
    shape is (kept, reduced): the layout LiteRT's float MEAN sends to Eigen's column sums."""
    kinds: list[bool] = []
    for i, size in enumerate(shape):
        if size != 1 and (not kinds or kinds[-1] != (i in axes)):
            kinds.append(i in axes)
    return kinds == [False, True]


class ReduceKernel(OpKernel):
    """Shared ``setup``/``run`` of the reducers: subclasses implement :meth:`reduce`.

    ``reduce(x, axes)`` returns the reduction with the reduced axes kept (size 1); the base class
    then drops them unless ``keep_dims``. ``axes`` is never empty when ``reduce`` is called.
    """

    max_version: ClassVar[int] = 1
    # Value of an output element whose reduction covers no input element.
    empty_fill: ClassVar[str] = "zero"

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shape = ctx.shape(0)
        axis = ctx.constant(1)
        if axis is None:
            return [None]
        return [reduced_shape(shape, resolve_axes(axis, len(shape)), cls.keeps_dims(ctx.options))]

    @staticmethod
    def keeps_dims(options: Any) -> bool:
        return bool(options.get("keep_dims", False))

    def setup(self) -> None:
        self.keep_dims = self.keeps_dims(self.options)
        axis = self.constant(1)
        self.axes = None if axis is None else resolve_axes(axis, len(self.input_tensor(0).shape))
        self.out_dtype = self.outputs[0].dtype
        self.setup_reducer()

    def setup_reducer(self) -> None:
        """Per-op preparation (quantization multipliers); optional."""

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} needs reduce()")

    def empty_value(self) -> object:
        """The neutral element written when the reduced input is empty."""
        return 0

    def _run(self, x: np.ndarray, axis: np.ndarray | None = None) -> np.ndarray:
        axes = (
            self.axes
            if self.axes is not None
            else resolve_axes(self.required(axis, "input 1 (the axes)"), x.ndim)
        )
        kept = reduced_shape(x.shape, axes, True)
        out_shape = reduced_shape(x.shape, axes, self.keep_dims)
        if not axes:
            result = self.reduce_none(x)
        elif x.size == 0:
            result = np.full(kept, self.empty_value(), self.out_dtype)
        else:
            result = self.reduce(x, axes)
        return np.asarray(result).astype(self.out_dtype, copy=False).reshape(out_shape)

    def reduce_none(self, x: np.ndarray) -> np.ndarray:
        """No axis to reduce: TFLite copies the input."""
        return x.copy()

    # Helpers for subclasses.
    def is_quantized(self) -> bool:
        x = self.input_tensor(0)
        return x.dtype in _QUANTIZED and x.quantization is not None

    def clamp(self, values: np.ndarray) -> np.ndarray:
        lo, hi = dtype_range(self.out_dtype)
        return np.clip(values, lo, hi)

    @staticmethod
    def reduced_count(x: np.ndarray, axes: tuple[int, ...]) -> int:
        return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))

    @staticmethod
    def requantize_sum(
        sums: np.ndarray, multiplier: int, shift: int, out_zero_point: int
    ) -> np.ndarray:
        return multiply_by_quantized_multiplier(sums, multiplier, shift) + out_zero_point

    @staticmethod
    def quantize_multiplier(real: float) -> tuple[int, int]:
        return quantize_multiplier(real)
