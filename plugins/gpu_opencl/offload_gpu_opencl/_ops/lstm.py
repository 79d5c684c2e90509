"""LSTM, the BASIC cell (op version 2), as LiteRT's GPU delegate takes and lowers it."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload.errors import TensorShapeError
from offload.ops import output_shapes
from offload_gpu_opencl._constants import foldable
from offload_gpu_opencl._ir import BLOCKS, Lowering, Ref, pad_last
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._source import blocking

__all__ = ["SPECS"]

_INPUTS = ("input", "previous activation", "weights", "biases", "previous state")
_OUTPUTS = ("activation", "state", "concat temp", "activation temp")


def check(node: Node, subgraph: Subgraph) -> str | None:
    """Why gpu_opencl does not take this LSTM node (the capabilities checked its version,
    dtypes, activation and options), or None: LiteRT's GPU delegate's BASIC cell needs all
    five inputs and four outputs, constant weights and biases, and the shapes of lstm.cc."""
    ins, outs, tensors = node.inputs, node.outputs, subgraph.tensors
    if len(ins) != 5 or len(outs) != 4 or min((*ins, *outs), default=0) < 0:
        found = f"{len(ins)} inputs and {len(outs)} outputs"
        missing = [n for n, t in zip((*_INPUTS, *_OUTPUTS), (*ins, *outs)) if t < 0]
        found += f" ({', '.join(missing)} omitted)" if missing else ""
        return f"expected the 5 inputs and 4 outputs of the BASIC LSTM cell, found {found}"
    for pos in (2, 3):
        if not foldable(subgraph, ins[pos]):
            return f"{_INPUTS[pos]} (input {pos}) must be constant, found a runtime tensor"
        # As the CPU kernel; float16 weights reach here folded to float32 by the core.
        if tensors[ins[pos]].dtype != np.float32:
            found = tensors[ins[pos]].type_name
            return f"{_INPUTS[pos]} (input {pos}) must be FLOAT32, found {found}"
    for pos in (1, 4):
        if foldable(subgraph, ins[pos]):
            return (
                f"{_INPUTS[pos]} (input {pos}) must be a runtime tensor (a variable or an "
                "input: the cell writes its new value there), found a constant"
            )
    # The CPU reference's rule: LiteRT's Prepare checks, and the four output shapes.
    try:
        wanted = output_shapes(node, subgraph)
    except TensorShapeError as exc:
        return str(exc)
    for name, t, want in zip(_OUTPUTS, outs, wanted or ()):
        shape = list(tensors[t].shape)
        if want is not None and tuple(shape) != want:
            return f"expected the {name} output of shape {list(want)}, found {shape}"
    return None


def lower(lw: Lowering, node: Node) -> None:
    """concat_temp = [input, previous activation] (two copy_block launches), activ_temp =
    concat_temp @ W^T + b (the FULLY_CONNECTED matmul, no epilogue), then lstm_gates for the
    activation and state.

    Like LiteRT's CPU kernel (and offload's reference), the new activation and state are also
    written into inputs 1 and 4: they are the cell's persistent state (variable tensors, or
    inputs fed back). The partition's inputs among them are read back by the kernel.
    """
    x, h, w, b, c = node.inputs
    activ, state, concat, pre = (Ref("t", t) for t in node.outputs)
    n, i = (int(d) for d in lw.tensor(x).shape)
    o = int(lw.tensor(h).shape[1])
    k, co = i + o, 4 * o
    lw.launch(node, "copy_block", (n * i,), lw.ref(x), concat, n * i, i, k, 0)
    lw.launch(node, "copy_block", (n * o,), lw.ref(h), concat, n * o, o, k, i)
    wt = lw.const(f"w{node.index}", lambda: pad_last(lw.value(w).reshape(co, k).T), param=True)
    bias = lw.const(f"b{node.index}", lambda: pad_last(lw.value(b).reshape(1, co)), param=True)
    zero = lw.zeros(8)
    r, v = blocking(co, n)
    lw.launch(
        node,
        f"matmul_{r}x{v}",
        (-(-co // (8 * v)), -(-n // r)),
        concat,
        wt,
        bias,
        zero,
        zero,
        pre,
        n,
        k,
        co,
        0,
        0,
        0,
        0,
        local=BLOCKS,
    )
    h_ref, c_ref = lw.ref(h), lw.ref(c)
    if h_ref.kind != "t" or c_ref.kind != "t":  # check rejects constant states
        raise ValueError("the previous activation and state must be runtime tensors")
    lw.writebacks.update(int(ref.key) for ref in (h_ref, c_ref))
    lw.launch(
        node,
        "lstm_gates",
        (-(-o // 8), n),
        pre,
        c_ref,
        activ,
        state,
        h_ref,
        c_ref,
        n,
        o,
        local=lw.shapes.lanes_local(-(-o // 8)),
    )


SPECS = (
    OpSpec(
        op="LSTM",
        lower=lower,
        versions=(2, 2),
        # The uint8/int16 quantized cell stays on the CPU.
        dtypes=("float32",),
        fused_activations=("TANH",),
        # LiteRT's GPU delegate takes the BASIC LSTM only, always tanh and never clipped.
        options={"kernel_type": "BASIC", "cell_clip": 0.0, "proj_clip": 0.0},
        constraints=(
            "kernel_type BASIC (op version 2), fused activation TANH, cell_clip 0 and proj_clip 0",
            "float32 tensors (the uint8 cell stays on the CPU)",
            "weights and biases constant; previous activation and state runtime tensors",
            "the new activation and state are written back into inputs 1 and 4, as on the CPU",
        ),
        check=check,
    ),
)
