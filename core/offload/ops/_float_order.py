"""LiteRT's float accumulation order in the convolution GEMMs: Eigen's, bit for bit.

LiteRT's builtin float CONV_2D on x86 is im2col + Eigen's GEMM (one thread or several),
compiled without FMA: every product is rounded to float32, then added. Eigen's kernel walks
the output channels in packets of 8: for those, each output is one chain over k = 0, 1, ...
in im2col order (filter row, column, input channel), from zero. A remaining half packet of
4 channels keeps two chains (even and odd k) over the largest multiple of 8, adds them, then
the rest of k in order; the last 1-3 channels keep four (k mod 4) over the largest multiple
of 4, add them pairwise ((0 + 1) + (2 + 3)), then the rest. Pixels go in groups of 4; the
last M % 4 are one chain in every channel. The bias comes after, then the activation's
clamp. Found by matching LiteRT bit for bit on builder-made convolutions (random M, K, N;
one thread and the default pool). Past one of Eigen's depth blocks (kc, from the CPU's L1
data cache: 1016 with 48 KiB, 680 with 32 KiB) each block is summed so and the blocks added
in turn (:func:`eigen_depth_blocks`). Tiny products (M + N + K < 20) take other Eigen
paths; a single output pixel or a single output channel is Eigen's matrix-vector product
(:func:`eigen_order_gemv`, :func:`eigen_order_dots`), at any depth. BLAS sums in another
order and differs in the last bit on ~30-60% of outputs.
"""

from __future__ import annotations

import functools
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from offload.ops._exact_gemm import scratch

if TYPE_CHECKING:
    from offload._graph import Subgraph

__all__ = [
    "eigen_depth_blocks",
    "eigen_order_dots",
    "eigen_order_gemv",
    "eigen_order_matmul",
    "float_order_matters",
]

_requantizing_subgraphs: dict[int, bool] = {}


# Pixels per pass of eigen_order_matmul: at least this many, so that numpy runs each
# broadcast product (channels, pixels) as one long loop per channel; below about 2700 its
# buffered iterator gathers several short rows into one buffer and runs ~4x slower.
_ORDERED_MIN_PIXELS = 4096
# ... and about this many products a pass, so the products and the sums stay in L2.
_ORDERED_PASS_ELEMENTS = 1 << 16


@functools.cache
def _l1_data_bytes() -> int:
    """The first CPU's level-1 data cache, as the CPUID Eigen asks reports it (Linux's
    sysfs); 32 KiB, Eigen's x86 default, where it cannot be read."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(root.glob("index*")):
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            if level == "1" and kind in ("Data", "Unified"):
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
                return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return 32 * 1024


def eigen_depth_blocks(depth: int) -> list[slice]:
    """The depth blocks (kc) Eigen's GEMM splits K into: as deep as a packed lhs panel of 8
    rows and an rhs panel of 4 columns fit in the L1 data cache beside their 8 x 4 results,
    a multiple of 8, then evened out so the last block is as long as the others allow
    (computeProductBlockingSizes; found bit for bit against LiteRT for K up to 3000)."""
    most = max(((_l1_data_bytes() - 8 * 4 * 4) // (8 * 4 + 4 * 4)) & ~7, 1)
    if depth <= most:
        return [slice(0, depth)]
    size = most
    if depth % most:
        size = most - 8 * ((most - 1 - depth % most) // (8 * (depth // most + 1)))
    return [slice(k, min(k + size, depth)) for k in range(0, depth, size)]


def eigen_order_matmul(rows: np.ndarray, weights: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``rows`` (M, K) @ ``weights`` (K, N) in float32 with the roundings and the order of
    additions of LiteRT's float CONV_2D (see above): each of Eigen's depth blocks
    (:func:`eigen_depth_blocks`) summed on its own, then the blocks added in turn."""
    blocks = eigen_depth_blocks(weights.shape[0])
    _eigen_block_matmul(rows, weights, out, blocks[0])
    if len(blocks) > 1:
        part = np.empty_like(out)
        for block in blocks[1:]:
            out += _eigen_block_matmul(rows, weights, part, block)
    return out


