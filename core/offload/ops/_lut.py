"""Lookup tables for quantized unary ops: build once in ``setup``, index on every ``run``.

An int8/uint8 (or int16) input has so few distinct values that any per-element function of
it, however intricate its fixed-point arithmetic, is cheapest evaluated once for every
possible input and then looked up. Two builders:

* :func:`lut_from_float` follows TFLite's ``LUTPopulate`` for 8-bit types (dequantize, apply a
  float32 function, requantize with round-half-away), the table LiteRT itself uses for
  LOGISTIC, TANH, ELU, GELU and LOG.
* :func:`lut_from_int` evaluates an exact integer algorithm over the whole input domain, so
  kernels whose TFLite version is fixed-point (ReLU family, HARD_SWISH, LEAKY_RELU, ABS) stay
  bit-exact while running as a single gather.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from offload._graph import Quantization
from offload.ops._quant import dtype_range, tflite_round
from offload.quant import scale_zero_point

__all__ = [
    "lut_from_float",
    "lut_from_int",
    "Lut",
    "int16_lut_populate",
    "int16_lut_lookup",
]

_UNSIGNED = {1: np.uint8, 2: np.uint16}


def _domain(dtype: np.dtype) -> np.ndarray:
    lo, hi = dtype_range(dtype)
    return np.arange(lo, hi + 1, dtype=np.int64)


def lut_from_float(
    fn: Callable[[np.ndarray], np.ndarray],
    in_q: Quantization,
    out_q: Quantization,
    dtype: np.dtype,
) -> np.ndarray:
    """Table of ``quantize(fn(dequantize(v)))`` for every value ``v`` of an 8-bit ``dtype``.

    Arithmetic is float32 throughout, as in LUTPopulateInt8, so table entries sitting exactly
    on a rounding boundary land where LiteRT's do.
    """
    dtype = np.dtype(dtype)
    lo, hi = dtype_range(dtype)
    in_scale, in_zp = scale_zero_point(in_q)
    out_scale, out_zp = scale_zero_point(out_q)
    values = _domain(dtype)
    dequantized = in_scale * (values - in_zp).astype(np.float32)
    with np.errstate(all="ignore"):
        transformed = np.asarray(fn(dequantized), np.float32)
        rescaled = tflite_round(transformed * (np.float32(1.0) / out_scale))
    quantized = np.clip(np.nan_to_num(rescaled + out_zp, nan=0.0), lo, hi)
    return quantized.astype(dtype)


def lut_from_int(fn: Callable[[np.ndarray], np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Table of the integer function ``fn`` (int64 in, int64 out) over all values of ``dtype``,
    clamped to ``dtype``'s range."""
    dtype = np.dtype(dtype)
    lo, hi = dtype_range(dtype)
    return np.clip(fn(_domain(dtype)), lo, hi).astype(dtype)


class Lut:
    """A table from :func:`lut_from_float` / :func:`lut_from_int`, ready to apply.

    Signed input is viewed as unsigned so the lookup is one gather with no arithmetic; the
    table is rotated once here to match.
    """

    def __init__(self, table: np.ndarray) -> None:
        lo, _ = dtype_range(table.dtype)
        self.in_dtype = table.dtype
        self.table = np.roll(table, lo)
        self._view = _UNSIGNED[table.dtype.itemsize]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype != self.in_dtype:
            raise TypeError(f"lookup table built for {self.in_dtype}, input is {x.dtype}")
        # np.asarray: indexing with a 0-d array gives a numpy scalar, and a rank-0 tensor
        # must come back as an array for the executor.
        return np.asarray(self.table[x.view(self._view)])


def int16_lut_populate(
    fn: Callable[[np.ndarray], np.ndarray],
    in_scale: float,
    in_zp: int,
    out_scale: float,
    out_zp: int,
    float_type: type = np.float32,
) -> np.ndarray:
    """TFLite's 513-entry int16 table: 512 segments over the input range, each entry biased so
    linear interpolation is right at the segment midpoint, plus one end entry."""
    f = float_type
    in_min = f(in_scale) * f(-32768 - in_zp)
    in_max = f(in_scale) * f(32767 - in_zp)
    out_min = f(out_scale) * f(-32768 - out_zp)
    out_max = f(out_scale) * f(32767 - out_zp)
    steps = 512
    step = (in_max - in_min) / f(steps)
    half = step / f(2)
    inv = f(65536) / (out_max - out_min)
    i: np.ndarray = np.arange(steps).astype(f)
    val: np.ndarray
    mid: np.ndarray
    nxt: np.ndarray
    sample: np.ndarray
    interp: np.ndarray
    mid_val: np.ndarray
    bias: np.ndarray
    with np.errstate(all="ignore"):
        val = np.asarray(fn(in_min + i * step), f)
        mid = np.asarray(fn(in_min + i * step + half), f)
        nxt = np.asarray(fn(in_min + (i + f(1)) * step), f)
        sample = tflite_round(val * inv).astype(f)
        interp = tflite_round((nxt * inv + tflite_round(val * inv).astype(f)) / f(2)).astype(f)
        mid_val = tflite_round(mid * inv).astype(f)
        bias = tflite_round((interp - mid_val) / f(2)).astype(f)
        table = np.empty(steps + 1, np.int16)
        table[:steps] = np.clip(sample - bias, -32768, 32767)
        last = tflite_round(np.asarray(fn(np.asarray([in_max], f)), f) * inv)
        table[steps] = np.clip(last[0], -32768, 32767)
    return table


def int16_lut_lookup(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Interpolated lookup in a 513-entry table: top 9 bits pick the segment, low 7 bits the
    position in it (TFLite's LUTLookup for int16)."""
    x = np.asarray(x, np.int32)
    index = 256 + (x >> 7)
    offset = x & 0x7F
    base = table[index].astype(np.int32)
    slope = table[index + 1].astype(np.int32) - base
    # np.asarray: a 0-d x gives numpy scalars all the way through (see Lut.__call__).
    return np.asarray((base + ((slope * offset + 64) >> 7)).astype(np.int16))
