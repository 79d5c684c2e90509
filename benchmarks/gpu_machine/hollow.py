"""Ship a full-size .tflite through a small transfer: zero its float32 constants here (the file
then compresses to a few KB), refill them there with seeded random values scaled like He
initialisation. Same graph, same shapes, new weights: right for timing and for comparing two
runtimes on the same file, not for accuracy. (After ../shared/tools/hollow_tflite.py.)
Constants of at most SMALL values travel as they are: they are the graph's own numbers (a hard
sigmoid's 3 and 1/6), which a runtime may recognise (gpu_opencl fuses a MUL by 1/6), and
they cost nothing to send.

    python hollow.py zero MODEL.tflite MODEL.tflite.hollow.xz    # here
    python hollow.py fill MODEL.tflite.hollow.xz MODEL.tflite    # there (needs numpy, tflite)

Small models travel whole: ``pack`` compresses a file as it is, ``unpack`` restores it.
"""

from __future__ import annotations

import lzma
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import tflite

SMALL = 16


def float_constants(buf: bytearray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(shape, writable float32 view of the bytes) of each float32 constant of subgraph 0 with
    more than SMALL values."""
    model = tflite.Model.GetRootAsModel(buf, 0)
    graph = model.Subgraphs(0)
    for i in range(graph.TensorsLength()):
        tensor = graph.Tensors(i)
        data = model.Buffers(tensor.Buffer())
        if tensor.Type() != tflite.TensorType.FLOAT32 or data is None:
            continue
        if data.DataLength() <= SMALL * 4:
            continue
        shape = tensor.ShapeAsNumpy() if tensor.ShapeLength() else np.array([1])
        yield shape, data.DataAsNumpy().view(np.float32)


def zero(src: Path, dst: Path) -> None:
    buf = bytearray(src.read_bytes())
    for _, values in float_constants(buf):
        values[:] = 0
    dst.write_bytes(lzma.compress(bytes(buf), preset=6))


def fill(src: Path, dst: Path) -> None:
    buf = bytearray(lzma.decompress(src.read_bytes()))
    rng = np.random.default_rng(0)
    for shape, values in float_constants(buf):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 0
        if len(shape) == 4 and shape[0] == 1:  # depthwise filter [1, H, W, C]: H*W per output
            fan_in = int(shape[1] * shape[2])
        std = np.sqrt(2.0 / fan_in) if fan_in else 0.01
        values[:] = rng.standard_normal(values.size).astype(np.float32) * std
    dst.write_bytes(bytes(buf))


def main(argv: list[str]) -> None:
    modes = {
        "zero": zero,
        "fill": fill,
        "pack": lambda src, dst: dst.write_bytes(lzma.compress(src.read_bytes(), preset=6)),
        "unpack": lambda src, dst: dst.write_bytes(lzma.decompress(src.read_bytes())),
    }
    if len(argv) != 3 or argv[0] not in modes:
        sys.exit(__doc__)
    modes[argv[0]](Path(argv[1]), Path(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
