"""Family bases for the elementwise ops: binary (with numpy broadcasting), unary, and the
fixed-point helpers their quantized paths share.

Most op modules are a few lines on top of these: a binary op names its numpy function and,
if TFLite gives it a quantized algorithm, which one; a unary op names its float function and
how its 8-bit table is built. Float math stays in the input dtype (float32), never float64,
so results round where LiteRT's do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

from offload._graph import Tensor
from offload.errors import UnsupportedOpError
from offload.ops._activation import apply_fused_activation
from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._bounds import SAFE_MAGNITUDE, magnitude_bound
from offload.ops._lut import (
    Lut,
    int16_lut_lookup,
    int16_lut_populate,
    lut_from_float,
    lut_from_int,
)
from offload.ops._quant import (
    activation_range_quantized,
    dtype_range,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    scale_zp,
)
from offload.ops._types import accepts
from offload.quant import (
    QUANTIZED_TYPES,
    add_params,
    add_reference,
    checked_log2,
    is_quantized,
    saturating_rounding_doubling_high_mul,
)

__all__ = [
    "BinaryOp",
    "UnaryOp",
    "ComparisonOp",
    "LogicalOp",
    "ExtremumOp",
    "QuantizedFn",
    "QUANTIZED_TYPES",
    "is_quantized",
    "scale_zp",
    "checked_log2",
    "relu_x_lut",
    "float_clamp",
    "add_sub_quantized",
]

_FLOAT32_MAX = np.float32(np.finfo(np.float32).max)

QuantizedFn = Callable[..., np.ndarray]


# The clamp bounds of the fused activations that are clamps, within float32's finite range.
_CLAMPS = {
    "NONE": (-_FLOAT32_MAX, _FLOAT32_MAX),
    "RELU": (np.float32(0), _FLOAT32_MAX),
    "RELU6": (np.float32(0), np.float32(6)),
    "RELU_N1_TO_1": (np.float32(-1), np.float32(1)),
}


def nonzero_divisor(b: np.ndarray) -> None:
    """Refuse an integer divisor holding a zero, as LiteRT's DIV, FLOOR_DIV and FLOOR_MOD do
    ("Division by 0") rather than return a made-up quotient."""
    zeros = int(np.count_nonzero(np.asarray(b) == 0))
    if zeros:
        raise ZeroDivisionError(
            f"integer division by 0: {zeros} of the divisor's {np.size(b)} elements are 0 "
            "(LiteRT fails the invoke with 'Division by 0')"
        )


def float_clamp(x: np.ndarray, activation: str = "NONE") -> np.ndarray:
    """TFLite's float arithmetic kernels clamp to [lowest, max] even with no fused activation,
    so an overflow gives +-FLT_MAX rather than inf (NaN passes through). A clamp-type fused
    activation narrows that range in the same single pass; other activations follow it."""
    out = x if x.flags.writeable else None
    lo, hi = _CLAMPS.get(activation, _CLAMPS["NONE"])
    if x.dtype != np.float32:
        lo, hi = lo.astype(x.dtype), hi.astype(x.dtype)
    x = np.clip(x, lo, hi, out=out)
    return x if activation in _CLAMPS else apply_fused_activation(x, activation)


def _quant_clamp(out: Tensor, activation: str) -> tuple[int, int]:
    assert out.quantization is not None
    return activation_range_quantized(activation, out.quantization, out.dtype)


class BinaryOp(OpKernel):
    """An elementwise op of two inputs with numpy broadcasting.

    Subclasses set ``fn`` (the numeric rule, applied to float and plain integer inputs alike,
    in their own dtype) and may override :meth:`quantized` to return the fixed-point rule for
    8/16-bit quantized tensors. ``fused`` ops read ``fused_activation_function``.
    """

    # Subclasses assign ``staticmethod(<ufunc or function>)``; the rule is always read from
    # the class (``type(self).fn``), unbound. A ``Callable[..., ...]`` class variable is what
    # mypy accepts a staticmethod of any of those signatures for.
    fn: ClassVar[Callable[..., np.ndarray]]
    fused: ClassVar[bool] = False
    # Whether the op takes quantized inputs as raw integers (MAXIMUM, MINIMUM: both sides share
    # the output's quantization, so order and selection work on the raw values).
    raw_quantized: ClassVar[bool] = False
    clamp_float: ClassVar[bool] = False

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        a, b = ctx.shape(0), ctx.shape(1)
        try:
            return [tuple(np.broadcast_shapes(a, b))]
        except ValueError:
            raise ValueError(
                f"expected shapes that broadcast together, found {list(a)} and {list(b)}"
            ) from None

    def setup(self) -> None:
        self.dtype = self.outputs[0].dtype
        activation = self.options.get("fused_activation_function", "NONE") or "NONE"
        self.activation = activation if self.fused else "NONE"
        self._constant_b = self.constant(1)
        self._tiled: tuple[tuple[int, ...], np.ndarray] | None = None
        self._quantized: QuantizedFn | None = None
        if is_quantized(self.inputs[0]) and not self.raw_quantized:
            self._quantized = self.quantized()
            if self._quantized is None:
                dtype = self.input_tensor(0).dtype
                raise UnsupportedOpError(
                    f"{self.node.describe()}: quantized {dtype} inputs are not "
                    "supported by this kernel"
                )
        # The float clamp to the finite range, skipped where the graph bounds the result far
        # inside it (a clamp-type fused activation still clamps).
        self._clamp = self.clamp_float and not (
            self.activation == "NONE"
            and magnitude_bound(self.subgraph, self.outputs[0].index) <= SAFE_MAGNITUDE
        )
        fn = getattr(type(self), "fn", None)
        self.writes_into = (
            self._quantized is None
            and self.dtype.kind == "f"
            and (isinstance(fn, np.ufunc) or getattr(fn, "takes_out", False))
            and type(self).compute is BinaryOp.compute
            and type(self)._run is BinaryOp._run
        )

    def quantized(self) -> QuantizedFn | None:
        """The fixed-point rule for quantized inputs, or None where there is none."""
        return None

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return type(self).fn(a, b)

    def _channel_rows(
        self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None
    ) -> np.ndarray | None:
        """a op b on (rows, W*C) views when b is a constant per-channel vector, else None.

        numpy broadcasts a (C,) operand one C-long row at a time, several times slower than
        a pass over long rows; tiling the constant to W*C once per shape avoids that.
        """
        if a.ndim < 3 or b.size < 2 or b.shape[-1] != a.shape[-1] or b.size != b.shape[-1]:
            return None
        if b.ndim > a.ndim or not a.flags.c_contiguous:
            return None
        if self._tiled is None or self._tiled[0] != a.shape:
            self._tiled = (a.shape, np.tile(b.reshape(-1), a.shape[-2]))
        rows = a.reshape(-1, a.shape[-2] * a.shape[-1])
        into = out.reshape(rows.shape) if self.fits(out, a.shape, self.dtype) else None
        return self._compute(rows, self._tiled[1], into).reshape(a.shape)

    def _compute(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        if out is not None and self.writes_into:
            return type(self).fn(a, b, out=out)
        return np.asarray(self.compute(a, b))

    def _run(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if self._quantized is not None:
            # np.asarray: fixed-point arithmetic on 0-d arrays gives numpy scalars, and a
            # rank-0 output must be an array for the executor.
            return np.asarray(self._quantized(a, b))
        with np.errstate(all="ignore"):
            result = self._channel_rows(a, b, out) if self._constant_b is not None else None
            if result is None:
                if out is not None and not self.fits(
                    out, np.broadcast_shapes(a.shape, b.shape), self.dtype
                ):
                    out = None
                result = self._compute(a, b, out)
        clamp = self._clamp and result.dtype.kind == "f"
        if clamp or self.activation != "NONE":
            # Clamp in place when the result is ours (fresh, or the arena slot); a view of an
            # input is copied first.
            fresh = result.base is None and result is not a and result is not b
            if not (fresh or (out is not None and np.may_share_memory(result, out))):
                result = result.copy()
            if clamp:
                result = float_clamp(result, self.activation)
            else:
                result = apply_fused_activation(result, self.activation)
        return result.astype(self.dtype, copy=False)


class ComparisonOp(BinaryOp):
    """EQUAL, LESS, ...: bool output; quantized inputs are compared after rescaling each to a
    common fixed-point scale (TFLite's left shift of 8 and per-input multiplier)."""

    def quantized(self) -> QuantizedFn:
        (s1, z1), (s2, z2) = scale_zp(self.inputs[0]), scale_zp(self.inputs[1])
        m1, sh1 = quantize_multiplier(s1)
        m2, sh2 = quantize_multiplier(s2)
        fn = type(self).fn

        def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            sa = multiply_by_quantized_multiplier((a.astype(np.int64) - z1) << 8, m1, sh1)
            sb = multiply_by_quantized_multiplier((b.astype(np.int64) - z2) << 8, m2, sh2)
            return np.asarray(fn(sa, sb), np.bool_)

        return run


class LogicalOp(BinaryOp):
    """LOGICAL_AND / LOGICAL_OR on bool tensors."""


class ExtremumOp(BinaryOp):
    """MAXIMUM and MINIMUM (one kernel in LiteRT, maximum_minimum.cc): ``a`` where
    ``prefer(a, b)``, else ``b``, elementwise, so a NaN in ``a`` yields ``b`` (numpy's
    maximum and minimum would give the NaN). Quantized inputs share one scale, so the raw
    values are compared."""

    max_version = 4
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64", data=(0, 1))
    raw_quantized = True
    # Subclasses assign ``staticmethod(np.greater)`` or ``staticmethod(np.less)``.
    prefer: ClassVar[Callable[..., np.ndarray]]

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(type(self).prefer(a, b), a, b)


def add_sub_quantized(kernel: BinaryOp, sign: int) -> QuantizedFn:
    """ADD (sign +1) and SUB (sign -1) on quantized tensors, the TFLite way.

    8-bit: both inputs are shifted left by 20 bits, brought to a common scale (twice the larger
    input scale) with their own multipliers, summed, and rescaled to the output
    (:func:`offload.quant.add_params`, :func:`offload.quant.add_reference`). int16 uses a
    shift of 15, or, when every scale is a power of two and ``pot_scale_int16`` is set, plain
    rounding right shifts of one input onto the other's scale.
    """
    in1, in2, out = kernel.inputs[0], kernel.inputs[1], kernel.outputs[0]
    assert in1 is not None and in2 is not None
    s1, s2, so = (scale_zp(t)[0] for t in (in1, in2, out))
    lo, hi = _quant_clamp(out, kernel.activation)
    dtype = out.dtype

    if dtype == np.int16 and kernel.options.get("pot_scale_int16", True):
        pots = [checked_log2(s) for s in (s1, s2, so)]
        if all(p for p, _ in pots):
            shift1 = pots[0][1] - pots[2][1]
            shift2 = pots[1][1] - pots[2][1]
            if shift1 > 0 or shift2 > 0 or (shift1 and shift2):
                raise UnsupportedOpError(
                    f"{kernel.node.describe()}: int16 power-of-two scales need one input on the "
                    "output scale and the other finer"
                )

            def run_pot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
                sa = rounding_divide_by_pot(a.astype(np.int64), -shift1)
                sb = rounding_divide_by_pot(b.astype(np.int64), -shift2)
                return np.clip(sa + sign * sb, lo, hi).astype(dtype)

            return run_pot

    params = add_params(in1, in2, out, left_shift=15 if dtype == np.int16 else 20)
    if dtype == np.int16 and sign < 0 and params.output_shift > 0:
        # LiteRT's int16 SUB rescales its output with MultiplyByQuantizedMultiplierSmallerThanOneExp
        # even where Prepare formed a multiplier above 1: RoundingDivideByPOT by a negative
        # exponent, whose vectorized shifts give the difference's sign (0 counting as
        # positive), not its value. The answer is LiteRT's, checked against its kernels.
        def run_sign(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            p = params
            xa = (a.astype(np.int64) - p.input1_zero_point) << p.left_shift
            xb = (b.astype(np.int64) - p.input2_zero_point) << p.left_shift
            sa = multiply_by_quantized_multiplier(xa, p.input1_multiplier, p.input1_shift)
            sb = multiply_by_quantized_multiplier(xb, p.input2_multiplier, p.input2_shift)
            high = saturating_rounding_doubling_high_mul(sa - sb, p.output_multiplier)
            raw = np.where(high >= 0, 1, -1) + p.output_zero_point
            return np.clip(raw, lo, hi).astype(dtype)

        return run_sign

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return add_reference(a, b, params, (lo, hi), dtype, sign=sign)

    return run


class UnaryOp(OpKernel):
    """An elementwise op of one input.

    ``fn`` is the float (and plain integer) rule. For quantized 8-bit input, ``lut_fn`` names
    a float function tabulated the LUTPopulate way, or :meth:`quantized` returns another rule
    (typically a :class:`~offload.ops._lut.Lut` built from an exact integer algorithm).
    """

    # As in BinaryOp: staticmethods of ufuncs or functions, read unbound from the class.
    fn: ClassVar[Callable[..., np.ndarray]]
    lut_fn: ClassVar[Callable[..., np.ndarray] | None] = None
    # Ops defined on raw integers as well (NEG, ABS on int32): those go through ``fn``.
    raw_quantized: ClassVar[bool] = False

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def setup(self) -> None:
        self.dtype = self.outputs[0].dtype
        self._quantized: QuantizedFn | None = None
        if is_quantized(self.inputs[0]) and not self.raw_quantized:
            self._quantized = self.quantized()
            if self._quantized is None:
                raise UnsupportedOpError(
                    f"{self.node.describe()}: quantized {self.input_tensor(0).dtype} input is not "
                    "supported by this kernel"
                )
        fn = getattr(type(self), "fn", None)
        self.writes_into = (
            self._quantized is None
            and self.dtype.kind == "f"
            and self.inputs[0] is not None
            and self.inputs[0].dtype == self.dtype
            and (isinstance(fn, np.ufunc) or getattr(fn, "takes_out", False))
            and type(self)._run is UnaryOp._run
        )

    def quantized(self) -> QuantizedFn | None:
        lut_fn = type(self).lut_fn
        return None if lut_fn is None else self.float_lut(lut_fn)

    def float_lut(self, fn: Callable[[np.ndarray], np.ndarray]) -> QuantizedFn:
        """``fn`` tabulated over the quantized input domain: 256 entries for 8-bit types, the
        interpolated 513-entry table for int16 (both as TFLite's LUTPopulate builds them)."""
        in_t, out_t = self.inputs[0], self.outputs[0]
        assert in_t is not None and in_t.quantization is not None
        assert out_t.quantization is not None
        if in_t.dtype == np.int16:
            (si, zi), (so, zo) = scale_zp(in_t), scale_zp(out_t)
            table = int16_lut_populate(fn, si, zi, so, zo)
            return lambda x: int16_lut_lookup(table, x)
        return Lut(lut_from_float(fn, in_t.quantization, out_t.quantization, self.dtype))

    def _run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if self._quantized is not None:
            # np.asarray: as in BinaryOp.run, a rank-0 output must be an array.
            return np.asarray(self._quantized(x))
        fn = type(self).fn
        with np.errstate(all="ignore"):
            if self.writes_into and self.fits(out, x.shape, self.dtype):
                return fn(x, out=out)
            result = np.asarray(fn(x))
        return result.astype(self.dtype, copy=False)


def relu_x_lut(in_tensor: Tensor, out_tensor: Tensor, act_min: float, act_max: float | None) -> Lut:
    """TFLite's quantized ReluX (RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1) as a lookup table:
    rescale input to output scale, add the output zero point, clamp to the activation range
    expressed in output quanta (``act_max`` None: unbounded above)."""
    (si, zi), (so, zo) = scale_zp(in_tensor), scale_zp(out_tensor)
    lo, hi = dtype_range(out_tensor.dtype)
    m, sh = quantize_multiplier(si / so)

    def q(value: float) -> int:
        # roundf(act / scale) in float32, as the kernel computes it at eval time.
        ratio = np.float32(value) / np.float32(so)
        return zo + int(np.sign(ratio) * np.floor(np.abs(ratio) + np.float32(0.5)))

    qmin = max(lo, q(act_min))
    qmax = hi if act_max is None else min(hi, q(act_max))

    def rule(v: np.ndarray) -> np.ndarray:
        return np.clip(zo + multiply_by_quantized_multiplier(v - zi, m, sh), qmin, qmax)

    return Lut(lut_from_int(rule, out_tensor.dtype))
