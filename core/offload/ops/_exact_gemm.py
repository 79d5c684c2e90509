"""The exact float path of the int8 GEMM kernels (CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV):
integer dot products as float GEMMs, exact while every partial sum stays below 2**24 (float32)
or 2**53 (float64) (:func:`gemm_dtype`, :class:`IntegerGemm`), and the requantization of ruy's
rounding in float64 passes where that is provably exact (:class:`RuyRequantizer`); the
per-thread work arrays they (and :mod:`offload.ops._float_order`) reuse across runs.
"""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = [
    "ROWS_PER_CHUNK_ELEMENTS",
    "IntegerGemm",
    "RuyRequantizer",
    "float32_k_splits",
    "gemm_dtype",
    "scratch",
]

# Integers of magnitude below these are exact in float32 / float64.
_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53

# The integer kernels work through their rows in chunks of about this many elements, so that
# patch rows, GEMM results and requantization temporaries stay in cache and are reused
# rather than allocated (and page-faulted) per run.
ROWS_PER_CHUNK_ELEMENTS = 1 << 18

_local = threading.local()


def scratch(name: str, size: int, dtype: type) -> np.ndarray:
    """A flat per-thread work array of at least ``size`` elements, reused across kernels and
    runs (each kernel finishes with it before the next one runs on the same thread)."""
    store: dict[tuple[str, type], np.ndarray] = _local.__dict__.setdefault("arrays", {})
    buf = store.get((name, dtype))
    if buf is None or buf.size < size:
        buf = store[(name, dtype)] = np.empty(max(size, 1), dtype)
    return buf[:size]


def gemm_dtype(input_dtype: np.dtype | type, weights: np.ndarray) -> type | None:
    """The float type in which (integer input) @ ``weights`` (K, N) is exact whatever order
    BLAS sums in: float32 while |x| * sum_k |w[k, n]| < 2**24 for every column, bounding every
    partial sum; else float64 under 2**53; else None (no exact float GEMM)."""
    info = np.iinfo(input_dtype)
    max_x = max(-int(info.min), int(info.max))
    column_bound = max_x * int(np.abs(weights).sum(axis=0).max(initial=0))
    if column_bound < _F32_EXACT:
        return np.float32
    return np.float64 if column_bound < _F64_EXACT else None


def float32_k_splits(input_dtype: np.dtype | type, weights: np.ndarray) -> list[slice]:
    """Consecutive ranges of the depth K of (integer input) @ ``weights`` (K, N), each as long
    as :func:`gemm_dtype`'s float32 bound allows (one range when the whole GEMM is exact in
    float32; a row over the bound by itself gets a range of its own)."""
    info = np.iinfo(input_dtype)
    max_x = max(-int(info.min), int(info.max))
    magnitude = np.abs(np.asarray(weights, np.float64)) * max_x
    splits, start = [], 0
    running = np.zeros(magnitude.shape[1])
    for k in range(magnitude.shape[0]):
        running += magnitude[k]
        if running.max(initial=0) >= _F32_EXACT and k > start:
            splits.append(slice(start, k))
            start, running = k, magnitude[k].copy()
    splits.append(slice(start, magnitude.shape[0]))
    return splits


class IntegerGemm:
    """An exact GEMM of integer rows with constant integer weights (K, N), held as float:
    float32 over :func:`float32_k_splits` when each range is exact, the ranges' results summed
    in float64 (still exact, at a fraction of a float64 GEMM's cost); float64 throughout
    where that would take more than ``MAX_SPLITS`` ranges."""

    MAX_SPLITS = 4

    def __init__(self, input_dtype: np.dtype | type, weights: np.ndarray) -> None:
        splits = float32_k_splits(input_dtype, weights)
        exact = all(gemm_dtype(input_dtype, weights[k]) == np.float32 for k in splits)
        if len(splits) > self.MAX_SPLITS or not exact:
            splits = [slice(0, weights.shape[0])]
            self.dtype: type = np.float64
        else:
            self.dtype = np.float32
        self.splits = splits
        self.weights = np.ascontiguousarray(weights, self.dtype)
        self.depth, self.width = weights.shape
        # The accumulator's type: float64 as soon as ranges are summed.
        self.acc_dtype: type = np.float64 if len(splits) > 1 else self.dtype

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """rows (M, K) of ``self.dtype`` -> a per-thread work array (M, N) of ``acc_dtype``,
        valid until the next call."""
        count = rows.shape[0]
        acc = scratch("gemm_acc", count * self.width, self.acc_dtype).reshape(count, -1)
        if len(self.splits) == 1:
            return np.matmul(rows, self.weights, out=acc)
        part = scratch("gemm_part", count * self.width, self.dtype).reshape(count, -1)
        for i, k in enumerate(self.splits):
            np.matmul(rows[:, k], self.weights[k], out=part)
            if i == 0:
                np.copyto(acc, part)
            else:
                np.add(acc, part, out=acc)
        return acc


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


