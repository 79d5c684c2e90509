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

from offload._delegate import DelegateKernel
from offload._graph import Model, Node, OpOptions, Subgraph, Tensor
from offload.errors import DelegateError

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


def reported_bytes(kernel: DelegateKernel) -> dict[str, int]:
    """What a delegate kernel says it holds (``memory_bytes()``), as {"device", "host"}.

    A key the kernel leaves out counts 0, as does the base class's empty default.
    """
    reported = _mapping(kernel, "memory_bytes")
    return {key: int(reported.get(key, 0) or 0) for key in ("device", "host")}


def reported_stats(kernel: DelegateKernel) -> dict[str, Any]:
    """A delegate kernel's own figures (``stats()``: cache hits, launches, ...), as a copy."""
    return dict(_mapping(kernel, "stats"))


def _mapping(kernel: DelegateKernel, method: str) -> Mapping[str, Any]:
    # create_kernel() is not checked when called, so a kernel that does not subclass
    # DelegateKernel (and lacks the defaults) is named here rather than as an AttributeError.
    call = getattr(kernel, method, None)
    if not callable(call):
        raise DelegateError(
            f"{type(kernel).__name__} has no {method}() method: expected a subclass of "
            f"offload.DelegateKernel, found classes {[c.__name__ for c in type(kernel).__mro__]}"
        )
    reported = call()
    if not isinstance(reported, Mapping):
        raise DelegateError(
            f"{type(kernel).__name__}.{method}() must return a mapping, found "
            f"{type(reported).__name__}"
        )
    return reported
