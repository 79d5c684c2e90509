"""Quantized ADD and SUB as LiteRT computes them: the parameters its Prepare forms, its
reference kernels, and int8 ADD the way its optimized kernels run it on x86.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from offload._graph import Quantization, Tensor
from offload._quant_fixed_point import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from offload._quant_params import scale_zero_point


@dataclass(frozen=True)
class AddParams:
    """The fixed-point parameters of a quantized ADD or SUB, as LiteRT's Prepare forms them
    (see :func:`add_params`)."""

    left_shift: int
    input1_zero_point: int
    input1_multiplier: int
    input1_shift: int
    input2_zero_point: int
    input2_multiplier: int
    input2_shift: int
    output_zero_point: int
    output_multiplier: int
    output_shift: int


def add_params(
    input1: Tensor | Quantization,
    input2: Tensor | Quantization,
    output: Tensor | Quantization,
    *,
    left_shift: int = 20,
) -> AddParams:
    """ADD / SUB parameters of LiteRT's quantized kernels.

    Both inputs are brought to a common scale, twice the larger input scale, at
    ``left_shift`` extra bits of precision (20 for int8 and uint8, 15 for int16):

    - input i: ``quantize_multiplier(scale_i / (2 * max(scale_1, scale_2)))``;
    - output: ``quantize_multiplier(2 * max(scale_1, scale_2) / (2**left_shift *
      output_scale))``.

    Scales are the float32 ones of the file, divided in double. Not
    ``quantize_multiplier(scale_in / scale_out)``: that skips the common scale and its 20
    bits, and rounds differently.
    """
    (q1, z1), (q2, z2), (qo, zo) = (scale_zero_point(t) for t in (input1, input2, output))
    s1, s2, so = float(q1), float(q2), float(qo)
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * so))
    return AddParams(left_shift, z1, m1, sh1, z2, m2, sh2, zo, mo, sho)


def add_reference(
    a: np.ndarray,
    b: np.ndarray,
    params: AddParams,
    clamp: tuple[int, int],
    dtype: np.dtype | type,
    *,
    sign: int = 1,
) -> np.ndarray:
    """Quantized ADD (``sign`` 1) or SUB (-1) the way LiteRT's reference kernels compute it,
    with numpy broadcasting: each input less its zero point, shifted left by
    ``params.left_shift``, scaled by its multiplier; the sum (or difference) scaled by the
    output multiplier, plus the output zero point, clamped. Every scaling is
    :func:`multiply_by_quantized_multiplier` (halves away from zero)."""
    p = params
    xa = (np.asarray(a, np.int64) - p.input1_zero_point) << p.left_shift
    xb = (np.asarray(b, np.int64) - p.input2_zero_point) << p.left_shift
    sa = multiply_by_quantized_multiplier(xa, p.input1_multiplier, p.input1_shift)
    sb = multiply_by_quantized_multiplier(xb, p.input2_multiplier, p.input2_shift)
    raw = multiply_by_quantized_multiplier(sa + sign * sb, p.output_multiplier, p.output_shift)
    return np.clip(raw + p.output_zero_point, clamp[0], clamp[1]).astype(dtype)


# Elements AddElementwiseInt8 / AddScalarBroadcast handle per NEON step before their tails.
_ADD_LANES = 16
_ADD_SCALAR_LANES = 8


def _vshl(x: np.ndarray, amount: int) -> np.ndarray:
    """vshlq_s32 by a constant: left for positive amounts, arithmetic right otherwise."""
    return x << amount if amount >= 0 else x >> -amount


def _add_lanes(
    a: np.ndarray, b: np.ndarray, p: AddParams, clamp: tuple[int, int], early_shift: bool
) -> np.ndarray:
    """int8 ADD in NEON lanes: the inputs' exponents applied as part of the left shift, before
    the multiply (AddElementwiseInt8), or as a truncating right shift after it
    (AddScalarBroadcast); the output step is the reference's."""
    xa = np.asarray(a, np.int64) - p.input1_zero_point
    xb = np.asarray(b, np.int64) - p.input2_zero_point
    mul = saturating_rounding_doubling_high_mul
    if early_shift:
        xa = mul(_vshl(xa, p.left_shift + p.input1_shift), p.input1_multiplier)
        xb = mul(_vshl(xb, p.left_shift + p.input2_shift), p.input2_multiplier)
    else:
        xa = _vshl(mul(xa << p.left_shift, p.input1_multiplier), p.input1_shift)
        xb = _vshl(mul(xb << p.left_shift, p.input2_multiplier), p.input2_shift)
    high = mul(xa + xb, p.output_multiplier)
    out = rounding_divide_by_pot(high, -p.output_shift) + p.output_zero_point
    return np.clip(out, clamp[0], clamp[1]).astype(np.int8)


