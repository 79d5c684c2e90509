"""LiteRT's tensor detail dicts, and the value a variable tensor starts (and resets) at."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._graph import Node, Tensor

if TYPE_CHECKING:
    from offload._executor import Executor

__all__ = ["op_details", "shape_now", "tensor_details", "variable_initial_value"]


def variable_initial_value(t: Tensor, shape: tuple[int, ...]) -> np.ndarray:
    """A variable's value at ``allocate_tensors`` and after ``reset_all_variables``."""
    if t.is_constant and t.sparsity is None:
        return np.array(t.constant_value(), copy=True)
    q = t.quantization
    if t.dtype == np.int8 and q is not None and q.zero_point.size:
        # LiteRT's ResetVariableTensor starts int8 state at its zero point (real 0.0); other
        # types start at 0 bytes.
        return np.full(shape, int(q.zero_point[0]), np.int8)
    return np.zeros(shape, dtype=t.dtype)


def tensor_details(t: Tensor, shape: tuple[int, ...]) -> dict[str, Any]:
    """One dict of ``get_tensor_details()`` with LiteRT's keys; ``shape`` is the current one."""
    q = t.quantization
    if q is None:
        quantization: tuple[float, int] = (0.0, 0)
        params = {
            "scales": np.zeros(0, np.float32),
            "zero_points": np.zeros(0, np.int32),
            "quantized_dimension": 0,
            "block_size": 0,
        }
    else:
        quantization = q.as_tuple()
        params = {
            "scales": np.array(q.scale, np.float32),
            "zero_points": np.array(q.zero_point, np.int32),
            "quantized_dimension": q.quantized_dimension,
            "block_size": 0,  # LiteRT's key; blockwise quantization is not read yet
        }
    sparsity: dict[str, Any] = {}
    if t.sparsity is not None:
        sparsity = {
            "traversal_order": np.array(t.sparsity.traversal_order, np.int32),
            "block_map": np.array(t.sparsity.block_map, np.int32),
            "dim_metadata": [
                {"format": 0 if d.format == "DENSE" else 1, "dense_size": d.dense_size}
                if d.format == "DENSE"
                else {
                    "format": 1,
                    "array_segments": d.array_segments,
                    "array_indices": d.array_indices,
                }
                for d in t.sparsity.dim_metadata
            ],
        }
    return {
        "name": t.name,
        "index": t.index,
        "shape": np.array(shape, np.int32),
        "shape_signature": np.array(t.shape_signature, np.int32),
        # LiteRT reports a string tensor as numpy.bytes_ (its values come as bytes objects).
        "dtype": np.bytes_ if t.type_name == "STRING" else t.dtype.type,
        "quantization": quantization,
        "quantization_parameters": params,
        "sparsity_parameters": sparsity,
    }


def op_details(node: Node, op_index: int, dtype_of: Callable[[int], Any]) -> dict[str, Any]:
    """One node as LiteRT's ``_get_op_details`` describes it: ``index``, ``op_name``,
    ``inputs`` and ``outputs`` (int32 arrays, -1 for an omitted input), and the dtypes of the
    tensors present (``operand_types``, ``result_types``), each from ``dtype_of``."""

    def types(indices: Sequence[int]) -> list[Any]:
        return [dtype_of(i) for i in indices if i != -1]

    return {
        "index": op_index,
        "op_name": node.op_name,
        "inputs": np.array(node.inputs, np.int32),
        "outputs": np.array(node.outputs, np.int32),
        "operand_types": types(node.inputs),
        "result_types": types(node.outputs),
    }


def shape_now(t: Tensor, executor: Executor | None, *, live: bool = True) -> tuple[int, ...]:
    """The shape details report for ``t``: declared while no executor runs its subgraph;
    else the computed one, or with ``live`` (the main subgraph) the shape of the value it
    holds, which a run may have settled (an output whose shape only the run decides)."""
    if executor is None:
        return t.shape
    if live:
        buf = executor.buffers[t.index]
        if buf is not None:
            return tuple(buf.shape)
    return executor.shapes[t.index]
