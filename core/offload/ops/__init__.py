"""offload's CPU reference: one numpy kernel per TFLite builtin op, matching LiteRT's kernels."""

from offload.ops._base import OpKernel
from offload.ops._registry import kernel_class, output_shapes, register, supported_ops

__all__ = ["OpKernel", "kernel_class", "output_shapes", "register", "supported_ops"]
