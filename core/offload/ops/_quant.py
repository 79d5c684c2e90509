"""The CPU reference's private integer arithmetic: per-row input quantization of the hybrid
kernels, LiteRT's inverse square root multiplier, and gemmlowp's int16 fixed-point logistic and
tanh. The shared rules (parameters, quantize / dequantize, multipliers) live in the public
:mod:`offload.quant` and are re-exported here for the op modules.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from offload._graph import Tensor
from offload.quant import (
    activation_range_quantized,
    dequantize,
    dtype_range,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_lanes,
    quantize,
    quantize_multiplier,
    quantize_multipliers,
    requantize,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    scale_zero_point,
    tflite_round,
)

__all__ = [
    "quantize_multiplier",
    "quantize_multipliers",
    "multiply_by_quantized_multiplier",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "tflite_round",
    "quantize",
    "dequantize",
    "dtype_range",
    "activation_range_quantized",
    "requantize",
    "scale_zp",
    "quantize_rows",
    "multiply_by_quantized_multiplier_lanes",
    "round_half_away_f32",
    "round_half_away_neon",
    "inv_sqrt_quantized_multiplier",
    "fixed_point_logistic_int16",
    "fixed_point_tanh_int16",
]

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


def scale_zp(tensor: Tensor | None) -> tuple[float, int]:
    """:func:`offload.quant.scale_zero_point` with the scale widened to a Python float (its
    value unchanged): for kernels that, like TFLite's, derive their multipliers in double."""
    scale, zero_point = scale_zero_point(tensor)
    return float(scale), zero_point


def round_half_away_f32(y: np.ndarray) -> np.ndarray:
    """std::round of float32 values (halves away from zero), computed exactly: in float64, since
    ``floor(|y| + 0.5)`` in float32 would itself round (0.49999997 + 0.5 is 1.0 in float32)."""
    return tflite_round(np.asarray(y, np.float64))


def round_half_away_neon(y: np.ndarray) -> np.ndarray:
    """RoundToNearest of LiteRT's NEON tensor utilities as built for x86, where there is no
    vcvta: add +-0.5 in float32, then truncate. The float32 addition rounds first, so unlike
    std::round this sends 0.49999997 to 1; LiteRT's hybrid kernels quantize their inputs so."""
    y = np.asarray(y, np.float32)
    return np.trunc(y + np.copysign(np.float32(0.5), y))


# Elements per block of the blocked quantization: its two float32 work arrays and the input
# block they read (768 KiB) stay in L2, so each row costs one pass through memory for the
# min / max and one for the codes, not a pass (and a fresh array) per elementwise step.
_QUANTIZE_BLOCK = 65536
_local = threading.local()
_SIGN_BIT = np.int32(-(2**31))
_HALF_BITS = np.float32(0.5).view(np.int32)


