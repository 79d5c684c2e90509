"""What the Interpreter's introspection methods measure: bytes held, delegates' own reports.

CPU kernels keep what ``setup`` made (weights in GEMM layout, tiled biases, lookup tables) as
ordinary attributes, often inside helper objects of their own. Rather than ask 96 kernels to
count their arrays, the arrays are found by walking the kernel's attributes: an array counts
once per allocation (views share their root's memory), and only when it owns its memory, so
views of the model file (constants, memory-mapped or not) never count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from offload._graph import Model, Node, OpOptions, Subgraph, Tensor

__all__ = ["array_root", "held_bytes", "reported_bytes", "reported_stats"]

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


def reported_bytes(kernel: Any) -> dict[str, int]:
    """What a delegate kernel says it holds (``memory_bytes()``), as {"device", "host"}."""
    method = getattr(kernel, "memory_bytes", None)
    reported = method() if callable(method) else None
    if not isinstance(reported, Mapping):
        return {"device": 0, "host": 0}
    return {key: int(reported.get(key, 0) or 0) for key in ("device", "host")}


def reported_stats(kernel: Any) -> dict[str, Any]:
    """A delegate kernel's own figures (``stats()``: cache hits, launches, ...), else {}.

    A ``stats`` mapping attribute is read as well, the form gpu_opencl used before the
    method existed.
    """
    stats = getattr(kernel, "stats", None)
    if callable(stats):
        stats = stats()
    return dict(stats) if isinstance(stats, Mapping) else {}
