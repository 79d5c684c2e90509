"""The OpenCL C program: the kernel families in ``cl/*.cl``, put together.

All tensors are dense NHWC buffers of ``store_t`` with 16 elements of slack at the end, so
8-wide channel loads never leave the buffer. Shapes are arguments, so one program serves every
partition on a device. Storage/compute modes, chosen by build options:

``-DSTORE_HALF``: tensors stored as half, computed in float;
``-DSTORE_HALF -DCOMPUTE_HALF``: stored and computed in half (needs cl_khr_fp16);
neither: float32 throughout.

``-DPLAIN_ACCESS`` (set for CPU devices) loads and stores 8-wide vectors by dereferencing an
unaligned vector type and converts halves with integer operations, instead of calling
``vload8`` / ``vload_half``: PoCL's CPU driver calls OpenCL builtins out of line, and a call in
an inner loop spills every accumulator (measured 5x slower for the matmul). For the same reason
the kernels use ``IMIN`` / ternaries instead of ``min`` / ``fmax``, ``#pragma unroll`` keeps
register-blocked accumulators in registers (PoCL does not unroll those loops on its own) and
helpers are ``always_inline``. With half storage there, convolution parameters (``param_t``:
weights, bias, PRELU slopes) stay float32, since converting them costs more than the multiply.

Kernel shapes (all guard the rounded-up NDRange against the real extents):

* convolutions and matmuls: one work-item computes R output pixels x 8*V channels (register
  blocked; a 2-D NDRange of channel blocks x pixel blocks) and applies a fused *epilogue*:
  activation, residual ADD (channels past ``RC`` read as zero: an absorbed channel PAD), the
  ADD's activation, PRELU;
* 3x3 depthwise convolutions: 8 channels x 4 horizontally adjacent pixels, weights in
  registers, a fast path for windows inside the image (3-D NDRange: channel block, x block, row);
* elementwise ops, pools, resize: 8 channels (or 8 consecutive elements) per work-item;
* the GPU family (_tiling): local-memory tiled GEMM (``tgemm``) and implicit-GEMM convolution
  (``tconv``) over work-groups of 256 items, one instance per tile in :data:`TILES`, split
  over K where that pays (the last group of a tile adds the slices up). Compiled in only with
  ``-DTILED_GEMM`` (_tiling).

Files: ``cl/prelude.cl`` comes first; every other ``cl/<family>.cl`` is one kernel family (the
unit a build failure is narrowed down to); ``cl/parts/*.cl`` are pieces that templates include.
A file's leading ``//`` lines document it and are not compiled in, so editing them leaves the
source hash, and with it every cache entry, as it was. Templates (:data:`TEMPLATES`) are
instantiated once per parameter set: ``{NAME}`` is replaced by the value, and a line
``// @include part.cl KEY=value ...`` by that part, with each KEY in it replaced by its value.
"""

from __future__ import annotations

import hashlib
from importlib.resources import files

__all__ = [
    "BLOCKINGS",
    "DW_TILES",
    "KERNELS",
    "PRELUDE",
    "TEMPLATES",
    "TILES",
    "blocking",
    "program_source",
    "source_hash",
]

_CL = files("offload_gpu_opencl") / "cl"
_INCLUDE = "// @include "

# (R, V) instances of the register-blocked kernels the lowering may choose (see blocking).
BLOCKINGS = ((6, 2), (8, 1), (4, 1), (1, 2))

# (BM, BN, RM, RN) instances of the tiled kernels (tgemm.cl): a BM x BN output tile per
# work-group of (BN / RN) x (BM / RM) = 256 items, RM x RN outputs per item. One group size
# for all, a multiple of every GPU's preferred multiple (32 on NVIDIA, 64 on AMD). Long (128),
# mid-size (64) and short (32) products 64 channels wide; 8 x 8 outputs per item for wide
# products (more reuse per local-memory read); a tall, narrow tile for the 16-32 channel
# layers of mobile networks; and the small tiles that won nearly every product of the face
# models, MobileNetV2 and InceptionV3 when timed on an H100 (more groups for short products;
# _tiling.RULE_TILES).
TILES = (
    (128, 64, 8, 4),
    (64, 64, 4, 4),
    (32, 64, 2, 4),
    (128, 128, 8, 8),
    (64, 128, 4, 8),
    (256, 32, 8, 4),
    (16, 64, 1, 4),
    (32, 32, 2, 2),
)
# The tiles of the fused depthwise products (tdw_*): timed on an H200 (session 18), 16x64 won
# 59 of the 65 fused products of the face models and MobileNets, 32x32 5 and 32x64 1. A taller
# or wider tile computes the depthwise taps of more rows for each column tile and never won,
# and each tdw instance costs the driver's compiler as much as a plain one.
DW_TILES = ((16, 64, 1, 4), (32, 32, 2, 2), (32, 64, 2, 4))