@functools.lru_cache(maxsize=64)
def _add_int8_tables(
    params: AddParams, clamp: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(elementwise lanes, scalar-broadcast lanes, reference) results over all 65536 pairs of
    int8 codes, indexed by ``(a's byte << 8) | b's byte``: an int8 sum depends only on the
    pair, so a run is one gather per element."""
    codes = np.arange(256, dtype=np.uint8).view(np.int8)
    grid_a, grid_b = (g.reshape(-1) for g in np.meshgrid(codes, codes, indexing="ij"))
    tables = (
        _add_lanes(grid_a, grid_b, params, clamp, early_shift=True),
        _add_lanes(grid_a, grid_b, params, clamp, early_shift=False),
        add_reference(grid_a, grid_b, params, clamp, np.int8),
    )
    for table in tables:
        table.flags.writeable = False
    return tables


def add_int8(a: np.ndarray, b: np.ndarray, params: AddParams, clamp: tuple[int, int]) -> np.ndarray:
    """int8 ADD as LiteRT runs it on x86 (its optimized kernels, NEON through NEON_2_SSE),
    with numpy broadcasting of ``a`` and ``b``.

    LiteRT walks a broadcast as contiguous runs of the output (BinaryBroadcastFiveFold). Same
    shapes are one run. In each run AddElementwiseInt8 takes 16 elements at a time (the
    inputs' exponents applied before their multiply), or, where one side is a single broadcast
    value, AddScalarBroadcast 8 at a time (exponents applied after, truncating); the elements
    left over in each run, and broadcasts that no five-fold walk covers, go through the
    reference (:func:`add_reference`). Parameters from :func:`add_params` (left shift 20).
    """
    elementwise, scalar, reference = _add_int8_tables(params, (int(clamp[0]), int(clamp[1])))
    a, b = np.asarray(a), np.asarray(b)
    index = (a.view(np.uint8).astype(np.intp) << 8) | b.view(np.uint8)
    layout = _fivefold_runs(a.shape, b.shape)
    if layout is None or index.size == 0:
        return reference[index]
    run_length, scalar_broadcast = layout
    lanes = _ADD_SCALAR_LANES if scalar_broadcast else _ADD_LANES
    table = scalar if scalar_broadcast else elementwise
    vector = run_length // lanes * lanes
    runs = index.reshape(-1, run_length)
    result = np.empty(runs.shape, np.int8)
    np.take(table, runs[:, :vector], out=result[:, :vector])
    np.take(reference, runs[:, vector:], out=result[:, vector:])
    return result.reshape(index.shape)


def _fivefold_runs(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, bool] | None:
    """How LiteRT's optimized int8 ADD walks a broadcast (ProcessBroadcastShapes, then
    BinaryBroadcastFiveFold): the length of the contiguous output runs each inner call covers
    and whether that call is the scalar-broadcast kernel; None for the generic broadcast, which
    runs the reference. Same shapes are one run over everything."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    if a == b:
        return max(1, int(np.prod(a, dtype=np.int64))), False
    fast = None  # the input whose innermost unequal dimension is 1 is the broadcast one
    for i in range(rank - 1, -1, -1):
        if a[i] != b[i]:
            fast = a if a[i] == 1 else b if b[i] == 1 else None
            break
    if fast is None:
        return None
    other = b if fast is a else a
    y = [1, 1, 1, 1, 1]
    i = rank - 1
    for slot, test in (
        (4, lambda k: fast[k] == other[k]),
        (3, lambda k: fast[k] == 1),
        (2, lambda k: fast[k] == other[k]),
        (1, lambda k: other[k] == 1),
        (0, lambda k: fast[k] == other[k]),
    ):
        while i >= 0 and test(i):
            y[slot] *= other[i] if slot in (4, 3, 0) else fast[i] if slot == 1 else other[i]
            i -= 1
    if i >= 0:
        return None
    if y[4] > 1:
        return y[4], False
    return y[3], True
