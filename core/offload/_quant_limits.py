"""What LiteRT's kernels take: their multipliers at the scale edges (:func:`rescale_limit`).

Each requantizing op's LiteRT Prepare forms fixed-point multipliers from the scales of its
tensors, and some of them must lie in a range: QuantizeMultiplierSmallerThanOneExp
(tflite/kernels/internal/quantization_util.cc) aborts the process (TFLITE_CHECK) unless its
multiplier is in (0, 1) with a shift <= 0 once rounded; other kernels refuse the node
(TF_LITE_ENSURE). Those that pass may still overflow an integer register at run time, so
that LiteRT's answer at the edge of the input range is a wrapped value that no other engine
reproduces. :func:`rescale_limit` is that rule, one entry per op, for the CPU reference (which
refuses what LiteRT's Prepare refuses) and every engine delegate (which declines it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from offload._graph import Node, Subgraph, Tensor
from offload._quant_fixed_point import quantize_multiplier
from offload._quant_params import QUANTIZED_TYPES, dtype_range, is_quantized, scale_zero_point


@dataclass(frozen=True)
class RescaleLimit:
    """Why LiteRT's kernel cannot take a node's quantization scales as they are.

    ``stage`` is ``"prepare"`` where LiteRT's Prepare aborts the process or refuses the node
    (or its kernel's answer is undefined),
    ``"overflow"`` where it runs but a register of its kernel can overflow at the ends of the
    input range, where only LiteRT's builtin kernels give LiteRT's answer.
    ``message`` names the multiplier, the scales and LiteRT's condition.
    """

    stage: Literal["prepare", "overflow"]
    message: str


def checked_log2(x: float) -> tuple[bool, int]:
    """TFLite's CheckedLog2: (is x a power of two within 1e-3 in log space, rounded log2)."""
    log = math.log2(x)
    rounded = round(log)
    return abs(log - rounded) < 1e-3, int(rounded)


# The register LiteRT's optimized 8-bit ADD, SUB and MUL hold a rescaled result in before they
# add the output zero point (int16 lanes: vqmovn_s32 saturates, the vaddq_s16 that follows
# wraps), and the int32 every kernel left-shifts by a positive multiplier exponent.
_INT16_LANE = 1 << 15
_INT32_LIMIT = 1 << 31


def _f32(x: float) -> np.float32:
    return np.float32(x)


def _fmul(a: float, b: float) -> float:
    """a * b in float32 arithmetic, as C++ multiplies two floats (inf on overflow)."""
    with np.errstate(all="ignore"):
        return float(_f32(a) * _f32(b))


def _fdiv(a: float, b: float) -> float:
    with np.errstate(all="ignore"):
        return float(_f32(a) / _f32(b))


def _scales(*tensors: Tensor) -> tuple[float, ...]:
    """The tensors' per-tensor scales, the float32 of the file widened to Python floats."""
    return tuple(float(scale_zero_point(t)[0]) for t in tensors)


def _span(t: Tensor) -> int:
    """The largest |q - zero_point| over the tensor's type: the integer LiteRT's kernels
    start from at the edge of the input range."""
    lo, hi = dtype_range(t.dtype)
    z = scale_zero_point(t)[1]
    return max(abs(lo - z), abs(hi - z))


def _below_one(m: float) -> bool:
    """What QuantizeMultiplierSmallerThanOneExp takes without aborting: 0 < m < 1, and a
    shift <= 0 after rounding (a mantissa that rounds up to 1 raises it to 1)."""
    return math.isfinite(m) and 0.0 < m < 1.0 and quantize_multiplier(m)[1] <= 0


def _left_shift_overflows(acc: float, m: float) -> bool:
    """Whether ``acc`` (the largest magnitude the kernel holds before multiplying by ``m``)
    leaves int32 when MultiplyByQuantizedMultiplier shifts it left by m's exponent; a
    non-finite ``m`` is quantized to garbage (its cast to int64 is undefined)."""
    if not math.isfinite(m):
        return True
    shift = quantize_multiplier(m)[1] if m > 0 else 0
    return acc * 2.0 ** max(shift, 0) >= _INT32_LIMIT


def _onto_twice_max(
    s1: float, s2: float, so: float, bits: int
) -> tuple[float, float, float, float]:
    """Both inputs onto twice the larger input scale at ``bits`` bits, as the Prepare of ADD,
    SUB and SQUARED_DIFFERENCE forms it: input 1's multiplier, input 2's, twice the larger
    scale and the output's ``2**bits * scale``. ``2 * std::max(float, float)`` and
    ``(1 << bits) * output scale`` are float products in LiteRT (overflow to inf), divided in
    double."""
    twice_max = _fmul(2.0, max(s1, s2))
    denominator = _fmul(float(1 << bits), so)
    with np.errstate(all="ignore"):
        m1 = float(np.float64(s1) / twice_max)
        m2 = float(np.float64(s2) / twice_max)
    return m1, m2, twice_max, denominator


def _rescaled_overflow(
    op: str, out: Tensor, acc: float, m: float, found: str
) -> RescaleLimit | None:
    """The ``"overflow"`` limit of an 8-bit or int16 ADD, SUB or MUL: its largest rescaled
    value, ``acc`` (what the kernel holds before multiplying) times ``m``, past the int16 lanes
    of the 8-bit kernels or past int32 in the left shift; ``found`` says what reaches it."""
    lane = out.dtype.itemsize == 1 and acc * m >= _INT16_LANE
    if lane or _left_shift_overflows(acc, m):
        return RescaleLimit(
            "overflow",
            f"expected the rescaled {op} within the int16 lanes (8-bit) and int32 of LiteRT's "
            f"kernel, found {found}: LiteRT's answer wraps",
        )
    return None


def _add_sub_limit(
    op: str, a: Tensor, b: Tensor, out: Tensor, options: Mapping[str, Any]
) -> RescaleLimit | None:
    """add.cc / sub.cc Prepare: both inputs onto twice the larger input scale at
    ``left_shift`` bits (20 for 8-bit, 15 for int16), the sum back to the output scale."""
    s1, s2, so = _scales(a, b, out)
    if out.dtype == np.int16 and options.get("pot_scale_int16", True):
        pots = [s > 0 and math.isfinite(s) and checked_log2(s)[0] for s in (s1, s2, so)]
        if all(pots):
            return None  # the power-of-two path: shifts, no multipliers
    left_shift = 15 if out.dtype == np.int16 else 20
    m1, m2, twice_max, denominator = _onto_twice_max(s1, s2, so, left_shift)
    with np.errstate(all="ignore"):
        m_out = float(np.float64(twice_max) / denominator)
    scales = f"input scales {s1!r} and {s2!r}, output scale {so!r}"
    for k, m in ((1, m1), (2, m2)):
        if not _below_one(m):
            return RescaleLimit(
                "prepare",
                f"expected LiteRT's input {k} multiplier, scale / (2 * max(input scales)), in "
                f"(0, 1) (its Prepare aborts the process otherwise), found {m!r} from {scales}",
            )
    # SUB takes an output multiplier above 1 (QuantizeMultiplierGreaterThanOne); ADD does not.
    if not (op == "SUB" and m_out > 1) and not _below_one(m_out):
        return RescaleLimit(
            "prepare",
            f"expected LiteRT's output multiplier, 2 * max(input scales) / (2**{left_shift} * "
            f"output scale), in (0, 1){' or above 1' if op == 'SUB' else ''} (its Prepare "
            f"aborts the process otherwise), found {m_out!r} from {scales}",
        )
    if op == "SUB" and out.dtype == np.int16 and quantize_multiplier(m_out)[1] > 0:
        return RescaleLimit(
            "overflow",
            f"expected LiteRT's int16 SUB output multiplier, 2 * max(input scales) / (2**15 * "
            f"output scale), at most 1, found {m_out!r} from {scales}: its kernel divides by a "
            "negative power of two and answers the difference's sign",
        )
    acc = (_span(a) * m1 + _span(b) * m2) * (1 << left_shift)
    return _rescaled_overflow(op, out, acc, m_out, f"it reaching {acc * m_out:.3g} from {scales}")


def _mul_limit(a: Tensor, b: Tensor, out: Tensor) -> RescaleLimit | None:
    """mul.cc Prepare: QuantizeMultiplier(s1 * s2 / s_out), in float; it never aborts."""
    s1, s2, so = _scales(a, b, out)
    m = _fdiv(_fmul(s1, s2), so)
    acc = float(_span(a) * _span(b))
    found = (
        f"its multiplier {m!r} taking the product to {acc * m:.3g} (input scales {s1!r} and "
        f"{s2!r}, output scale {so!r})"
    )
    return _rescaled_overflow("MUL", out, acc, m, found)


def _squared_difference_limit(a: Tensor, b: Tensor, out: Tensor) -> RescaleLimit | None:
    """squared_difference.cc Prepare (int8): inputs onto twice the larger scale at 7 bits, the
    square back by (2 * max)**2 / (2**14 * s_out); every multiplier below 1 or it aborts."""
    if out.dtype != np.int8:
        return None
    s1, s2, so = _scales(a, b, out)
    m1, m2, twice_max, denominator = _onto_twice_max(s1, s2, so, 14)
    with np.errstate(all="ignore"):
        ms = (m1, m2, float(np.float64(twice_max) * twice_max / denominator))
    for what, m in zip(("input 1", "input 2", "output"), ms):
        if not _below_one(m):
            return RescaleLimit(
                "prepare",
                f"expected LiteRT's {what} multiplier"
                + (", (2 * max(input scales))**2 / (2**14 * output scale)," * (what == "output"))
                + f" in (0, 1) (its Prepare aborts the process otherwise), found {m!r} from "
                f"input scales {s1!r} and {s2!r}, output scale {so!r}",
            )
    return None


def _hard_swish_limit(x: Tensor, out: Tensor) -> RescaleLimit | None:
    """activations.cc HardSwishPrepare (8-bit): the output multiplier s_in / 128 / s_out, in
    float, must have an exponent <= 0 (TF_LITE_ENSURE: the node is refused)."""
    if out.dtype.itemsize != 1:
        return None
    s_in, so = _scales(x, out)
    m = _fdiv(_fmul(1.0 / 128.0, s_in), so)
    if math.isfinite(m) and m > 0 and quantize_multiplier(m)[1] > 0:
        return RescaleLimit(
            "prepare",
            f"expected LiteRT's output multiplier, input scale / 128 / output scale, below 1 "
            f"(its Prepare refuses the node otherwise), found {m!r} from input scale "
            f"{s_in!r}, output scale {so!r}",
        )
    # A multiplier past float range, or a left shift past 30 bits, reaches LiteRT's kernel as
    # undefined C (QuantizeMultiplier's frexp of inf; the reluish shift below): its answer
    # is whatever this build's compiler made of that, so offload refuses rather than guess.
    if not math.isfinite(m):
        return RescaleLimit(
            "prepare",
            f"expected a finite output multiplier, input scale / 128 / output scale, found "
            f"{m!r} from input scale {s_in!r}, output scale {so!r} (LiteRT's answer is "
            "undefined there)",
        )
    # The kernel left-shifts by the "reluish" multiplier's exponent less one as the C
    # ``1 << amount`` on an int, which past 30 is undefined (x86 masks the amount to 5 bits).
    reluish = _fdiv(_fmul(1.0 / 128.0, s_in), 3.0 / 32768.0)
    if not math.isfinite(reluish):
        shift: int | float = math.inf
    else:
        shift = quantize_multiplier(reluish)[1] - 1 if reluish > 0 else 0
    if shift > 30:
        return RescaleLimit(
            "prepare",
            f"expected LiteRT's reluish multiplier, input scale / 128 / (3 / 32768), to shift "
            f"left by at most 30 bits, found {shift} from input scale {s_in!r} (output scale "
            f"{so!r}): LiteRT's answer comes from an undefined C shift",
        )
    return None


def _concatenation_limit(inputs: Sequence[Tensor], out: Tensor) -> RescaleLimit | None:
    """concatenation.cc Prepare (int8): every input on the output's scale and zero point
    (TF_LITE_ENSURE_EQ: the node is refused); int16 and uint8 take any scales."""
    if out.dtype != np.int8:
        return None
    so, zo = scale_zero_point(out)
    for k, t in enumerate(inputs):
        s, z = scale_zero_point(t)
        if s != so or z != zo:
            return RescaleLimit(
                "prepare",
                f"expected every input on the output's scale {float(so)!r} and zero point "
                f"{zo} (LiteRT's int8 CONCATENATION does not rescale: its Prepare refuses the "
                f"node), found scale {float(s)!r} and zero point {z} on input {k}",
            )
    return None


def _reduce_limit(op: str, x: Tensor, out: Tensor) -> RescaleLimit | None:
    """reduce.cc PrepareMeanOrSum: QuantizeMultiplier(s_in / s_out), which never aborts; the
    sum of the reduced elements is shifted left by its exponent in int32. MEAN's kernels
    divide the multiplier by the count first (a smaller shift), so for MEAN this bound
    declines a little more than it must."""
    s_in, so = _scales(x, out)
    with np.errstate(all="ignore"):
        m = float(np.float64(s_in) / np.float64(so))
    count = max(1, math.prod(x.shape) // max(1, math.prod(out.shape)))
    acc = float(count * _span(x))
    if _left_shift_overflows(acc, m):
        return RescaleLimit(
            "overflow",
            f"expected the {op} of {count} elements, shifted left by the exponent of LiteRT's "
            f"multiplier {m!r}, within int32, found it past (input scale {s_in!r}, output "
            f"scale {so!r}): LiteRT's answer wraps",
        )
    return None


def _spatial_mean(node: Node, subgraph: Subgraph, x: Tensor, out: Tensor) -> bool:
    """Whether LiteRT's optimized resolver runs the node's MEAN through its dedicated 4-D mean
    over height and width (int8 and uint8, keep_dims, axes 1 and 2); from the output's shape
    where the axes are not a constant."""
    if x.dtype not in (np.int8, np.uint8) or len(x.shape) != 4 or len(out.shape) != 4:
        return False
    if not node.options.get("keep_dims", False):
        return False
    index = node.inputs[1] if len(node.inputs) > 1 else -1
    axis = subgraph.tensors[index] if 0 <= index < len(subgraph.tensors) else None
    if axis is not None and axis.is_constant:
        axes = [int(a) % 4 for a in np.asarray(axis.constant_value()).ravel()]
        return len(axes) == 2 and sorted(axes) == [1, 2]
    return tuple(out.shape) == (x.shape[0], 1, 1, x.shape[3])


def _mean_undefined(node: Node, subgraph: Subgraph, x: Tensor, out: Tensor) -> RescaleLimit | None:
    """MEAN's scales where LiteRT's kernel leaves C++'s defined behaviour, so that its answer
    is whatever the compiler made of it, not a rule to follow: its int32
    MultiplyByQuantizedMultiplier shifts left by the multiplier's exponent as ``1 << shift``,
    past the int's width from a shift of 32 (input over output scale about 2**31 times the
    element count, and more); the 4-D mean over height and width (optimized Mean4D) also
    casts ``input zero point * input scale / output scale`` (float32) to int32, out of range
    from 2**31. The reference kernel (int16, other axes) folds 1/count into the multiplier
    first (reduce.h QuantizedMeanOrSum), the 4-D one into the float32 scale."""
    s_in, z_in = scale_zero_point(x)
    s_out = scale_zero_point(out)[0]
    count = max(1, math.prod(x.shape) // max(1, math.prod(out.shape)))
    ratio = f"input scale {float(s_in)!r}, output scale {float(s_out)!r}, {count} elements"
    spatial = _spatial_mean(node, subgraph, x, out)
    with np.errstate(all="ignore"):
        if spatial:
            temp = np.float32(z_in) * s_in / s_out
            temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
            if not -(2.0**31) <= float(temp) < 2.0**31:
                return RescaleLimit(
                    "prepare",
                    f"expected LiteRT's MEAN bias, input zero point {z_in} times input scale "
                    f"over output scale ({float(temp)!r}), within int32, found it past "
                    f"({ratio}): LiteRT casts it to int32, which C++ leaves undefined",
                )
            real = float(s_in / (np.float32(count) * s_out))
        else:
            real = float(np.float64(s_in) / np.float64(s_out))
    if math.isfinite(real):
        shift = quantize_multiplier(real)[1]
        if not spatial:
            shift -= min(count.bit_length() - 1, 32, 31 + shift)
        if shift < _INT32_BITS:
            return None
        what = f"a left shift of {shift} bits"
    else:  # its cast to an integer in QuantizeMultiplier is undefined too
        what = f"a multiplier of {real!r}"
    return RescaleLimit(
        "prepare",
        f"expected LiteRT's MEAN multiplier to shift an int32 left by at most 31 bits, found "
        f"{what} ({ratio}): C++ leaves that undefined, so LiteRT's answer is no rule to follow",
    )


# The width of the int LiteRT's MultiplyByQuantizedMultiplier shifts left as ``1 << shift``.
_INT32_BITS = 32


# The real bounds of each fused activation LiteRT quantizes onto the output's scale
# (kernel_util.cc CalculateActivationRangeQuantizedImpl).
_ACTIVATION_BOUNDS = {"RELU": (0.0,), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}

# The ops whose LiteRT kernel calls CalculateActivationRangeQuantized on a quantized path,
# each with the input whose type selects that path (an int8/uint8/int16 one; a float input
# with quantized weights is the hybrid path, which clamps in float). Those listed as
# ``prepare`` call it in Prepare (through PopulateConvolutionQuantizationParams for the
# convolutions) and refuse the node when it fails. The pools call it at Eval and drop the
# failed status, then clamp to a bound the failed call never set (uint8 AVERAGE_POOL_2D alone
# checks it and fails the invoke): LiteRT's answer is undefined there, so offload refuses
# those too rather than give one of its own.
_ACTIVATION_RANGE_OPS: dict[str, tuple[Literal["prepare", "eval"], int]] = {
    "ADD": ("prepare", 0),
    "SUB": ("prepare", 0),
    "MUL": ("prepare", 0),
    "DIV": ("prepare", 0),
    "FULLY_CONNECTED": ("prepare", 0),
    "CONV_2D": ("prepare", 0),
    "DEPTHWISE_CONV_2D": ("prepare", 0),
    "TRANSPOSE_CONV": ("prepare", 2),
    "AVERAGE_POOL_2D": ("eval", 0),
    "MAX_POOL_2D": ("eval", 0),
}


def _activation_range_limit(node: Node, subgraph: Subgraph) -> RescaleLimit | None:
    """kernel_util.cc Quantize: each bound of the fused activation divided by the output
    scale in float32 and rounded must fit int32 (``no_integer_overflow_from_quantization``):
    RELU6 or RELU_N1_TO_1 onto an output scale under about 3e-9, for one. Where it does not,
    LiteRT's Prepare refuses the node, or, for the pools, its answer is undefined."""
    entry = _ACTIVATION_RANGE_OPS.get(node.op)
    activation = node.options.get("fused_activation_function")
    bounds = _ACTIVATION_BOUNDS.get(activation) if isinstance(activation, str) else None
    if entry is None or not bounds:
        return None
    when, selector = entry
    count = len(subgraph.tensors)
    picks = (node.inputs[selector] if selector < len(node.inputs) else -1, node.outputs[0])
    if not all(0 <= t < count for t in picks):
        return None
    x, out = (subgraph.tensors[t] for t in picks)
    if x.dtype not in QUANTIZED_TYPES or not is_quantized(out):
        return None
    scale = float(scale_zero_point(out)[0])
    for bound in bounds:
        q = np.round(_fdiv(bound, scale)) if bound else 0.0
        if not -float(_INT32_LIMIT) <= q <= float(_INT32_LIMIT):
            consequence = (
                "LiteRT's Prepare refuses the node"
                if when == "prepare"
                else "LiteRT's kernel drops that failure and clamps to a bound it never set, "
                "so its answer is undefined"
            )
            return RescaleLimit(
                "prepare",
                f"expected the fused {activation}'s bound {bound:g} on the output scale "
                f"{scale!r} to fit int32, found {q:.3g} ({consequence})",
            )
    return None


def rescale_limit(node: Node, subgraph: Subgraph) -> RescaleLimit | None:
    """Why LiteRT's kernel cannot take ``node``'s quantization scales as they are, or None.

    One rule per requantizing op, from the multipliers LiteRT's Prepare forms: ADD, SUB,
    SQUARED_DIFFERENCE (its Prepare aborts the process), HARD_SWISH, CONCATENATION (it refuses
    the node), MUL, MEAN, SUM (they run, and overflow past the bounds given in each
    message; MEAN's kernel is undefined past a 31-bit shift, refused there). Before those,
    on every op that quantizes a fused activation's bounds onto the output scale
    (``_ACTIVATION_RANGE_OPS``: ADD to TRANSPOSE_CONV, and the pools), a bound that leaves
    int32 there, which LiteRT's Prepare refuses (the pools' answer is then
    undefined). The CPU reference raises where the stage is ``"prepare"``, as LiteRT would;
    an engine delegate declines the node at either stage (``offload.check_engine_node``),
    LiteRT's own builtin kernels excepted at ``"overflow"``, where theirs is the answer.
    Nodes whose tensors are not quantized, or do not have the types the op takes, get None
    (the type checks say the rest).
    """
    count = len(subgraph.tensors)
    if not node.outputs or not 0 <= node.outputs[0] < count:
        return None
    refused = _activation_range_limit(node, subgraph)
    if refused is not None:
        return refused
    out = subgraph.tensors[node.outputs[0]]
    data = [
        subgraph.tensors[t] if 0 <= t < count else None
        for t in (node.inputs if node.op == "CONCATENATION" else node.inputs[:2])
    ]
    if node.op in ("MEAN", "SUM", "HARD_SWISH"):
        data = data[:1]
    tensors = [*data, out]
    if not data or not all(
        t is not None and is_quantized(t) and t.dtype == out.dtype for t in tensors
    ):
        return None
    ready = [t for t in tensors if t is not None]
    if node.op in ("ADD", "SUB") and len(ready) == 3:
        return _add_sub_limit(node.op, ready[0], ready[1], out, node.options)
    if node.op == "MUL" and len(ready) == 3:
        return _mul_limit(ready[0], ready[1], out)
    if node.op == "SQUARED_DIFFERENCE" and len(ready) == 3:
        return _squared_difference_limit(ready[0], ready[1], out)
    if node.op == "HARD_SWISH":
        return _hard_swish_limit(ready[0], out)
    if node.op == "CONCATENATION":
        return _concatenation_limit(ready[:-1], out)
    if node.op == "MEAN":
        undefined = _mean_undefined(node, subgraph, ready[0], out)
        if undefined is not None:
            return undefined
    if node.op in ("MEAN", "SUM"):
        return _reduce_limit(node.op, ready[0], out)
    return None
