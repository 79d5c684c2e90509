"""offload's CPU reference: one numpy kernel per TFLite builtin op, matching LiteRT's kernels."""

from offload.ops._base import OpKernel
from offload.ops._registry import kernel_class, output_shapes, register, supported_ops
from offload.ops.strided_slice import strided_slice_ranges

__all__ = [
    "OpKernel",
    "kernel_class",
    "output_shapes",
    "register",
    "strided_slice_ranges",
    "supported_ops",
]
