"""ADD: a + b with broadcasting and a fused activation; quantized via TFLite's shifted sum.

int8 runs LiteRT's optimized kernels, on x86 NEON code through NEON_2_SSE: AddElementwiseInt8
(same shapes, and the inner runs of a broadcast) shifts each input left by 20 plus its
multiplier's exponent *before* its rounding doubling high multiply, 16 elements at a time;
AddScalarBroadcast (inner runs against one broadcast value) applies the exponent as a
truncating shift after the multiply, 8 at a time; the elements left over in each run, and the
broadcasts no fivefold loop covers, go through the reference, which rounds twice.

An int8 sum depends only on the pair of input codes, so the three rules are tabulated once
over all 65536 pairs and a run is one gather per element.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import (
    BinaryOp,
    QuantizedFn,
    _quant_clamp,
    add_sub_quantized,
    scale_zp,
)
from offload.ops._quant import (
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from offload.ops._registry import register

# Elements AddElementwiseInt8 / AddScalarBroadcast handle per NEON step before their tails.
_LANES = 16
_SCALAR_LANES = 8
_LEFT_SHIFT = 20


def _shift(x: np.ndarray, amount: int) -> np.ndarray:
    """vshlq_s32 by a constant: left for positive amounts, arithmetic right otherwise."""
    return x << amount if amount >= 0 else x >> -amount


@register
class Add(BinaryOp):
    op = "ADD"
    max_version = 6
    fn = staticmethod(np.add)
    fused = True
    clamp_float = True

    def quantized(self) -> QuantizedFn:
        reference = add_sub_quantized(self, +1)
        in1, in2, out = self.inputs[0], self.inputs[1], self.outputs[0]
        if out.dtype != np.int8 or in1 is None or in2 is None:
            return reference
        (s1, z1), (s2, z2), (so, zo) = scale_zp(in1), scale_zp(in2), scale_zp(out)
        lo, hi = _quant_clamp(out, self.activation)
        twice_max = 2.0 * max(s1, s2)
        m1, sh1 = quantize_multiplier(s1 / twice_max)
        m2, sh2 = quantize_multiplier(s2 / twice_max)
        mo, sho = quantize_multiplier(twice_max / ((1 << _LEFT_SHIFT) * so))

        def scaled_sum(a: np.ndarray, b: np.ndarray, early_shift: bool) -> np.ndarray:
            """The output of NEON lanes: the inputs' exponents applied as part of the left
            shift (AddElementwiseInt8) or as a truncating right shift after the multiply
            (AddScalarBroadcast)."""
            xa, xb = a.astype(np.int64) - z1, b.astype(np.int64) - z2
            if early_shift:
                xa = saturating_rounding_doubling_high_mul(_shift(xa, _LEFT_SHIFT + sh1), m1)
                xb = saturating_rounding_doubling_high_mul(_shift(xb, _LEFT_SHIFT + sh2), m2)
            else:
                xa = _shift(saturating_rounding_doubling_high_mul(xa << _LEFT_SHIFT, m1), sh1)
                xb = _shift(saturating_rounding_doubling_high_mul(xb << _LEFT_SHIFT, m2), sh2)
            high = saturating_rounding_doubling_high_mul(xa + xb, mo)
            return np.clip(rounding_divide_by_pot(high, -sho) + zo, lo, hi).astype(np.int8)

        # Tables over all 65536 pairs, indexed by (a's byte << 8) | b's byte.
        codes = np.arange(256, dtype=np.uint8).view(np.int8)
        grid_a, grid_b = (g.reshape(-1) for g in np.meshgrid(codes, codes, indexing="ij"))
        elementwise_table = scaled_sum(grid_a, grid_b, early_shift=True)
        scalar_table = scaled_sum(grid_a, grid_b, early_shift=False)
        reference_table = reference(grid_a, grid_b).astype(np.int8)

        def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            index = (a.view(np.uint8).astype(np.intp) << 8) | b.view(np.uint8)
            layout = _fivefold_runs(a.shape, b.shape)
            if layout is None or index.size == 0:
                return reference_table[index]  # LiteRT's generic broadcast: the reference
            run_length, scalar_broadcast = layout
            lanes = _SCALAR_LANES if scalar_broadcast else _LANES
            table = scalar_table if scalar_broadcast else elementwise_table
            vector = run_length // lanes * lanes
            runs = index.reshape(-1, run_length)
            result = np.empty(runs.shape, np.int8)
            np.take(table, runs[:, :vector], out=result[:, :vector])
            np.take(reference_table, runs[:, vector:], out=result[:, vector:])
            return result.reshape(index.shape)

        return run


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
