"""DEPTHWISE_CONV_2D's tap plan: per-shape buffers in which each of the KH*KW filter taps is a
few long contiguous multiply-adds over the whole output (:class:`TapPlan`), and the tap
weights tiled to match.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from offload.geometry import Geometry
from offload.ops._base import Shape, present

__all__ = ["TapPlan", "group_weights", "phase_buffers", "tap_groups", "tile_taps"]


@dataclass
class TapPlan:
    """Buffers for one input shape, built at setup (or on a resize).

    numpy multiplies an (..., C) array by a (C,) weight vector one C-long row at a time, which
    is several times slower than a contiguous pass when C is a few dozen channels. So the
    padded input lives in persistent buffers, one per column phase of the width stride (all
    columns congruent modulo stride_w), in which every tap's output rows are contiguous runs
    of OW*C*M values; weights are tiled to that length once (up to a size the kernel sets,
    past which one row buffer is refilled per tap). A multiplier M > 1 repeats each
    input channel M times as the buffers are filled. Padding stays zero from allocation (zero
    in ``x - x_zp`` terms for integer inputs): only the interior is rewritten on each run.
    """

    fills: list[tuple[np.ndarray, slice]]  # (N, H, cols, C, M) interior of a phase, its columns
    taps: list[np.ndarray]  # (N, OH, OW*C*M) read-only views into the phases, in filter order
    # Whether tap weights are tiled whole; if not, ``row`` takes each in turn.
    tiled: bool
    weights: np.ndarray | None  # float: (KH*KW, OW*C*M) when the filter is constant and tiled
    # Integer kinds: each phase's taps as one (KH, taps in the row, N, OH, OW*C*M) view, with
    # the indices of those taps in filter order, for one einsum per phase.
    groups: list[tuple[np.ndarray, np.ndarray]]
    # Integer kinds: (KH, taps in the row, OW*C*M) per group, when constant and tiled.
    group_weights: list[np.ndarray] | None
    row: np.ndarray | None  # (OW*C*M,): one tap's weights at a time, when not tiled
    rows: dict[str, np.ndarray]  # per-channel constants tiled to OW*C*M (bias, filter scales)
    acc: np.ndarray  # (N, OH, OW*C*M) accumulator, when the output array cannot serve as one
    scratch: np.ndarray  # (N, OH, OW*C*M)
    wide: np.ndarray | None  # (1, rows, OW*C*M) int64, for the int8 requantization
    out_shape: Shape

    def fill(self, x: np.ndarray, less: np.ndarray | int | None) -> None:
        """Write x (less its zero point or per-batch offset) into the phase buffers' interiors,
        each input channel repeated over the multiplier axis."""
        for interior, columns in self.fills:
            source = x[:, :, columns, :, None]
            if less is None:
                np.copyto(interior, source)
            else:
                np.subtract(source, less, out=interior, dtype=self.acc.dtype)

    def accumulate(self, w: np.ndarray, acc: np.ndarray, bias_row: np.ndarray | None) -> None:
        """acc = [bias +] sum over taps of tap * weight, in filter order. LiteRT starts its
        accumulator at the bias; adding it second instead is the same float addition."""
        if self.weights is not None:
            rows: Iterator[np.ndarray] | np.ndarray = self.weights
        elif self.tiled:  # a runtime filter
            rows = tile_taps(w, self.out_shape[2], self.acc.dtype)
        else:
            rows = self._refilled(w)
        for i, (tap, row) in enumerate(zip(self.taps, rows)):
            if i == 0:
                np.multiply(tap, row, out=acc)
                if bias_row is not None:
                    acc += bias_row
            else:
                np.multiply(tap, row, out=self.scratch)
                acc += self.scratch

    def sum_taps(self, w: np.ndarray, acc: np.ndarray) -> None:
        """acc = sum over taps of tap * weight, for integer inputs: every product and partial
        sum is an exact integer in the accumulator's type, so the order does not matter."""
        if not self.tiled:  # tap by tap through the row buffer
            for i, (tap, row) in enumerate(zip(self.taps, self._refilled(w))):
                np.multiply(tap, row, out=acc if i == 0 else self.scratch)
                if i:
                    acc += self.scratch
            return
        weights = self.group_weights
        if weights is None:  # a runtime filter
            weights = group_weights(w, self.out_shape[2], self.groups, self.acc.dtype)
        for i, ((view, _), tap_weights) in enumerate(zip(self.groups, weights)):
            target = acc if i == 0 else self.scratch
            np.einsum("abzrn,abn->zrn", view, tap_weights, out=target, optimize=False)
            if i:
                acc += self.scratch

    def _refilled(self, w: np.ndarray) -> Iterator[np.ndarray]:
        """Each tap's weights of (KH, KW, C*M) ``w`` tiled to OW*C*M, in filter order, in the
        plan's one row buffer: each valid until the next is asked for."""
        row = present(self.row, "a row buffer in a plan without tiled weights")
        target = row.reshape(-1, w.shape[-1])
        for tap in w.reshape(-1, w.shape[-1]):
            np.copyto(target, tap, casting="unsafe")  # the cast tile_taps makes: exact
            yield row


