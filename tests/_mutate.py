"""Structure-aware mutation of .tflite files, for fuzzing the loader and the interpreter.

Random bytes mostly break the flatbuffer itself, which the loader rejects at once. The lies
that reach deeper are well-formed files whose numbers are wrong, so most mutations here
rewrite one number where the schema keeps it: a tensor's shape entry, a node's input or
output index, a tensor's buffer index or type, a quantization scale or zero point. The edit
is made in place, so every offset in the file stays valid.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

import tflite

__all__ = ["mutate", "INTERESTING_INTS", "INTERESTING_FLOATS"]

# Values that break sizes, indices and arithmetic: zero, negatives, the edges of int32,
# products that wrap in 64 bits, and off-by-one neighbours of real values (added per site).
INTERESTING_INTS = (0, 1, -1, -2, 2, 3, 7, 255, 256, 4096, 23297, 2**16, 2**20, 2**31 - 1, -(2**31))
INTERESTING_FLOATS = (0.0, -0.0, -1.0, 1e-45, 1e-30, 1e30, 3.4e38, float("nan"), float("inf"))

Site = tuple[str, int]  # (struct format, byte offset) of one number in the file


def _vector_sites(table: object, field_offset: int, fmt: str) -> list[Site]:
    tab = table._tab  # type: ignore[attr-defined]
    o = tab.Offset(field_offset)
    if o == 0:
        return []
    start = tab.Vector(o)
    size = struct.calcsize(fmt)
    return [(fmt, start + j * size) for j in range(tab.VectorLen(o))]


def _scalar_site(table: object, field_offset: int, fmt: str) -> list[Site]:
    tab = table._tab  # type: ignore[attr-defined]
    o = tab.Offset(field_offset)
    return [(fmt, tab.Pos + o)] if o else []


def _sites(content: bytes) -> dict[str, list[Site]]:
    """Where each kind of number lives in this file (vtable field offsets per tflite schema)."""
    model = tflite.Model.GetRootAs(content, 0)
    found: dict[str, list[Site]] = {"shape": [], "index": [], "buffer": [], "type": []}
    found |= {"scale": [], "zero_point": [], "qdim": []}
    for s in range(model.SubgraphsLength()):
        sg = model.Subgraphs(s)
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            found["shape"] += _vector_sites(t, 4, "<i")
            found["type"] += _scalar_site(t, 6, "<b")
            found["buffer"] += _scalar_site(t, 8, "<I")
            q = t.Quantization()
            if q is not None:
                found["scale"] += _vector_sites(q, 8, "<f")
                found["zero_point"] += _vector_sites(q, 10, "<q")
                found["qdim"] += _scalar_site(q, 16, "<i")
        for n in range(sg.OperatorsLength()):
            op = sg.Operators(n)
            found["index"] += _vector_sites(op, 6, "<i") + _vector_sites(op, 8, "<i")
        found["index"] += _vector_sites(sg, 6, "<i") + _vector_sites(sg, 8, "<i")
    return {k: v for k, v in found.items() if v}


def _new_value(fmt: str, old: float, rng: random.Random) -> float:
    if fmt == "<f":
        return rng.choice([*INTERESTING_FLOATS, old * rng.choice((2.0**-20, 0.5, 2.0, 2.0**20))])
    picks: list[float] = [*INTERESTING_INTS, old + 1, old - 1, old * 2]
    value = int(rng.choice(picks))
    bits = struct.calcsize(fmt) * 8
    if fmt.islower() and fmt != "<b":
        value = max(min(value, 2 ** (bits - 1) - 1), -(2 ** (bits - 1)))
    elif fmt == "<b":
        value = rng.randrange(-2, 20)
    else:
        value %= 2**bits
    return value


def mutate(content: bytes, rng: random.Random, edits: int = 1) -> bytes:
    """``content`` with ``edits`` numbers rewritten (or, one time in ten, raw bytes flipped)."""
    data = bytearray(content)
    sites = _sites(content)
    mutators: list[Callable[[], None]] = []

    def rewrite_number() -> None:
        kind = rng.choice(sorted(sites))
        fmt, offset = rng.choice(sites[kind])
        (old,) = struct.unpack_from(fmt, data, offset)
        struct.pack_into(fmt, data, offset, _new_value(fmt, old, rng))

    def flip_bytes() -> None:
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)

    if sites:
        mutators += [rewrite_number] * 9
    mutators.append(flip_bytes)
    for _ in range(edits):
        rng.choice(mutators)()
    return bytes(data)
