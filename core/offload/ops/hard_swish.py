"""HARD_SWISH: x * relu6(x + 3) / 6.

float32 in the order of LiteRT's optimized kernel (see :func:`_hard_swish`).

int8/uint8 follow TFLite's 16-bit fixed-point algorithm (input on a 2^7 finer scale, a
saturating "relu-ish" factor in [0, 1], a truncating doubling high multiply), tabulated over
all 256 inputs at setup, and looked up two bytes at a time (:class:`PairLut`).
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, scale_zp
from offload.ops._lut import Lut, lut_from_int
from offload.ops._quant import quantize_multiplier, rounding_divide_by_pot
from offload.ops._registry import register
from offload.ops._types import accepts

_I16_MIN, _I16_MAX = -32768, 32767


_ONE_SIXTH = np.float32(1.0 / 6.0)


def _hard_swish(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """optimized_ops::HardSwish in float32: ``(x * (1/6)) * relu6(x + 3)`` in NEON lanes of 4
    (through NEON_2_SSE on x86), ``(x * relu6(x + 3)) * (1/6)`` for the leftover elements.
    The two orders round differently, hence the split by flat position."""
    flat = x.reshape(-1)
    result = np.empty_like(flat) if out is None else out.reshape(-1)
    reluish = np.clip(flat + np.float32(3), np.float32(0), np.float32(6))
    lanes = flat.size // 4 * 4
    np.multiply(flat[:lanes], _ONE_SIXTH, out=result[:lanes])
    result[:lanes] *= reluish[:lanes]
    np.multiply(flat[lanes:], reluish[lanes:], out=result[lanes:])
    result[lanes:] *= _ONE_SIXTH
    return result.reshape(x.shape)


_hard_swish.takes_out = True  # type: ignore[attr-defined]


class PairLut:
    """An 8-bit :class:`~offload.ops._lut.Lut` applied to two adjacent bytes per lookup: a
    65536-entry table of output byte pairs (128 KiB, cache-resident) indexed by the input
    viewed as uint16. numpy's gather costs about the same per index whatever the index type,
    so half the indices take less than half the time of a byte-wise fancy index. Each byte of
    a pair maps through the byte table on its own, so the result does not depend on the
    machine's byte order."""

    def __init__(self, lut: Lut) -> None:
        self.lut = lut
        self.dtype = lut.table.dtype
        byte = lut.table.view(np.uint8).astype(np.uint16)  # indexed by the input's unsigned view
        pair = np.arange(65536, dtype=np.uint32)
        self.pairs = (byte[pair & 0xFF] | (byte[pair >> 8] << 8)).astype(np.uint16)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype != self.lut.in_dtype:
            return self.lut(x)  # raises the Lut's own type error
        flat = x.reshape(-1)
        out = np.empty(x.shape, self.dtype)
        result = out.reshape(-1)
        even = flat.size // 2 * 2
        np.take(self.pairs, flat[:even].view(np.uint16), out=result[:even].view(np.uint16))
        if even < flat.size:
            result[even:] = self.lut(flat[even:])
        return out


def _to_int16_multiplier(m32: int) -> int:
    # TFLite's DownScaleInt32ToInt16Multiplier: round the Q31 multiplier to Q15.
    if m32 >= 2**31 - 1 - (1 << 15):
        return _I16_MAX
    return (m32 + (1 << 15)) >> 16


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16 values."""
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    total = ab + nudge
    high = np.where(total >= 0, total >> 15, -((-total) >> 15))
    return np.where((a == _I16_MIN) & (b == _I16_MIN), _I16_MAX, high)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingDoublingHighMul: like the above but truncating toward zero, no nudge."""
    ab = a * b
    high = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == _I16_MIN) & (b == _I16_MIN), _I16_MAX, high)


def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + 32768) & 0xFFFF) - 32768


def _sat_shl16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(x * (1 << amount), _I16_MIN, _I16_MAX)


@register
class HardSwish(UnaryOp):
    op = "HARD_SWISH"
    max_version = 1
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8")
    fn = staticmethod(_hard_swish)

    def quantized(self) -> QuantizedFn:
        (si, zi), (so, zo) = scale_zp(self.inputs[0]), scale_zp(self.outputs[0])
        hires_scale = np.float32(1.0 / 128.0) * np.float32(si)
        out_m32, out_exp = quantize_multiplier(float(hires_scale / np.float32(so)))
        relu_m32, relu_exp = quantize_multiplier(float(hires_scale / np.float32(3.0 / 32768.0)))
        out_m, relu_m = _to_int16_multiplier(out_m32), _to_int16_multiplier(relu_m32)

        def rule(v: np.ndarray) -> np.ndarray:
            hires = _wrap16((v - zi) * 128)
            preshift = _srdhm16(hires, out_m)
            reluish = hires
            if relu_exp > 0:
                reluish = _sat_shl16(reluish, relu_exp - 1)
            reluish = _srdhm16(reluish, relu_m)
            if relu_exp > 0:
                reluish = _sat_shl16(reluish, 1)
            if relu_exp < 0:
                reluish = rounding_divide_by_pot(reluish, -relu_exp)
            reluish = (reluish + (1 << 15)) >> 1
            out = _sdhm16(reluish, preshift)
            out = rounding_divide_by_pot(out, -out_exp)
            return out + zo

        return PairLut(Lut(lut_from_int(rule, self.dtype)))
