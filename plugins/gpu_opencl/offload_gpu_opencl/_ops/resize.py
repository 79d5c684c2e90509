"""RESIZE_BILINEAR (v1-3: align_corners, half_pixel_centers), 8 channels of one output pixel
per item, as TFLite's ComputeInterpolationValues (or, for an exact float 2x upscale, as its
optimized kernel's pairwise means)."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._shapes import constant_ints, required

__all__ = ["SPECS"]


def limits(node: Node, sg: Subgraph) -> None:
    """A constant size (read on the host); its values are the core's rule."""
    constant_ints(sg, required(node, sg, 1, "size"), "size (input 1)")


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    n, h, wd, c = lw.tensor(x).shape
    _, oh, ow, _ = lw.tensor(node.outputs[0]).shape
    align = bool(node.options.get("align_corners", False))
    half = bool(node.options.get("half_pixel_centers", False))

    def scale(i: int, o: int) -> float:
        if align and o > 1:
            return float(np.float32(i - 1) / np.float32(o - 1))
        return float(np.float32(i) / np.float32(o))

    # TFLite's optimized float kernel takes an exact 2x upscale without either option apart
    # (pairwise means); a quantized output goes through the generic float path there too.
    two_x = oh == 2 * h and ow == 2 * wd and not (align or half)
    mode = 2 if two_x and lw.tensor(node.outputs[0]).dtype == np.float32 else int(half)
    cb = (c + 7) // 8
    lw.launch(
        node,
        "resize_bilinear",
        (cb, ow, n * oh),
        lw.ref(x),
        lw.out(node),
        h,
        wd,
        c,
        oh,
        ow,
        scale(h, oh),
        scale(wd, ow),
        mode,
        local=lw.shapes.rows_local(cb),
    )
    lw.finish(node)


SPECS = (OpSpec(op="RESIZE_BILINEAR", lower=lower, limits=limits, versions=(1, 3)),)
