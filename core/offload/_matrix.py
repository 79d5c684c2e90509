"""``offload.capability_matrix()``: delegates x model types, and per-op support."""

from __future__ import annotations

from typing import Any

from offload._graph import MODEL_TYPES
from offload._plugins import list_delegates
from offload.ops import supported_ops

__all__ = ["capability_matrix"]


def capability_matrix() -> dict[str, Any]:
    """What each installed delegate (and the CPU reference) supports.

    Returns ``{"model_types": {model_type: {delegate: {"support", "reason"}}},
    "ops": {op: {delegate: "v1-2 float32,float16" ...}}, "delegates": {...}}``.
    """
    records = list_delegates()
    model_types: dict[str, dict[str, dict[str, str]]] = {
        t: {"cpu": {"support": "yes", "reason": ""}} for t in MODEL_TYPES
    }
    ops: dict[str, dict[str, str]] = {op: {"cpu": f"v1-{v}"} for op, v in supported_ops().items()}
    delegates: dict[str, Any] = {
        "cpu": {"version": "builtin", "available": True, "reason": "", "plugin": "offload"}
    }
    for r in records:
        caps = r.cls.CAPABILITIES
        delegates[r.name] = {
            "version": r.version,
            "available": r.availability.available,
            "reason": r.availability.reason,
            "plugin": r.plugin,
            "platforms": list(caps.platforms),
            "precisions": list(caps.precisions),
        }
        for t in MODEL_TYPES:
            s = caps.model_types[t]
            model_types[t][r.name] = {"support": s.support, "reason": s.reason}
        for cap in caps.ops:
            lo, hi = cap.versions
            text = f"v{lo}-{hi} {','.join(cap.dtypes)}"
            if cap.constraints:
                text += f" ({'; '.join(cap.constraints)})"
            ops.setdefault(cap.op, {})[r.name] = text
    return {"model_types": model_types, "ops": dict(sorted(ops.items())), "delegates": delegates}