def _tgemm(
    kind: str, conv: int, dw: int, bm: int, bn: int, rm: int, rn: int
) -> dict[str, int | str]:
    """One tgemm.cl parameter set: the tile, and AE/BE, the A and B elements each item loads."""
    return {
        "KIND": kind,
        "CONV": conv,
        "DW": dw,
        "BM": bm,
        "BN": bn,
        "RM": rm,
        "RN": rn,
        "AE": bm * 16 // 256,
        "BE": 16 * bn // 256,
    }


# Families compiled once per parameter set.
TEMPLATES: dict[str, tuple[dict[str, int | str], ...]] = {
    "matmul": tuple({"R": r, "V": v} for r, v in BLOCKINGS),
    "conv2d": tuple({"R": r, "V": v} for r, v in BLOCKINGS),
    "dw3x3": ({"S": 1, "SPAN": 6}, {"S": 2, "SPAN": 9}),
    "tgemm": tuple(
        _tgemm(kind, conv, dw, bm, bn, rm, rn)
        for kind, conv, dw in (("gemm", 0, 0), ("conv", 1, 0), ("dw", 1, 1))
        for bm, bn, rm, rn in (DW_TILES if dw else TILES)
    ),
}


def blocking(channels: int, rows: int) -> tuple[int, int]:
    """(R rows, V channel blocks of 8) per work-item for matmul/conv2d (one of BLOCKINGS).

    6 x 16 keeps 12 accumulators, 2 weight vectors and a broadcast in 16 AVX registers; it
    wastes a block when the channel blocks are few and odd, so those take 8 x 8. Rows past the
    end are computed (clamped) and dropped, so few rows take short blocks: one row (a final
    1x1-pixel layer streaming its weights, GEMV) takes 1 x 16.
    """
    blocks = (channels + 7) // 8
    if rows == 1:
        return 1, 2
    if rows <= 4:
        return 4, 1
    if blocks >= 2 and (blocks % 2 == 0 or blocks >= 6):
        return 6, 2
    return 8, 1


def _text(name: str) -> str:
    """A .cl file without its leading ``//`` documentation lines."""
    lines = (_CL / name).read_text(encoding="utf-8").splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith("//"):
        start += 1
    return "".join(lines[start:])


def _expand(text: str) -> str:
    """Replace each ``// @include`` line by the part it names, its KEY=value tokens applied."""
    out = []
    for line in text.splitlines(keepends=True):
        if not line.startswith(_INCLUDE):
            out.append(line)
            continue
        part, *tokens = line[len(_INCLUDE) :].split()
        body = _text(f"parts/{part}")
        for key, _, value in (token.partition("=") for token in tokens):
            body = body.replace(key, value)
        out.append(body)
    return "".join(out)


def _family(name: str) -> str:
    # Each family starts after a blank line: the layout the program (and its hash) has had
    # since its kernels were Python strings.
    text = "\n" + _expand(_text(f"{name}.cl"))
    if name not in TEMPLATES:
        return text
    instances = []
    for values in TEMPLATES[name]:
        instance = text
        for key, value in values.items():
            instance = instance.replace("{" + key + "}", str(value))
        instances.append(instance)
    return "".join(instances)


PRELUDE = "\n" + _text("prelude.cl")
KERNELS: dict[str, str] = {
    entry.name.removesuffix(".cl"): _family(entry.name.removesuffix(".cl"))
    for entry in sorted(_CL.iterdir(), key=lambda e: e.name)
    if entry.name.endswith(".cl") and entry.name != "prelude.cl"
}


def program_source() -> str:
    """The whole program: prelude plus every kernel family."""
    return PRELUDE + "".join(KERNELS[name] for name in sorted(KERNELS))


def source_hash(options: str) -> str:
    """sha256 of the program source and build options: part of every program cache key."""
    return hashlib.sha256((program_source() + "\0" + options).encode()).hexdigest()