def _eigen_block_matmul(
    rows: np.ndarray, weights: np.ndarray, out: np.ndarray, block: slice
) -> np.ndarray:
    """One depth block of :func:`eigen_order_matmul`. Over chunks of pixels, one product
    (N, pixels) per k is added to the chains it belongs to, so every pass runs along pixels
    in cache; about five times a BLAS GEMM's cost, so only where the last bit matters."""
    if block != slice(0, weights.shape[0]):
        rows, weights = rows[:, block], weights[block]
    depth, width = weights.shape
    full = width - width % 8
    half = full + (4 if width % 8 >= 4 else 0)
    # (first channel, end, chains, depth the chains cover): the remaining k of a group are
    # added in order to the chains' sum.
    groups = [(0, full, 1, depth)] if full else []
    if half > full:
        groups.append((full, half, 2, depth - depth % 8))
    if width > half:
        groups.append((half, width, 4, depth - depth % 4))
    chunk = max(_ORDERED_MIN_PIXELS, _ORDERED_PASS_ELEMENTS // width)
    size = min(chunk, len(rows))
    product = scratch("ordered_product", width * size, np.float32)
    sums = scratch("ordered_sums", width * size, np.float32)
    # Chains 1-3 of the half packet and the last channels (chain 0 lives in the sums).
    spare = scratch("ordered_chains", 3 * (width - full) * size, np.float32)
    columns = np.ascontiguousarray(rows.T)
    weight_columns = weights[:, :, None]  # (K, N, 1): weights[k] against a row of pixels
    for start in range(0, len(rows), chunk):
        stop = min(start + chunk, len(rows))
        count = stop - start
        acc = sums[: width * count].reshape(width, count)
        p = product[: width * count].reshape(width, count)
        pixels = columns[:, start:stop]
        np.multiply(weight_columns[0], pixels[0], out=acc)
        acc += 0  # Eigen's chains start from zero: 0 + -0 is +0
        if full == width:  # packets of 8 only: one chain a channel (the common case)
            for k in range(1, depth):
                np.multiply(weight_columns[k], pixels[k], out=p)
                np.add(acc, p, out=acc)
        else:
            chains = spare[: 3 * (width - full) * count].reshape(3, width - full, count)
            _ordered_groups(groups, weight_columns, pixels, acc, p, chains, full)
        out[start:stop] = acc.T
    tail = len(rows) % 4
    if tail and full < width:  # the last pixels: one chain in every channel
        last = np.multiply(weights[:, :, None], columns[:, None, -tail:])
        out[-tail:] = np.sum(last, axis=0).T
    return out


def eigen_order_gemv(row: np.ndarray, weights: np.ndarray, out: np.ndarray) -> np.ndarray:
    """One output pixel: ``row`` (K,) @ ``weights`` (K, N) as Eigen's row-major
    matrix-vector product sums it, which LiteRT takes for a single pixel (the 1x1
    squeeze-excite convolutions): each output is a dot product in 4-float SSE lanes, lane
    ``k % 4`` one chain from zero over the largest multiple of 4, the lanes reduced as
    ``(0 + 2) + (1 + 3)``, then the remaining k in order. Products rounded to float32 (no
    FMA). Matched bit for bit against LiteRT for K from 1 to 1000."""
    depth = len(row)
    products = np.multiply(row[:, None], weights, dtype=np.float32)
    packed = depth - depth % 4
    zero = np.zeros((1, weights.shape[1]), np.float32)
    lanes = [
        # accumulate runs along axis 0 one row after another: a chain, unlike add.reduce.
        np.add.accumulate(np.concatenate([zero, products[lane:packed:4]]), axis=0)[-1]
        for lane in range(4)
    ]
    total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3])
    for k in range(packed, depth):
        total += products[k]
    out[...] = total
    return out


