"""What the Interpreter's introspection methods measure: bytes held, delegates' own reports
(memory, stats, device-time profiles).

CPU kernels keep what ``setup`` made (weights in GEMM layout, tiled biases, lookup tables) as
ordinary attributes, often inside helper objects of their own. Rather than ask 96 kernels to
count their arrays, the arrays are found by walking the kernel's attributes: an array counts
once per allocation (views share their root's memory), and only when it owns its memory, so
views of the model file (constants, memory-mapped or not) never count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from offload._delegate import DelegateKernel, DevicePeak, DeviceProfile
from offload._graph import Model, Node, OpOptions, Subgraph, Tensor
from offload.errors import DelegateError

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "array_root",
    "delegate_profiles",
    "held_bytes",
    "reported_bytes",
    "reported_peak",
    "reported_profile",
    "reported_stats",
    "set_profiling",
]

NO_PROFILE = "no device profile"

# Objects a kernel refers to that belong to the graph, not to the kernel: never walked.
_GRAPH_TYPES = (Model, Subgraph, Node, Tensor, OpOptions)
# Deep enough for a kernel's helper objects (an LSTM's cell holding gate matrices), shallow
# enough that a walk never wanders far through shared objects.
_MAX_DEPTH = 6


def array_root(a: np.ndarray) -> np.ndarray:
    """The array at the bottom of a chain of views: the one whose memory ``a`` uses."""
    while True:
        base = a.base
        # as_strided views sit on a small wrapper object that holds the array they view.
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None)
        if not isinstance(base, np.ndarray):
            return a
        a = base


def held_bytes(objects: Iterable[Any], exclude: Iterable[np.ndarray] = ()) -> int:
    """Bytes of the allocations reachable from ``objects`` that they own, each counted once.

    ``exclude``: arrays whose memory belongs to someone else (tensor buffers, the arena,
    folded constants); a root shared with any of them is not counted.
    """
    skip = {id(array_root(a)) for a in exclude}
    counted: set[int] = set()
    seen: set[int] = set()
    total = 0
    stack: list[tuple[Any, int]] = [(obj, 0) for obj in objects]
    while stack:
        obj, depth = stack.pop()
        if id(obj) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            root = array_root(obj)
            # Only memory numpy allocated itself: a root over bytes or an mmap is a view of
            # the model file, which costs address space, not memory the kernel holds.
            if root.flags.owndata and id(root) not in skip and id(root) not in counted:
                counted.add(id(root))
                total += root.nbytes
            continue
        if isinstance(obj, _GRAPH_TYPES) or isinstance(obj, (str, bytes, int, float, type)):
            continue
        stack.extend((child, depth + 1) for child in _children(obj))
    return total


def _children(obj: Any) -> Iterable[Any]:
    if isinstance(obj, Mapping):
        return obj.values()
    if isinstance(obj, (list, tuple, set, frozenset)):
        return obj
    # Helper objects of offload's own kernels (dataclasses, small classes); a foreign object
    # (a compiled program, a device handle) is opaque: its owner reports it, or nobody can.
    if not type(obj).__module__.startswith("offload"):
        return ()
    values = list(getattr(obj, "__dict__", {}).values())
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                values.append(getattr(obj, name))
    return values


def reported_bytes(kernel: DelegateKernel) -> dict[str, int]:
    """What a delegate kernel says it holds (``memory_bytes()``), as {"device", "host"}.

    A key the kernel leaves out counts 0, as does the base class's empty default.
    """
    reported = _mapping(kernel, "memory_bytes")
    return {key: int(reported.get(key, 0) or 0) for key in ("device", "host")}


def reported_stats(kernel: DelegateKernel) -> dict[str, Any]:
    """A delegate kernel's own figures (``stats()``: cache hits, launches, ...), as a copy."""
    return dict(_mapping(kernel, "stats"))


def set_profiling(kernel: DelegateKernel, enabled: bool) -> bool:
    """Switch a delegate kernel's device profiling; whether it measures now."""
    answer = _method(kernel, "set_profiling")(bool(enabled))
    if not isinstance(answer, bool):
        raise DelegateError(
            f"{type(kernel).__name__}.set_profiling() must return a bool (whether it measures "
            f"now), found {type(answer).__name__}"
        )
    return answer


def reported_profile(kernel: DelegateKernel) -> DeviceProfile | None:
    """A delegate kernel's device profile (``profile()``), validated; None when it has none."""
    return _reported(kernel, "profile", DeviceProfile, "profile")


