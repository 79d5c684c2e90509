"""RANGE: ``start, start + delta, ...`` up to (not including) ``limit``. Float values are
accumulated one addition at a time, like TFLite, rather than computed as start + i * delta."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts


def range_length(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> int:
    """How many values RANGE yields, computed in the inputs' type as TFLite does (its output
    takes that type). A delta of 0, one pointing away from the limit, or a count that is not
    finite (a NaN bound, an overflowing float span) is an error."""
    dtype = np.asarray(start).dtype
    s, lim, d = (np.asarray(v, dtype).reshape(-1)[0] for v in (start, limit, delta))
    check_shape(
        d != 0 and not (s < lim and d < 0) and not (s > lim and d > 0),
        f"expected a delta that reaches limit {lim} from start {s}, found {d}",
    )
    if np.issubdtype(dtype, np.integer):
        return (abs(int(lim) - int(s)) + abs(int(d)) - 1) // abs(int(d))
    with np.errstate(over="ignore", invalid="ignore"):
        span = abs((lim - s) / d)
    check_shape(
        bool(np.isfinite(span)),
        f"expected a finite number of values from start {s} to limit {lim} by {d}, found {span}",
    )
    return math.ceil(span)


@register
class Range(OpKernel):
    op = "RANGE"
    max_version = 2
    types = accepts("FLOAT32 INT32 INT64", data=(0, 1, 2))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        for i, what in enumerate(("start", "limit", "delta")):
            found = ctx.shape(i)
            check_shape(found == (), f"expected a scalar {what}, found shape {list(found)}")
        start, limit, delta = (ctx.constant(i) for i in range(3))
        if start is None or limit is None or delta is None:
            return [None]
        return [(range_length(start, limit, delta),)]

    def _run(self, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
        count = range_length(start, limit, delta)
        dtype = self.outputs[0].dtype
        s, d = (np.asarray(v, dtype).reshape(-1)[0] for v in (start, delta))
        if np.issubdtype(dtype, np.integer):
            return (int(s) + int(d) * np.arange(count, dtype=np.int64)).astype(dtype)
        steps = np.full(count, d, dtype=dtype)
        if count:
            steps[0] = s
        # np.add.accumulate is sequential, so it repeats TFLite's running float32 sum.
        return np.add.accumulate(steps, dtype=dtype)