class RuyRequantizer:
    """:func:`requantize_ruy` of ``g + offset`` (an exact integer GEMM result ``g`` and a
    per-channel integer ``offset``), plus the output zero point, clamped: in three float64
    passes and one cast instead of about twelve int64 passes, and bit for bit the same.

    Why it is exact. ruy rounds twice, ``h = floor((a*M + 2**30) / 2**31)`` then
    ``floor((h + 2**(r-1)) / 2**r)``; since floor((floor(u) + k) / n) == floor((u + k) / n)
    for integer k and n, that is one floor: ``floor((a*M + R) / 2**S)`` with ``S = 31 + r``
    and ``R = 2**30 + 2**(30 + r)`` (or 2**30 when r is 0; a left shift folds into M). So
    ``y = g * M/2**S + (offset*M + R + (zp + lift) * 2**S) / 2**S`` and ``floor(y) - lift`` is
    the output. Every term is an integer over 2**S: while each integer is below 2**53 the
    float64 products and sums are exact. Setup checks that for every ``g`` whose output lies
    in [lo - 1, hi + 1]; outside that window y may round, but it is monotonic in ``g``, so
    the clamp still lands on lo or hi. ``lift`` (128 for int8) makes y non-negative in the
    clamp window, where the cast's truncation to an unsigned type is the floor; the sign bit
    flipped back gives the signed value.
    """

    def __init__(
        self, scale: np.ndarray, offset: np.ndarray, bounds: tuple[float, float], dtype: np.dtype
    ) -> None:
        self.scale = scale
        self.offset = offset
        self.lo, self.hi = bounds
        self.dtype = dtype
        self.unsigned = np.dtype(f"u{dtype.itemsize}")
        self.sign_bit = 0 if dtype.kind == "u" else 1 << (8 * dtype.itemsize - 1)
        self._tiled: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def store(self, y: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Clamp float64 ``y`` (already scaled and offset) and cast it into ``out``."""
        np.clip(y, self.lo, self.hi, out=y)
        target = out.reshape(y.shape).view(self.unsigned)
        np.copyto(target, y, casting="unsafe")
        if self.sign_bit:
            np.bitwise_xor(target, target.dtype.type(self.sign_bit), out=target)
        return out

    @classmethod
    def build(
        cls,
        multiplier: np.ndarray,
        shift: np.ndarray,
        offset: np.ndarray,
        zero_point: int,
        clamp: tuple[int, int],
        dtype: np.dtype | type,
    ) -> RuyRequantizer | None:
        """The requantizer for per-channel (or broadcast per-tensor) ``multiplier`` and
        ``shift``, per-channel integer ``offset`` added to the GEMM result, the output zero
        point and clamp range; None where some channel's arithmetic would not be exact (the
        caller keeps the int64 path)."""
        dtype = np.dtype(dtype)
        if dtype.kind not in "iu":
            return None
        lift = -int(np.iinfo(dtype).min)
        lo, hi = clamp
        channels = len(offset)
        multiplier = np.broadcast_to(np.asarray(multiplier, np.int64), (channels,))
        shift = np.broadcast_to(np.asarray(shift, np.int64), (channels,))
        scale = np.empty(channels, np.float64)
        base = np.empty(channels, np.float64)
        for c in range(channels):
            m, s, off = int(multiplier[c]), int(shift[c]), int(offset[c])
            if m <= 0:
                return None
            m <<= max(s, 0)
            right = max(-s, 0)
            total = 31 + right
            rounding = (1 << 30) + ((1 << (30 + right)) if right else 0)
            numerator = off * m + rounding + ((zero_point + lift) << total)
            # The accumulators (g + off) whose output is in [lo, hi], widened by one.
            acc_lo = _ceil_div(((lo - zero_point) << total) - rounding, m) - 1
            acc_hi = _ceil_div(((hi - zero_point + 1) << total) - rounding, m)
            g_ends = (acc_lo - off, acc_hi - off)
            if (
                abs(numerator) >= _F64_EXACT
                or max(abs(g) for g in g_ends) * m >= _F64_EXACT
                or max(abs(g * m + numerator) for g in g_ends) >= _F64_EXACT
            ):
                return None
            scale[c] = math.ldexp(m, -total)
            base[c] = math.ldexp(numerator, -total)
        return cls(scale, base, (lo + lift, hi + lift), dtype)

    def _constants(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        """Scale and offset tiled to ``block`` rows: numpy broadcasts a short per-channel
        vector a few values at a time, several times slower than one long contiguous pass."""
        if block not in self._tiled:
            self._tiled[block] = (np.tile(self.scale, block), np.tile(self.offset, block))
        return self._tiled[block]

    def __call__(self, gemm: np.ndarray, out: np.ndarray, block: int = 1) -> np.ndarray:
        """Requantize ``gemm`` (rows, channels; exact integers, float32 or float64) into the
        C-contiguous ``out`` of the same size; ``block`` must divide the rows."""
        rows, channels = gemm.shape
        if rows % block:
            block = 1
        scale, offset = self._constants(block)
        y = scratch("requantize", gemm.size, np.float64).reshape(rows // block, -1)
        if gemm.dtype == np.float64:
            np.multiply(gemm.reshape(y.shape), scale, out=y)
        else:  # widened first: a float32 * float64 multiply casts in small buffers, slower
            np.copyto(y, gemm.reshape(y.shape))
            np.multiply(y, scale, out=y)
        np.add(y, offset, out=y)
        return self.store(y, out)