def reported_peak(kernel: DelegateKernel) -> DevicePeak | None:
    """A delegate kernel's device roofs (``device_peak()``), validated; None when it has none
    (its partition is set against the CPU's peak)."""
    return _reported(kernel, "device_peak", DevicePeak, "peak")


def _reported(kernel: DelegateKernel, method: str, model: type[M], what: str) -> M | None:
    """``kernel.method()`` as ``model``: None, the model itself, or a mapping of its fields;
    anything else raises DelegateError saying what was expected and found."""
    reported = _method(kernel, method)()
    if reported is None or isinstance(reported, model):
        return reported
    name = f"{type(kernel).__name__}.{method}()"
    if not isinstance(reported, Mapping):
        raise DelegateError(
            f"{name} must return an offload.{model.__name__}, a mapping of its fields or None, "
            f"found {type(reported).__name__}"
        )
    try:
        return model.model_validate(dict(reported))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (found {err.get('input')!r})"
            for err in exc.errors()
        )
        raise DelegateError(f"{name} reported an invalid {what}: {problems}") from None


def delegate_profiles(
    kernels: Mapping[int, DelegateKernel], delegate_of: Mapping[int, str]
) -> list[dict[str, Any]]:
    """Per delegate, its partitions' device profiles added up, per invoke (JSON-ready).

    Each partition's totals are divided by its own invoke count before they are added: the
    partitions of one delegate each run once per ``invoke()``, so the sums are what one
    ``invoke()`` costs on the device. A partition that measured no invoke yet adds nothing.
    """
    by_delegate: dict[str, list[tuple[int, DeviceProfile | None]]] = {}
    for index, kernel in sorted(kernels.items()):
        by_delegate.setdefault(delegate_of[index], []).append((index, reported_profile(kernel)))
    rows = []
    for name, parts in by_delegate.items():
        profiled = [(i, p) for i, p in parts if p is not None]
        families: dict[tuple[str, str], dict[str, float]] = {}
        for _, prof in profiled:
            if prof.invokes == 0:
                continue
            for k in prof.kernels:
                acc = families.setdefault((k.family, k.kind), {"n": 0.0, "ms": 0.0, "fl": 0.0})
                acc["n"] += k.launches / prof.invokes
                acc["ms"] += k.device_ms / prof.invokes
                acc["fl"] += k.flops / prof.invokes
        busy = sum(acc["ms"] for acc in families.values())
        kernel_rows: list[dict[str, Any]] = [
            {
                "family": family,
                "kind": kind,
                "launches_per_invoke": acc["n"],
                "device_ms_per_invoke": acc["ms"],
                "percent": 100.0 * acc["ms"] / busy if busy else 0.0,
                "flops_per_invoke": acc["fl"],
                # Achieved rate, where the delegate counted the work and the device took time.
                "gflops": acc["fl"] / acc["ms"] / 1e6 if acc["fl"] and acc["ms"] else None,
            }
            for (family, kind), acc in families.items()
        ]
        kernel_rows.sort(key=lambda r: (-r["device_ms_per_invoke"], r["family"]))
        devices = sorted({p.device for _, p in profiled if p.device})
        rows.append(
            {
                "delegate": name,
                "partitions": [i for i, _ in parts],
                "profiled_partitions": [i for i, _ in profiled],
                "device": ", ".join(devices),
                "invokes": min((p.invokes for _, p in profiled), default=0),
                "device_ms_per_invoke": busy,
                "kernels": kernel_rows,
                "reason": "" if profiled else NO_PROFILE,
            }
        )
    return rows


def _method(kernel: DelegateKernel, method: str) -> Any:
    # create_kernel() is not checked when called, so a kernel that does not subclass
    # DelegateKernel (and lacks the defaults) is named here rather than as an AttributeError.
    call = getattr(kernel, method, None)
    if not callable(call):
        raise DelegateError(
            f"{type(kernel).__name__} has no {method}() method: expected a subclass of "
            f"offload.DelegateKernel, found classes {[c.__name__ for c in type(kernel).__mro__]}"
        )
    return call


def _mapping(kernel: DelegateKernel, method: str) -> Mapping[str, Any]:
    reported = _method(kernel, method)()
    if not isinstance(reported, Mapping):
        raise DelegateError(
            f"{type(kernel).__name__}.{method}() must return a mapping, found "
            f"{type(reported).__name__}"
        )
    return reported
