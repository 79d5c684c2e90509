"""RFFT2D: 2-D real FFT over the two innermost axes, input cropped or zero-padded to
``fft_length``; output complex64 of shape ``[..., fft_length[0], fft_length[1] // 2 + 1]``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.ops._types import accepts, one_of


def _check_rank(shape: Shape) -> None:
    check_shape(len(shape) >= 2, f"expected an input of rank >= 2, found shape {list(shape)}")


def fft_size(fft_length: np.ndarray) -> tuple[int, int]:
    """(height, width) of the transform: two powers of two, as LiteRT's fft2d library needs."""
    sizes = int_list(fft_length)
    check_shape(
        len(sizes) == 2 and all(n > 0 and n & (n - 1) == 0 for n in sizes),
        f"expected fft_length of two powers of two, found {sizes}",
    )
    return sizes[0], sizes[1]


@register
class Rfft2d(OpKernel):
    op = "RFFT2D"
    types = accepts("FLOAT32", output=one_of("COMPLEX64"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, fft_length = ctx.shape(0), ctx.constant(1)
        _check_rank(x)
        if fft_length is None:
            return [None]
        height, width = fft_size(fft_length)
        return [(*x[:-2], height, width // 2 + 1)]

    def _run(self, x: np.ndarray, fft_length: np.ndarray) -> np.ndarray:
        _check_rank(x.shape)
        height, width = fft_size(fft_length)
        # LiteRT's fft2d works in double precision, then narrows to complex64.
        spectrum = np.fft.rfft2(x.astype(np.float64), s=(height, width), axes=(-2, -1))
        return spectrum.astype(np.complex64)
