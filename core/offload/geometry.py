"""Padding and window geometry as LiteRT computes it, for convolutions and pools, and the
positions a STRIDED_SLICE reads (:func:`strided_slice_ranges`).

TFLite's ``ComputePaddingHeightWidth``: SAME gives ``ceil(size / stride)`` outputs and pads
the odd pixel after, never before; VALID gives the outputs that fit the dilated filter (and an
empty output, not an error, when it does not). The CPU reference and every delegate share
these functions, so a delegate's windows line up with the reference's pixel for pixel.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from offload.ops.strided_slice import strided_slice_ranges

__all__ = [
    "Geometry",
    "geometry",
    "output_size",
    "strided_slice_ranges",
    "window_geometry",
    "window_options",
]


@dataclass(frozen=True)
class Geometry:
    """Output size and padding of one spatial convolution, as TFLite computes them."""

    out_h: int
    out_w: int
    pad_top: int
    pad_bottom: int
    pad_left: int
    pad_right: int


def window_options(opts: Mapping[str, Any]) -> tuple[tuple[int, int], tuple[int, int], str, str]:
    """(stride, dilation, padding, fused activation) of a conv or pool node's options."""
    return (
        (opts.get("stride_h", 1), opts.get("stride_w", 1)),
        (opts.get("dilation_h_factor", 1), opts.get("dilation_w_factor", 1)),
        opts.get("padding", "SAME"),
        opts.get("fused_activation_function", "NONE"),
    )


def output_size(padding: str, size: int, filt: int, stride: int, dilation: int = 1) -> int:
    """Output length along one spatial axis; raises ValueError for a padding other than SAME
    or VALID."""
    effective = (filt - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    if padding == "VALID":
        # C++ integer division truncates toward zero: a filter up to a stride larger than the
        # input gives LiteRT an empty output, not a negative size.
        numerator = size + stride - effective
        return numerator // stride if numerator >= 0 else -(-numerator // stride)
    raise ValueError(f"expected padding SAME or VALID, found {padding!r}")


def _pad(size: int, filt: int, stride: int, dilation: int, out: int) -> tuple[int, int]:
    # ComputePaddingWithOffset: the odd pixel of padding goes after, never before.
    effective = (filt - 1) * dilation + 1
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total // 2 + total % 2


@functools.lru_cache(maxsize=512)
def geometry(
    padding: str,
    in_hw: tuple[int, int],
    filter_hw: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
) -> Geometry:
    """TFLite's ComputePaddingHeightWidth: the output size and the padding on each side.

    Cached: a kernel sees the same shapes on every invoke, so this runs once per shape.
    """
    out_h = output_size(padding, in_hw[0], filter_hw[0], stride[0], dilation[0])
    out_w = output_size(padding, in_hw[1], filter_hw[1], stride[1], dilation[1])
    top, bottom = _pad(in_hw[0], filter_hw[0], stride[0], dilation[0], out_h)
    left, right = _pad(in_hw[1], filter_hw[1], stride[1], dilation[1], out_w)
    return Geometry(out_h, out_w, top, bottom, left, right)


@functools.lru_cache(maxsize=512)
def window_geometry(
    padding: str,
    in_hw: tuple[int, int],
    filter_hw: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
) -> Geometry:
    """:func:`geometry` of a CONV_2D or DEPTHWISE_CONV_2D window after LiteRT's Prepare checks:
    positive strides, dilations, input and filter sizes, and a filter that fits the padded
    input (an empty output is allowed, as in LiteRT; a negative one is not)."""
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(
            f"expected strides and dilations >= 1, found stride {list(stride)} and dilation "
            f"{list(dilation)}"
        )
    if min(in_hw) < 1 or min(filter_hw) < 1:
        raise ValueError(
            f"expected input and filter heights and widths >= 1, found input {list(in_hw)} "
            f"and filter {list(filter_hw)}"
        )
    g = geometry(padding, in_hw, filter_hw, stride, dilation)
    if g.out_h < 0 or g.out_w < 0:
        effective = [(k - 1) * d + 1 for k, d in zip(filter_hw, dilation)]
        raise ValueError(
            f"expected a filter no larger than the {padding}-padded input {list(in_hw)}, found "
            f"a filter of {list(filter_hw)} (dilated to {effective})"
        )
    return g
