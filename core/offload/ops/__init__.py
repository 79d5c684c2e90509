"""offload's CPU reference: one numpy kernel per TFLite builtin op, matching LiteRT's kernels."""

import importlib

from offload._deprecation import deprecated_attributes, deprecation
from offload.ops._base import OpKernel
from offload.ops._registry import kernel_class, output_shapes, register, supported_ops
from offload.ops._work import NodeWork, node_work

__all__ = [
    "NodeWork",
    "OpKernel",
    "kernel_class",
    "node_work",
    "output_shapes",
    "register",
    "supported_ops",
]

# One op's helper at the face of the CPU reference's registry: it is geometry a delegate
# computes about a node, beside the padding and window rules.
__getattr__ = deprecated_attributes(
    __name__,
    {
        "strided_slice_ranges": (
            deprecation(
                "ops-strided_slice_ranges",
                old="offload.ops.strided_slice_ranges",
                new="offload.geometry.strided_slice_ranges",
                since="0.2.0",
                removal="0.3.0",
            ),
            lambda: importlib.import_module("offload.geometry").strided_slice_ranges,
        )
    },
)
