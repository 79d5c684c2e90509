"""Lowering a partition to a flat list of kernel launches, with constants pre-transformed.

:func:`lower` checks every node's declared output shapes against its op's shape rule (_ops),
plans fusion (_fusion), lowers each node that still needs a launch through its op's spec, then
checks every launch's reach against the buffers it is given (_reach). Shape and reach failures
raise :class:`ShapeCheckError` before anything is allocated or launched.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from offload import Partition, Subgraph
from offload_gpu_opencl._errors import ShapeCheckError
from offload_gpu_opencl._fusion import plan_fusion
from offload_gpu_opencl._ir import LAUNCH_SHAPES, Lowering
from offload_gpu_opencl._ops import SPECS, check_declared
from offload_gpu_opencl._reach import check_reach
from offload_gpu_opencl._tiling import GemmChooser

__all__ = ["lower"]


def lower(
    subgraph: Subgraph,
    partition: Partition,
    cached: Mapping[str, np.ndarray] | None = None,
    gemm: GemmChooser | None = None,
    fuse_depthwise: bool = False,
    fuse_gates: bool = True,
) -> Lowering:
    """The partition's launches and constants; ``cached``: pre-transformed constants from the
    serialization cache, used instead of making them again; ``gemm``: the GPU kernel family's
    chooser (_autotune.gemm_chooser), None for the CPU family. The chooser is what tells the
    families apart here: the other kernels' work-group shapes follow it (_ir.LAUNCH_SHAPES).
    ``fuse_depthwise`` (GPU family only): a depthwise convolution that feeds a 1x1 one runs
    inside that product's launch (_fusion); ``fuse_gates`` (GPU family only): so does a
    squeeze-excite MUL by a per-image gate."""
    shapes = LAUNCH_SHAPES["cpu" if gemm is None else "gpu"]
    lw = Lowering(
        subgraph,
        partition,
        cached=dict(cached or {}),
        gemm=gemm,
        shapes=shapes,
        fuse_depthwise=fuse_depthwise and gemm is not None,
        fuse_gates=fuse_gates and gemm is not None,
    )
    # Every node, fused or not: fusion and lowering read the declared shapes from here on.
    for n in partition.nodes:
        node = subgraph.nodes[n]
        try:
            check_declared(node, subgraph)
        except ShapeCheckError as exc:
            raise ShapeCheckError(f"{node.describe()}: {exc}") from exc
    plan_fusion(lw)
    early = set(lw.hoisted.values())
    for n in partition.nodes:
        if n in lw.skip or n in early:
            continue
        for m in (lw.hoisted[n], n) if n in lw.hoisted else (n,):
            node = subgraph.nodes[m]
            try:
                SPECS[node.op].lower(lw, node)
            except Exception as exc:
                raise type(exc)(f"{node.describe()}: {exc}") from exc
    for launch in lw.launches:
        check_reach(lw, launch)
    if gemm is not None:
        gemm.done()
    return lw
