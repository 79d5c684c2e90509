"""RFFT2D: 2-D real FFT over the two innermost axes, input cropped or zero-padded to
``fft_length``; output complex64 of shape ``[..., fft_length[0], fft_length[1] // 2 + 1]``."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class Rfft2d(OpKernel):
    op = "RFFT2D"

    def run(self, x: np.ndarray, fft_length: np.ndarray) -> np.ndarray:
        height, width = (int(v) for v in np.asarray(fft_length).reshape(-1)[:2])
        # LiteRT's fft2d works in double precision, then narrows to complex64.
        spectrum = np.fft.rfft2(x.astype(np.float64), s=(height, width), axes=(-2, -1))
        return spectrum.astype(np.complex64)
