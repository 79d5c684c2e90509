"""Fused activation functions of TFLite's float kernels."""

from __future__ import annotations

import numpy as np

from offload.ops import _eigen

__all__ = ["apply_fused_activation", "relu", "FUSED_ACTIVATIONS"]

FUSED_ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT", "SIGMOID")


def relu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """max(x, 0), NaN and +inf passing through as in TFLite.

    A clip to [0, inf] rather than np.maximum(x, 0): numpy's maximum against a scalar takes a
    slow path, about 3x slower than clip on large float32 tensors.
    """
    zero = x.dtype.type(0)
    if x.dtype.kind != "f":
        return np.maximum(x, zero, out=out)
    return np.clip(x, zero, x.dtype.type(np.inf), out=out)


relu.takes_out = True  # type: ignore[attr-defined]


def apply_fused_activation(x: np.ndarray, activation: str | None) -> np.ndarray:
    """Apply a fused activation in place where possible; returns the result."""
    if activation in (None, "NONE"):
        return x
    if activation == "RELU":
        return relu(x, out=x if x.flags.writeable else None)
    if activation == "RELU6":
        return np.clip(x, 0, 6, out=x if x.flags.writeable else None)
    if activation == "RELU_N1_TO_1":
        return np.clip(x, -1, 1, out=x if x.flags.writeable else None)
    # The recurrent kernels apply these to whole gate buffers with Eigen (LiteRT's
    # ApplyActivationToVector): its packet tanh and logistic, bit for bit, in float32.
    if activation == "TANH":
        return _eigen.tanh(x) if x.dtype == np.float32 else np.tanh(x)
    if activation == "SIGMOID":
        if x.dtype == np.float32:
            return _eigen.logistic(x)
        return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)
    if activation == "SIGN_BIT":
        return np.signbit(x).astype(x.dtype)
    raise ValueError(f"expected a fused activation among {FUSED_ACTIVATIONS}, found {activation!r}")