def eigen_order_dots(rows: np.ndarray, vector: np.ndarray, out: np.ndarray) -> np.ndarray:
    """One output channel: ``rows`` (M, K) @ ``vector`` (K,) as Eigen's matrix-vector
    product sums each row, the order of :func:`eigen_order_gemv` (4-float lanes from zero,
    reduced as ``(0 + 2) + (1 + 3)``, then the remaining k in order) with the rows as the
    outputs. LiteRT takes it for a convolution with one filter. Matched bit for bit against
    LiteRT for K from 9 to 4608."""
    depth = rows.shape[1]
    packed = depth - depth % 4
    products = np.multiply(rows, vector, dtype=np.float32)
    lanes = []
    for lane in range(4):
        chain = np.zeros(len(rows), np.float32)  # from zero: 0 + -0 is +0
        for k in range(lane, packed, 4):  # in place, one column at a time: no (M, K) copy
            chain += products[:, k]
        lanes.append(chain)
    total, odd = lanes[0], lanes[1]
    total += lanes[2]
    odd += lanes[3]
    total += odd  # (0 + 2) + (1 + 3)
    for k in range(packed, depth):
        total += products[:, k]
    out[...] = total
    return out


def _ordered_groups(
    groups: list[tuple[int, int, int, int]],
    weight_columns: np.ndarray,
    pixels: np.ndarray,
    acc: np.ndarray,
    p: np.ndarray,
    chains: np.ndarray,
    full: int,
) -> None:
    """The chains of :func:`eigen_order_matmul` where a half packet or last channels keep
    several: ``acc`` holds every group's chain 0 (0 + product 0 already in it), ``chains``
    the others of the channels from ``full`` on."""
    depth = len(pixels)
    for k in range(1, depth + 1):
        if k < depth:
            np.multiply(weight_columns[k], pixels[k], out=p)
        for lo, hi, lanes, peel in groups:
            if lanes > 1 and k == peel:
                # The chains summed as Eigen adds its packets: 0 + 1, (0 + 1) + (2 + 3).
                own = chains[:, lo - full : hi - full]
                acc[lo:hi] += own[0]
                if lanes == 4:
                    own[1] += own[2]
                    acc[lo:hi] += own[1]
            if k == depth:
                continue
            lane = k % lanes if k < peel else 0
            if lane == 0:
                acc[lo:hi] += p[lo:hi]
            elif k < lanes:
                np.add(p[lo:hi], 0, out=chains[lane - 1, lo - full : hi - full])
            else:
                chains[lane - 1, lo - full : hi - full] += p[lo:hi]


def float_order_matters(subgraph: Subgraph) -> bool:
    """Whether a float result in ``subgraph`` is turned back into integers: by a hybrid
    kernel (a float input read with constant integer weights: a dynamic-range model, whose
    kernels quantize their float inputs on the fly) or by a QUANTIZE of a float tensor (a
    QAT graph's fake-quant points). There a last-bit difference can move a code by a whole
    step, so the float GEMMs follow LiteRT's accumulation order even where that costs more;
    elsewhere BLAS's faster order is within tolerance. One scan per subgraph, remembered."""
    key = id(subgraph)
    if key not in _requantizing_subgraphs:
        tensors = subgraph.tensors
        found = False
        for node in subgraph.nodes:
            ins = [tensors[i] for i in node.inputs if i >= 0]
            if node.op == "QUANTIZE" and ins and ins[0].dtype == np.float32:
                found = True
            elif any(t.dtype == np.float32 and not t.is_constant for t in ins) and any(
                t.is_constant and t.type_name in ("INT8", "UINT8", "INT4") for t in ins
            ):
                found = True
            if found:
                break
        _requantizing_subgraphs[key] = found
        weakref.finalize(subgraph, _requantizing_subgraphs.pop, key, None)
    return _requantizing_subgraphs[key]
