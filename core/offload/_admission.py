"""What every engine delegate checks before it hands a node to its engine.

An engine delegate (litert, openvino, a vendor SDK) runs an exported partition in a runtime
that does not check what offload's CPU reference checks, and some of them end the process on
what they do not take. The rules every such delegate needs are here, once, so a fix reaches
every engine and a new engine plugin states only what is particular to it.
"""

from __future__ import annotations

import weakref

import numpy as np

from offload._export import check_exportable
from offload._graph import Node, Subgraph
from offload.quant import dtype_range, is_quantized, rescale_limit, scale_zero_point, unusable_scale

__all__ = ["check_engine_node"]

_TINY = float(np.finfo(np.float32).tiny)

# Per subgraph (by identity, held weakly): the tensors something gives a value.
_SOURCED: dict[int, tuple[weakref.ref[Subgraph], frozenset[int]]] = {}


def _sourced(subgraph: Subgraph) -> frozenset[int]:
    key = id(subgraph)
    cached = _SOURCED.get(key)
    if cached is not None and cached[0]() is subgraph:
        return cached[1]
    sourced = {t for n in subgraph.nodes for t in n.outputs}
    sourced.update(subgraph.inputs)
    sourced.update(t.index for t in subgraph.tensors if t.is_constant or t.is_variable)
    # Entries of subgraphs that are gone are dropped as new ones come, so this stays small.
    for k in [k for k, (ref, _) in _SOURCED.items() if ref() is None]:
        del _SOURCED[k]
    result = frozenset(sourced)
    _SOURCED[key] = (weakref.ref(subgraph), result)
    return result


# OpenVINO's low-precision transformations read a FakeQuantize's real interval
# [scale * (qmin - zero point), scale * (qmax - zero point)] in float32 and take an end under
# 1e-6 in magnitude for zero (layer_transformation.cpp getPrecisionDetails, a "hardcoded
# workaround"): the zero point is dropped and the answer moves by up to zero point * scale /
# output scale steps (measured: 239 on ADD, MEAN, MUL, HARD_SWISH). At the other end the
# intervals and the sums formed over them leave float32 (measured: MEAN off by 32 steps from
# ends near 4e34, MUL from intervals that are inf); 1e30 keeps four decades from there.
_FLOAT_INTERVAL = (1e-6, 1e30)


def _float_interval_reason(node: Node, subgraph: Subgraph, engine: str) -> str | None:
    """Why an engine that requantizes through float32 real intervals (dequantize, compute,
    quantize: OpenVINO's FakeQuantize) would not give LiteRT's integer answer on ``node``'s
    runtime tensors, or None. Constants are dequantized by a multiply, not an interval."""
    low, high = _FLOAT_INTERVAL
    for t in (*node.inputs, *node.outputs):
        if not 0 <= t < len(subgraph.tensors):
            continue
        tensor = subgraph.tensors[t]
        if tensor.is_constant or not is_quantized(tensor):
            continue
        qmin, qmax = dtype_range(tensor.dtype)
        scale, zero_point = scale_zero_point(tensor)
        with np.errstate(over="ignore"):
            ends = [float(scale * np.float32(q - zero_point)) for q in (qmin, qmax)]
        if any(e != 0.0 and not low <= abs(e) <= high for e in ends):
            return (
                f"tensor {t} covers [{ends[0]:.3g}, {ends[1]:.3g}] (scale {float(scale)!r}, "
                f"zero point {zero_point}); expected each end 0 or between {low:g} and "
                f"{high:g} in magnitude, where {engine}'s float32 requantization gives "
                "LiteRT's integer answer"
            )
    return None


def check_engine_node(
    node: Node,
    subgraph: Subgraph,
    *,
    engine: str,
    state: bool = False,
    litert_builtin: bool = False,
    float_rescale: bool = False,
) -> str | None:
    """None if an engine delegate may hand ``node`` to its engine, else the reason it may not.

    Call it first in ``check_node``, then add what is particular to the engine::

        def check_node(self, node, subgraph):
            return offload.check_engine_node(node, subgraph, engine="MyRuntime") or ...

    Declined: a node :func:`offload.check_exportable` refuses; a quantization scale that is
    neither 0 nor a finite, positive, normal float32 (LiteRT's XNNPACK path crashes the
    process on a subnormal one); scales LiteRT's kernel cannot rescale
    (:func:`offload.quant.rescale_limit`: its Prepare aborts the process or refuses the node,
    or, unless ``litert_builtin``, its integer registers overflow, so that only LiteRT's builtin
    kernels give its answer); a variable (state) input, unless the engine carries state
    across invokes (``state=True``); a runtime input nothing gives a value (not a model input,
    constant or variable, and written by no node), which the CPU reference stops on with a
    typed error and an engine would read as whatever its buffer holds.

    ``engine`` names the runtime in the reasons. ``litert_builtin``: the engine is LiteRT's own
    builtin kernels, whose answer at the overflow edge is the reference's. ``float_rescale``:
    the engine dequantizes runtime tensors to float32, computes and quantizes back through
    each tensor's real interval (OpenVINO's FakeQuantize) instead of LiteRT's fixed-point
    multipliers; a runtime tensor whose interval has an end that is not 0 and under 1e-6 or
    over 1e30 in magnitude is declined, where that arithmetic loses the zero point or leaves
    float32 and answers up to hundreds of steps from LiteRT.
    """
    reason = check_exportable(node, subgraph)
    if reason is not None:
        return reason
    tensors = [subgraph.tensors[t] if t >= 0 else None for t in (*node.inputs, *node.outputs)]
    bad = unusable_scale(tensors)
    if bad is not None:
        return (
            f"tensor {bad[0]} has quantization scale {bad[1]!r}; {engine} is handed only "
            f"finite positive scales of at least {_TINY:.3g} (LiteRT's XNNPACK path crashes the "
            "process on a subnormal one)"
        )
    limit = rescale_limit(node, subgraph)
    if limit is not None and limit.stage == "prepare":
        return limit.message
    if limit is not None and not litert_builtin:
        return f"{limit.message}; {engine} would not give that answer"
    if float_rescale:
        reason = _float_interval_reason(node, subgraph, engine)
        if reason is not None:
            return reason
    if not state:
        variables = [t for t in node.inputs if t >= 0 and subgraph.tensors[t].is_variable]
        if variables:
            return (
                f"input tensor {variables[0]} is a variable (state kept across invokes), which "
                f"{engine} does not carry"
            )
    sourced = _sourced(subgraph)
    for t in node.inputs:
        if t >= 0 and t not in sourced:
            return (
                f"input tensor {t} ({subgraph.tensors[t].name!r}) has no value: it is not a "
                "model input, a constant or a variable, and no node writes it"
            )
    return None