def tile_taps(w: np.ndarray, out_w: int, dtype: np.dtype) -> np.ndarray:
    """(..., C*M) tap weights -> (taps, OW*C*M) in the accumulator's ``dtype``."""
    cm = w.shape[-1]
    taps = w.size // cm if cm else 0
    tiled = np.tile(w.reshape(taps, 1, cm).astype(dtype), (1, out_w, 1))
    return tiled.reshape(taps, out_w * cm)


def group_weights(
    w: np.ndarray, out_w: int, groups: list[tuple[np.ndarray, np.ndarray]], dtype: np.dtype
) -> list[np.ndarray]:
    """(KH, KW, C*M) tap weights -> per group of :func:`tap_groups`, its taps' weights tiled
    to (KH, taps in the row, OW*C*M): each tap tiled once, straight into its group."""
    taps = w.reshape(-1, w.shape[-1])
    return [
        tile_taps(taps[index.ravel()], out_w, dtype).reshape(*index.shape, -1)
        for _, index in groups
    ]


def phase_buffers(
    shape: tuple[int, ...],
    g: Geometry,
    out_shape: Shape,
    stride: tuple[int, int],
    dilation: tuple[int, int],
    kernel_hw: tuple[int, int],
    dtype: np.dtype,
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, slice]], list[np.ndarray]]:
    """The zeroed phase buffers (N, padded H, cols, C*M) of an NHWC input ``shape``, the
    interiors a run fills with their input columns, and each tap's (N, OH, OW*C*M) read-only
    view into its phase, in filter order."""
    n, h, wd, c = shape
    (sh, sw), (dh, dw) = stride, dilation
    kh, kw = kernel_hw
    cm = out_shape[3]
    multiplier = cm // c
    padded_h = g.pad_top + h + g.pad_bottom
    padded_w = g.pad_left + wd + g.pad_right
    phases, fills = [], []
    for phase in range(sw):
        cols = len(range(phase, padded_w, sw))
        buf = np.zeros((n, padded_h, cols, c, multiplier), dtype)
        first = (phase - g.pad_left) % sw  # the first input column that lands here
        count = len(range(first, wd, sw))
        col = (first + g.pad_left - phase) // sw
        if count:
            interior = buf[:, g.pad_top : g.pad_top + h, col : col + count]
            fills.append((interior, slice(first, wd, sw)))
        phases.append(buf.reshape(n, padded_h, cols, cm))
    taps = []
    itemsize = dtype.itemsize
    for ky in range(kh):
        for kx in range(kw):
            phase_buf = phases[(kx * dw) % sw]
            # Made by the ndarray constructor, which also checks the view stays inside the
            # buffer: as_strided's views hold about 1 KB each, megabytes for a large window.
            tap = np.ndarray(
                (n, g.out_h, g.out_w * cm),
                dtype,
                phase_buf,
                ky * dh * phase_buf.strides[1] + (kx * dw) // sw * phase_buf.strides[2],
                (phase_buf.strides[0], phase_buf.strides[1] * sh, itemsize),
            )
            tap.flags.writeable = False
            taps.append(tap)
    return phases, fills, taps


def tap_groups(
    phases: list[np.ndarray],
    flat: tuple[int, int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    kernel_hw: tuple[int, int],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per phase buffer (N, padded H, cols, C*M), its taps as one read-only view
    (KH, taps in a filter row, N, OH, OW*C*M) and their indices in filter order. The taps
    of a phase sit at evenly spaced columns (kx steps by sw / gcd(dw, sw)), so the view
    needs only strides; einsum then sums a phase's taps in one call, which takes about
    two thirds of the time of a multiply and an add per tap."""
    n, out_h, run = flat
    (sh, sw), (dh, dw) = stride, dilation
    kh, kw = kernel_hw
    groups = []
    for phase, buf in enumerate(phases):
        kxs = [kx for kx in range(kw) if (kx * dw) % sw == phase]
        if not kxs:
            continue
        cols = [(kx * dw) // sw for kx in kxs]
        step = cols[1] - cols[0] if len(cols) > 1 else 0
        assert cols == [cols[0] + i * step for i in range(len(cols))]
        view = np.lib.stride_tricks.as_strided(
            buf[:, :, cols[0] :],
            (kh, len(kxs), n, out_h, run),
            (
                buf.strides[1] * dh,
                buf.strides[2] * step,
                buf.strides[0],
                buf.strides[1] * sh,
                buf.itemsize,
            ),
            writeable=False,
        )
        index = np.array([[ky * kw + kx for kx in kxs] for ky in range(kh)])
        groups.append((view, index))
    return groups