def _block_buffers(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two float32 work arrays and an int16 one of ``size`` elements, reused across calls on
    this thread."""
    store = _local.__dict__.get("quantize_blocks")
    if store is None or store[0].size < size:
        store = _local.quantize_blocks = (
            np.empty(size, np.float32),
            np.empty(size, np.float32),
            np.empty(size, np.int16),
        )
    return store[0][:size], store[1][:size], store[2][:size]


def _quantize_block(
    x: np.ndarray, inv: np.ndarray, offset: np.ndarray | None, low: int, out: np.ndarray
) -> None:
    """Codes of a (rows, columns) block whose values all go through LiteRT's NEON lanes:
    ``x * inv`` rounded by adding +-0.5 in float32 and truncating, plus the row's offset
    (int16, one per row), clamped to [low, 127], written to the int8 ``out``."""
    y, half, wide = (buf.reshape(x.shape) for buf in _block_buffers(x.size))
    np.multiply(x, inv, out=y)
    # copysign(0.5, y) as bits (y's sign bit over 0.5's): np.copysign itself is not
    # vectorised and costs five times the other steps together.
    half_bits = half.view(np.int32)
    np.bitwise_and(y.view(np.int32), _SIGN_BIT, out=half_bits)
    half_bits |= _HALF_BITS
    y += half
    if offset is None:
        # Clamping before the truncating cast is the same as clamping after it: the bounds are
        # integers, and every value between two integers truncates toward the inner one.
        np.clip(y, np.float32(low), np.float32(127), out=y)
        np.copyto(out, y, casting="unsafe")  # float -> int8 truncates toward zero
        return
    # The offset is added to the rounded integer: truncate into int16 (|y| is at most 255 and
    # a rounding), where adding and clamping cost less than in float32.
    np.copyto(wide, y, casting="unsafe")
    wide += offset
    np.clip(wide, np.int16(low), np.int16(127), out=wide)
    np.copyto(out, wide, casting="unsafe")


def _quantize_codes(
    x: np.ndarray, inv: np.ndarray, offset: np.ndarray | None, low: int
) -> np.ndarray:
    """int8 codes of a (rows, n) float32 array as LiteRT's NEON quantizers compute them: the
    first n // 8 * 8 values of each row in vector lanes (:func:`round_half_away_neon`), the rest
    one by one with std::round; then the row's offset, clamped to [low, 127]. Worked through in
    cache-sized blocks: whole rows at a time when they are short, else a row in pieces."""
    rows, n = x.shape
    codes = np.empty((rows, n), np.int8)
    vector = n // 8 * 8
    inv_col = inv[:, None]
    offset_col = None if offset is None else offset.astype(np.int16)[:, None]
    if vector:
        row_step = max(1, _QUANTIZE_BLOCK // vector)
        column_step = min(vector, _QUANTIZE_BLOCK)
        for r in range(0, rows, row_step):
            rs = slice(r, r + row_step)
            row_offset = None if offset_col is None else offset_col[rs]
            for c in range(0, vector, column_step):
                cs = slice(c, min(c + column_step, vector))
                _quantize_block(x[rs, cs], inv_col[rs], row_offset, low, codes[rs, cs])
    if vector < n:
        # The scalar leftovers round with std::round: halves away from zero, exactly.
        tail = round_half_away_f32(x[:, vector:] * inv_col)
        if offset is not None:
            tail += offset[:, None]
        codes[:, vector:] = np.clip(tail, low, 127)
    return codes


def quantize_rows(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TFLite's BatchQuantizeFloats on a (rows, n) float32 array: each row to int8 with its own
    scale, symmetric in [-127, 127] or asymmetric in [-128, 127] with a zero point.

    Bit for bit what LiteRT runs on x86: its NEON tensor utilities (NeonSymmetricQuantizeFloats,
    NeonAsymmetricQuantizeFloats) through NEON_2_SSE, with their float32 arithmetic and their
    two roundings (see :func:`_quantize_codes`).

    Returns (int8 codes, float32 scale per row, int32 offset per row).
    """
    x = np.asarray(x, np.float32)
    rows = x.shape[0]
    bounds = None
    if rows <= _SCALAR_PARAMETER_ROWS and x.shape[1]:
        bounds = [(float(row.min()), float(row.max())) for row in x]
        # Infinities, NaN and ranges past float32 take the array path and its warnings.
        if not all(-_FLOAT32_MAX <= lo <= hi <= _FLOAT32_MAX + lo for lo, hi in bounds):
            bounds = None
    if bounds is not None:
        # A batch of one or a few rows: the row parameters as Python numbers cost a tenth
        # of the same arithmetic on one-element arrays.
        params = [_row_parameters(lo, hi, asymmetric) for lo, hi in bounds]
        scale = np.array([p[0] for p in params], np.float32)
        inv = np.array([p[1] for p in params], np.float32)
        offset = np.array([p[2] for p in params], np.int32)
        zero = np.array([p[3] for p in params])
    else:
        scale, inv, offset, zero = _row_parameter_arrays(x, asymmetric)
    q = _quantize_codes(x, inv, offset if asymmetric else None, -128 if asymmetric else -127)
    if zero.any():
        q[zero] = 0
    return q, scale, offset


# Up to this many rows quantize_rows derives each row's scale and offset in Python numbers.
_SCALAR_PARAMETER_ROWS = 8
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _f32(value: float) -> float:
    """``value`` rounded to float32, as a Python float. A float32 sum, difference, product or
    quotient equals the float64 one rounded to float32 (53 >= 2 * 24 + 2 bits), so float32
    arithmetic on Python floats is the float64 operation followed by this."""
    return float(np.float32(value))


def _row_parameters(lo: float, hi: float, asymmetric: bool) -> tuple[float, float, int, bool]:
    """(scale, inverse scale, offset, whether the row is all zeros) of one row from its
    float32 min and max; a zero row's codes are set to zero after. The same arithmetic as
    :func:`_row_parameter_arrays`, one row at a time."""
    if not asymmetric:
        rng = max(abs(lo), abs(hi))
        if rng == 0:
            return 1.0, 0.0, 0, True
        return _f32(rng / 127.0), _f32(127.0 / rng), 0, False
    rmin, rmax = min(lo, 0.0), max(hi, 0.0)
    if rmin == rmax:
        return 1.0, 0.0, 0, True
    scale64 = _f32(rmax - rmin) / 255.0
    zp_from_min = -128.0 - rmin / scale64
    zp_from_max = 127.0 - rmax / scale64
    err_min = 128.0 + abs(rmin / scale64)
    err_max = 127.0 + abs(rmax / scale64)
    zp = zp_from_min if err_min < err_max else zp_from_max
    if zp <= -128:
        offset = -128
    elif zp >= 127:
        offset = 127
    else:
        offset = int(math.copysign(math.floor(abs(zp) + 0.5), zp))  # std::round
    scale = _f32(scale64)
    return scale, _f32(1.0 / scale), offset, False


def _row_parameter_arrays(
    x: np.ndarray, asymmetric: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(scale, inverse scale, offset, all-zero mask) per row of ``x``, as arrays."""
    rows = x.shape[0]
    lo = x.min(axis=1) if x.shape[1] else np.zeros(rows, np.float32)
    hi = x.max(axis=1) if x.shape[1] else np.zeros(rows, np.float32)
    if not asymmetric:
        rng = np.maximum(np.abs(lo), np.abs(hi))
        zero = rng == 0
        safe = np.where(zero, np.float32(1), rng)
        scale = np.where(zero, np.float32(1), safe / np.float32(127)).astype(np.float32)
        inv = (np.float32(127) / safe).astype(np.float32)
        inv[zero] = 0
        return scale, inv, np.zeros(rows, np.int32), zero
    # NeonMinMax widens the range to hold zero; the range is a float32 difference, the scale
    # and zero point are then derived in double.
    rmin = np.minimum(lo, np.float32(0))
    rmax = np.maximum(hi, np.float32(0))
    zero = rmin == rmax
    scale64 = np.where(zero, 1.0, (rmax - rmin).astype(np.float64) / 255.0)
    rmin64, rmax64 = rmin.astype(np.float64), rmax.astype(np.float64)
    zp_from_min = -128.0 - rmin64 / scale64
    zp_from_max = 127.0 - rmax64 / scale64
    err_min = 128.0 + np.abs(rmin64 / scale64)
    err_max = 127.0 + np.abs(rmax64 / scale64)
    zp = np.where(err_min < err_max, zp_from_min, zp_from_max)
    offset = np.where(zp <= -128, -128, np.where(zp >= 127, 127, tflite_round(zp)))
    offset = np.where(zero, 0, offset).astype(np.int32)
    scale = scale64.astype(np.float32)
    inv = (1.0 / scale.astype(np.float64)).astype(np.float32)
    inv[zero] = 0
    return scale, inv, offset, zero


def _wrap32(x: int) -> int:
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def _saturating_shift_left32(x: int, exponent: int) -> int:
    """gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent, on an int32."""
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return _INT32_MAX
    if x < -threshold:
        return _INT32_MIN
    return x << exponent


def inv_sqrt_quantized_multiplier(value: int, reverse_shift: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp: ``1/sqrt(value)`` as (Q0.31 multiplier,
    shift), by five Newton-Raphson steps in gemmlowp's int32 Q3.28 fixed point."""

    def mul(a: int, b: int) -> int:
        return int(saturating_rounding_doubling_high_mul(a, b))

    if value <= 1:
        return _INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = (32 - value.bit_length() - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    half_input = int(rounding_divide_by_pot(value >> 1, 1))
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # 1.0 in Q3.28
    for _ in range(5):
        x3 = _saturating_shift_left32(mul(mul(x, x), x), 6)
        x = _saturating_shift_left32(_wrap32(mul(half_three, x) - mul(half_input, x3)), 3)
    x = mul(x, 1518500250)  # sqrt(2)/2 in Q0.31
    if shift < 0:
        x = _wrap32(x << -shift)
        shift = 0
    return x, shift * reverse_shift


# gemmlowp's fixed-point transcendental functions on int16 raw values (held in int64 arrays).
# Qm.n values with m integer bits; plain adds and negations wrap like C++ int16 casts, the
# doubling high multiply and rescales saturate, exactly as gemmlowp's scalar int16 code.

_INT16_ONE = 32767  # 1.0 in Q0.15 (gemmlowp's One() for zero integer bits)


def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + 32768) & 0xFFFF) - 32768


def _mul16(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int16 values."""
    ab = a * b
    total = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(total >= 0, total >> 15, -((-total) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, _wrap16(high))


def _rescale16(x: np.ndarray, src_bits: int, dst_bits: int) -> np.ndarray:
    """gemmlowp's Rescale: change integer bits, saturating up or rounding down."""
    exponent = src_bits - dst_bits
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    if exponent == 0:
        return x
    threshold = (1 << (15 - exponent)) - 1
    shifted = np.clip(x << exponent, -32768, 32767)
    return np.where(x > threshold, 32767, np.where(x < -threshold, -32768, shifted))


def _const16(raw32: int) -> int:
    """A gemmlowp constant given in 32-bit raw form, rounded to 16 bits."""
    return int(rounding_divide_by_pot(raw32, 16))


def _exp_quarter16(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.15 in and out (Taylor series around -1/8)."""
    constant = _const16(1895147668)
    one_third = _const16(715827883)
    x = _wrap16(a + (1 << 12))
    x2 = _mul16(x, x)
    x3 = _mul16(x2, x)
    x4 = _mul16(x2, x2)
    tail = _wrap16(_mul16(_wrap16(rounding_divide_by_pot(x4, 2) + x3), one_third) + x2)
    tail = rounding_divide_by_pot(tail, 1)
    return np.clip(constant + _mul16(constant, _wrap16(x + tail)), -32768, 32767)


_EXP_BARREL = (
    (-2, 1672461947),
    (-1, 1302514674),
    (0, 790015084),
    (1, 290630308),
    (2, 39332535),
    (3, 720401),
    (4, 242),
)


def _exp_negative16(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """exp(a) for a <= 0 in Q{integer_bits}, result in Q0.15."""
    fractional = 15 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod = _wrap16((a & (quarter - 1)) - quarter)
    result = _exp_quarter16(_rescale16(a_mod, integer_bits, 0))
    remainder = _wrap16(a_mod - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = (remainder & (1 << (fractional + exponent))) != 0
            result = np.where(bit, _mul16(result, _const16(multiplier)), result)
    if integer_bits > 5:
        clamp = _const16(-(1 << (36 - integer_bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, _INT16_ONE, result)


def _newton_reciprocal16(a: np.ndarray) -> np.ndarray:
    """Newton-Raphson estimate of 1 / ((1 + a) / 2) for a in (0, 1): Q2.13 out."""
    total = a + _INT16_ONE
    total = total + np.where(total >= 0, 1, -1)  # RoundingHalfSum: (a + 1 + sign) / 2, truncated
    half_denominator = _wrap16(np.where(total >= 0, total // 2, -((-total) // 2)))
    one = 1 << 13  # 1.0 in Q2.13
    x = _wrap16(_const16(1515870810) + _mul16(half_denominator, _const16(-1010580540)))
    for _ in range(3):
        error = _wrap16(one - _mul16(half_denominator, x))
        x = _wrap16(x + _rescale16(_mul16(x, error), 4, 2))
    return x


@functools.cache
def _logistic_table(integer_bits: int) -> np.ndarray:
    a = np.arange(-32768, 32768, dtype=np.int64)
    positive = a > 0
    magnitude = np.where(positive, a, _wrap16(-a))
    exp = _exp_negative16(_wrap16(-magnitude), integer_bits)
    if_positive = _rescale16(_newton_reciprocal16(exp), 1, 0)  # x / 2, from Q1 to Q0
    if_negative = _wrap16(_INT16_ONE - if_positive)
    out = np.where(a == 0, 1 << 14, np.where(positive, if_positive, if_negative))
    return out.astype(np.int16)


@functools.cache
def _tanh_table(integer_bits: int) -> np.ndarray:
    a = np.arange(-32768, 32768, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, _wrap16(-a))
    exp = _exp_negative16(n, integer_bits + 1)  # exp(2n): the same raw value, one more bit
    t = _rescale16(_wrap16(_newton_reciprocal16(exp) - (1 << 13)), 2, 0)
    out = np.where(a == 0, 0, np.where(negative, _wrap16(-t), t))
    return out.astype(np.int16)


def fixed_point_logistic_int16(raw: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp's ``logistic`` on int16 Q{integer_bits} values: Q0.15 results (int16)."""
    return _logistic_table(integer_bits)[np.asarray(raw, np.int64) + 32768]


def fixed_point_tanh_int16(raw: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp's ``tanh`` on int16 Q{integer_bits} values: Q0.15 results (int16)."""
    return _tanh_table(integer_bits)[np.asarray(raw, np.int64) + 32768]
