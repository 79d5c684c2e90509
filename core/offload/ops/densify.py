"""DENSIFY: expand a sparse constant (TACO format, TFLite's SparsityParameters) to a dense
tensor. The input is constant, so the work is done once in ``setup``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offload._graph import Tensor
from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts


def densify(tensor: Tensor) -> np.ndarray:
    """The dense array of a sparse constant, following LiteRT's FormatConverter::SparseToDense.

    Storage is walked level by level in traversal order: a DENSE level enumerates every
    coordinate, a SPARSE_CSR level the coordinates listed for its parent in array_segments /
    array_indices. Block coordinates are folded back into their original dimension.
    """
    sparsity = tensor.sparsity
    if sparsity is None or tensor.data is None:
        raise ValueError(f"tensor {tensor.index} ({tensor.name!r}) is not a sparse constant")
    values = np.asarray(tensor.data).view(tensor.dtype).reshape(-1)
    shape = tuple(tensor.shape)
    rank = len(shape)
    order = sparsity.traversal_order
    levels = sparsity.dim_metadata
    total = math.prod(shape)

    def check_stored(count: int, level: int) -> None:
        # A valid encoding never stores more positions than the dense tensor has; a crafted
        # dense_size or array_segments would otherwise make the walk allocate without bound.
        check_shape(
            0 <= count <= total,
            f"expected sparsity level {level} of tensor {tensor.index} ({tensor.name!r}) to "
            f"address at most its {total} dense elements, found {count}",
        )

    parent = np.zeros(1, np.int64)  # storage position at the previous level
    coords = np.zeros((0, 1), np.int64)  # one row per level, one column per stored element
    for level, meta in enumerate(levels):
        if meta.format == "DENSE":
            size = int(meta.dense_size)
            check_stored(parent.size * size if size >= 0 else -1, level)
            child = (parent[:, None] * size + np.arange(size)).reshape(-1)
            level_coord = np.tile(np.arange(size), parent.size)
            coords = np.repeat(coords, size, axis=1)
        else:
            segments, indices = meta.array_segments, meta.array_indices
            if segments is None or indices is None:
                raise ValueError(
                    f"expected array_segments and array_indices on sparse level {level} of "
                    f"tensor {tensor.index} ({tensor.name!r}), found "
                    + ("none" if segments is None and indices is None else "only one")
                )
            starts, ends = segments[parent], segments[parent + 1]
            counts = ends - starts
            check_stored(int(counts.sum()) if not counts.size or counts.min() >= 0 else -1, level)
            # Concatenated ranges [starts[i], ends[i]) without a Python loop.
            offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
            child = offsets + np.arange(int(counts.sum()))
            level_coord = indices[child]
            coords = np.repeat(coords, counts, axis=1)
        coords = np.vstack([coords, level_coord[None, :]])
        parent = child

    original = np.zeros((rank, parent.size), np.int64)
    original[list(order[:rank])] = coords[:rank]
    for level in range(rank, len(order)):
        block = order[level] - rank
        dim = sparsity.block_map[block]
        # LiteRT takes the block size from dim_metadata[traversal_order[rank + block]].
        block_size = int(levels[order[rank + block]].dense_size)
        original[dim] = original[dim] * block_size + coords[level]

    dense = np.zeros(int(np.prod(shape, dtype=np.int64)), tensor.dtype)
    flat = np.ravel_multi_index(tuple(original), shape) if rank else np.zeros(1, np.int64)
    dense[flat] = values[: flat.size]
    return dense.reshape(shape)


@register
class Densify(OpKernel):
    op = "DENSIFY"
    types = accepts("FLOAT32 FLOAT16 INT8")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        # The sparse constant's tensor shape is its dense shape; the interpreter then holds the
        # dense output (allocated at planning) to its byte budget like any other tensor.
        return [ctx.shape(0)]

    def setup(self) -> None:
        self.dense = densify(self.input_tensor(0))
        self.dense.flags.writeable = False

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        return self.dense
