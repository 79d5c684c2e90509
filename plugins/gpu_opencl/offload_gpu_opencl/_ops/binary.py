"""Two-input elementwise ops: ADD, SUB, MUL, MAXIMUM, MINIMUM, PRELU, LOGICAL_AND.

binary8 takes same shapes, scalars and per-channel broadcasts 8 elements per item; binary any
other 4-D broadcast, one element per item."""

from __future__ import annotations

from functools import partial

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, elements, kernel_act, pad4
from offload_gpu_opencl._ops._spec import FUSED_ACTIVATIONS, OpSpec, raw_codes_reason
from offload_gpu_opencl._shapes import need

__all__ = ["SPECS"]

# The binary kernels' `op` codes (binop / binop8 in cl/binary.cl).
CODES = {"ADD": 0, "SUB": 1, "MUL": 2, "MAXIMUM": 3, "MINIMUM": 4, "PRELU": 5, "LOGICAL_AND": 6}


def limits(node: Node, sg: Subgraph) -> None:
    """The kernels read two operands (the broadcast shape is the core's rule)."""
    need(len(node.inputs) == 2, f"expected exactly 2 inputs, found {len(node.inputs)}")


# MAXIMUM and MINIMUM copy the chosen input's raw code (see raw_codes_reason).
_raw_codes = partial(raw_codes_reason, limits=limits)


def _strides(shape: tuple[int, ...], out: tuple[int, int, int, int]) -> list[int]:
    s4 = pad4(shape)
    strides, acc = [0, 0, 0, 0], 1
    for d in range(3, -1, -1):
        strides[d] = 0 if s4[d] == 1 and out[d] != 1 else acc
        acc *= s4[d]
    return strides


def _rows_view(shape: tuple[int, ...], total: int, last: int) -> tuple[int, int] | None:
    """(row stride, lane step) of an input of binary8 over rows of ``last`` elements: the
    whole output (step 1), one row repeated (per-channel broadcast: stride 0) or a scalar
    (step 0); None for other broadcasts."""
    size = elements(shape)
    if size == total:
        return last, 1
    if size == 1:
        return 0, 0
    if size == last and tuple(shape)[-1:] == (last,):
        return 0, 1
    return None


def lower(lw: Lowering, node: Node) -> None:
    a, b = node.inputs[0], node.inputs[1]
    out_shape = lw.tensor(node.outputs[0]).shape
    total = elements(out_shape)
    # ADD, SUB and MUL clamp to the finite range; MAXIMUM, MINIMUM and PRELU pass infinities on.
    op, activation = CODES[node.op], kernel_act(node, lw.subgraph)
    sa, sb = lw.tensor(a).shape, lw.tensor(b).shape
    last = int(out_shape[-1]) if out_shape else 1
    # Same shapes or scalars: the whole tensor as one row. Per-channel broadcast: rows of C.
    whole = all(elements(s) in (total, 1) for s in (sa, sb))
    row = last if not whole else total
    va, vb = _rows_view(sa, total, row), _rows_view(sb, total, row)
    if va is not None and vb is not None:
        rows, blocks = total // row, -(-row // 8)
        lw.launch(
            node,
            "binary8",
            (blocks, rows),
            lw.ref(a),
            lw.ref(b),
            lw.out(node),
            rows,
            row,
            *va,
            *vb,
            op,
            activation,
            local=lw.shapes.lanes_local(blocks),
        )
    else:
        o4 = pad4(out_shape)
        lw.launch(
            node,
            "binary",
            (total,),
            lw.ref(a),
            lw.ref(b),
            lw.out(node),
            total,
            o4[1],
            o4[2],
            o4[3],
            *_strides(sa, o4),
            *_strides(sb, o4),
            op,
            activation,
        )
    lw.finish(node)


# LiteRT's GPU delegate takes ADD and friends with exactly two inputs.
_binary = partial(OpSpec, lower=lower, limits=limits, max_inputs=2)
SPECS = (
    _binary(
        op="ADD",
        quantized_versions=(1, 2),
        fused_activations=FUSED_ACTIVATIONS,
        constraints=("exactly two inputs whose shapes broadcast to rank <= 4",),
    ),
    _binary(op="SUB", quantized_versions=(1, 2), fused_activations=FUSED_ACTIVATIONS),
    _binary(op="MUL", quantized_versions=(1, 2), fused_activations=FUSED_ACTIVATIONS),
    _binary(op="MAXIMUM", quantized_versions=(1, 2), check=_raw_codes),
    _binary(op="MINIMUM", quantized_versions=(1, 2), check=_raw_codes),
    _binary(op="PRELU"),
    _binary(op="LOGICAL_AND", dtypes=("bool",)),
)
