"""The GPU kernel family: tiled GEMM for CONV_2D and FULLY_CONNECTED, chosen per device class.

The CPU family (``matmul_*`` / ``conv2d_*``, register-blocked for PoCL's CPU driver: groups of
16 items, a few thousand items per launch) leaves a GPU mostly idle. The GPU family runs the
same products as local-memory tiled GEMMs (cl/tgemm.cl): groups of 256 items, a BM x BN tile
each (:data:`TILES`), and for short products with a long K a *split-K*: the NDRange's third
dimension slices K, the slices' partial sums go to a float32 work buffer, and the last group of
each tile to finish adds them up and runs the epilogue. Both families read the same
pre-transformed weights ([K][Co8]) and run the same fused epilogue, so fusion and the constants
cache are shared.

A :class:`GemmProblem` is one product as the kernels see it; a :class:`GemmChoice` (tile and
split) is how to run it; a :class:`GemmChooser` picks one per problem: :class:`FixedChooser`
by a rule of thumb, the autotuner (_autotune) by timing the candidates on the device.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyopencl as cl

from offload import Node
from offload_gpu_opencl._errors import ShapeCheckError
from offload_gpu_opencl._ir import BLOCKS, INT_MAX, SLACK, Lowering, Ref
from offload_gpu_opencl._reach import register_reach
from offload_gpu_opencl._shapes import need
from offload_gpu_opencl._source import DW_TILES, TILES, blocking

__all__ = [
    "FAMILIES",
    "RULE_TILES",
    "TILED_FLAG",
    "FixedChooser",
    "GemmChoice",
    "GemmChooser",
    "GemmProblem",
    "Tile",
    "candidates",
    "default_choice",
    "family_for",
    "family_options",
    "launch_gemm",
    "launch_matmul",
    "parse_choice",
]

FAMILIES = ("auto", "cpu", "gpu")
# The build option that compiles the GPU family's kernels in (cl/tgemm.cl): only programs that
# launch them carry them, since PoCL compiles every kernel of a program to hand out its binary.
TILED_FLAG = "-DTILED_GEMM"
TK = 16  # the K step of tgemm.cl (its local tiles' depth)
SPLITS = (1, 2, 4, 8, 16, 32)
# A K slice shorter than this many steps spends more on partial sums than it saves.
MIN_SLICE_STEPS = 4
_ITEMS = 256  # work-items per group of every tile


@dataclass(frozen=True)
class Tile:
    """A tgemm.cl instance: BM x BN outputs per group, RM x RN per work-item."""

    bm: int
    bn: int
    rm: int
    rn: int

    @property
    def name(self) -> str:
        return f"{self.bm}x{self.bn}"

    @property
    def local(self) -> tuple[int, int, int]:
        return (self.bn // self.rn, self.bm // self.rm, 1)

    @property
    def local_bytes(self) -> int:
        """Local memory of one group in float32 (the A tile has a column of padding)."""
        return 4 * TK * (self.bm + 1 + self.bn)


TILE_LIST = tuple(Tile(*t) for t in TILES)
DW_TILE_LIST = tuple(Tile(*t) for t in DW_TILES)  # a "dw" product's (tdw_* instances)
_TILES = {t.name: t for t in TILE_LIST}
# The rule of thumb's tiles, tallest first. Timed on an H100 (benchmarks/RESULTS.md), these two
# won 192 of the 202 products of the face models, MobileNetV2 and InceptionV3: at batch 1 the
# products are short, and more, smaller groups beat more reuse per group.
RULE_TILES = (_TILES["32x32"], _TILES["16x64"])


@dataclass(frozen=True)
class GemmProblem:
    """One product y[M, Co] = A[M, K] @ w[K, Co8]: ``kind`` "gemm" (A is the input's rows) or
    "conv" (A gathered from an NHWC input through a KH x KW window); ``geometry`` the conv's
    (H, W, Ci, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL), zeros for a gemm."""

    kind: str
    m: int
    k: int
    co: int
    geometry: tuple[int, ...] = (0,) * 13

    @property
    def key(self) -> str:
        """A stable text key (the autotuner's cache entries are keyed by it)."""
        return f"{self.kind}:{self.m}:{self.k}:{self.co}:" + ",".join(map(str, self.geometry))

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.co


@dataclass(frozen=True)
class GemmChoice:
    """How to run a problem: a tile, and how many slices K is split into (1: no split)."""

    tile: Tile
    split: int

    @property
    def name(self) -> str:
        return f"{self.tile.name}/s{self.split}"

    def slice_length(self, k: int) -> int:
        """K per slice, a whole number of TK steps."""
        per = -(-max(k, 1) // self.split)
        return -(-per // TK) * TK

    def slices(self, k: int) -> int:
        """Slices actually launched (fewer than ``split`` when K is short)."""
        return -(-max(k, 1) // self.slice_length(k))


_CHOICE = re.compile(r"^(\d+x\d+)/s(\d+)$")


def parse_choice(text: object) -> GemmChoice | None:
    """The choice a name stands for, or None when it names none (a cache entry is not
    trusted: an unknown tile or split is no choice)."""
    if not isinstance(text, str):
        return None
    match = _CHOICE.match(text)
    if match is None or match[1] not in _TILES or int(match[2]) not in SPLITS:
        return None
    return GemmChoice(_TILES[match[1]], int(match[2]))


def _groups(problem: GemmProblem, tile: Tile) -> int:
    return -(-problem.m // tile.bm) * -(-problem.co // tile.bn)


def candidates(problem: GemmProblem, units: int) -> list[GemmChoice]:
    """The handful the autotuner times: every tile unsplit (a "dw" product's: DW_TILE_LIST),
    and each tile split while the groups stay within a few waves of ``units`` compute units
    and a slice keeps MIN_SLICE_STEPS steps of K."""
    found = []
    for tile in DW_TILE_LIST if problem.kind == "dw" else TILE_LIST:
        groups = _groups(problem, tile)
        for split in SPLITS:
            if split > 1 and (
                groups * split > 4 * units or problem.k < split * MIN_SLICE_STEPS * TK
            ):
                break
            found.append(GemmChoice(tile, split))
    return found


def default_choice(problem: GemmProblem, units: int) -> GemmChoice:
    """The rule of thumb where nothing is timed: the tallest tile no taller than M that still
    gives every compute unit a group, else the shortest; then split K while the groups fill
    fewer than ``units`` units and a slice keeps MIN_SLICE_STEPS steps."""
    shortest = RULE_TILES[-1]
    tile = next(
        (
            t
            for t in RULE_TILES
            if t.bm <= max(problem.m, shortest.bm) and _groups(problem, t) >= units
        ),
        shortest,
    )
    groups, split = _groups(problem, tile), 1
    while (
        split < SPLITS[-1]
        and groups * split < units
        and problem.k >= 2 * split * MIN_SLICE_STEPS * TK
    ):
        split *= 2
    return GemmChoice(tile, split)


def family_for(requested: str, device: cl.Device) -> str:
    """``"cpu"`` or ``"gpu"``: ``auto`` takes the GPU family on every device that is not a
    CPU. Either is honoured when asked for by name, except that a device which cannot run a
    256-item group or hold its local tiles gets the CPU family (every device runs that)."""
    if requested not in FAMILIES:
        raise ValueError(f"kernel_family must be one of {FAMILIES}, found {requested!r}")
    family = requested
    if family == "auto":
        family = "cpu" if device.type & cl.device_type.CPU else "gpu"
    if family == "gpu" and not gpu_capable(device):
        return "cpu"
    return family


def family_options(requested: str, device: cl.Device) -> list[str]:
    """The program build options the kernel family of ``requested`` on ``device`` needs."""
    return [TILED_FLAG] if family_for(requested, device) == "gpu" else []


def gpu_capable(device: cl.Device) -> bool:
    most_local = max(t.local_bytes for t in TILE_LIST)
    return int(device.max_work_group_size) >= _ITEMS and int(device.local_mem_size) >= most_local


@dataclass
class GemmChooser:
    """Picks a :class:`GemmChoice` per problem; counts what it did (for the kernel's stats)."""

    units: int
    chosen: dict[str, str] = field(default_factory=dict)

    def choose(self, problem: GemmProblem) -> GemmChoice:
        raise NotImplementedError("need choose")

    def done(self) -> None:
        """The lowering is over: keep what was chosen where a later init finds it and free
        what choosing held (nothing, unless it timed)."""

    def summary(self) -> dict[str, Any]:
        """What was chosen: the count of products, and per product key the choice's name."""
        return {"family": "gpu", "problems": len(self.chosen), "choices": dict(self.chosen)}


@dataclass
class FixedChooser(GemmChooser):
    """The rule of thumb (:func:`default_choice`), nothing timed."""

    def choose(self, problem: GemmProblem) -> GemmChoice:
        choice = default_choice(problem, self.units)
        self.chosen[problem.key] = choice.name
        return choice


def launch_matmul(
    lw: Lowering,
    node: Node,
    x: Ref,
    weights: Ref,
    bias: Ref,
    epilogue: tuple[list[Ref], list[int]],
    p: int,
    k: int,
    co: int,
    gate: tuple[Ref, int, int] | None = None,
) -> None:
    """(p, k) @ weights [k][co8] + bias, then the node's fused epilogue: the tiled GEMM in the
    GPU family, the register-blocked matmul in the CPU family (1x1 CONV_2D and
    FULLY_CONNECTED alike). ``gate`` (GPU family only, see launch_gemm): x scaled per image
    and channel as it loads."""
    if lw.gemm is not None:
        launch_gemm(lw, node, GemmProblem("gemm", p, k, co), x, weights, bias, epilogue, gate=gate)
        return
    assert gate is None, "a gated product runs in the GPU family only"
    bufs, flags = epilogue
    r, v = blocking(co, p)
    counts = (-(-co // (8 * v)), -(-p // r))
    lw.launch(
        node, f"matmul_{r}x{v}", counts, x, weights, bias, *bufs, p, k, co, *flags, local=BLOCKS
    )


def launch_gemm(
    lw: Lowering,
    node: Node,
    problem: GemmProblem,
    x: Ref,
    weights: Ref,
    bias: Ref,
    epilogue: tuple[list[Ref], list[int]],
    depthwise: tuple[Ref, Ref, int] | None = None,
    gate: tuple[Ref, int, int] | None = None,
) -> None:
    """Enqueue ``problem`` in the GPU family: one tiled launch with the epilogue (split-K
    slices summed by the last group of each tile). ``depthwise``: for a "dw" problem, the
    depthwise convolution's weights, bias and activation code, which its A loader computes.
    ``gate``: for a "gemm" problem, a gate tensor [images][K], the rows of A per image, and
    the activation code of the MUL it stands for (x * gate, computed as A loads)."""
    assert lw.gemm is not None
    choice = lw.gemm.choose(problem)
    tile, slices = choice.tile, choice.slices(problem.k)
    (res, alpha, y), flags = epilogue
    m, k, co = problem.m, problem.k, problem.co
    # Rows of y are ``stride`` apart from channel ``offset`` on: a CONCATENATION input is
    # written into the concatenation's output (_fusion), else its own tensor.
    target, stride, offset = lw.placed.get(int(y.key), (int(y.key), co, 0))
    y = Ref("t", target)
    if slices * m * co > INT_MAX - SLACK:
        raise ShapeCheckError(
            f"split-K partial sums of {slices} x {m} x {co} values pass the 32-bit indices"
        )
    tiles = -(-co // tile.bn) * -(-m // tile.bm)
    part = lw.work("split_k", slices * m * co) if slices > 1 else lw.zeros(8)
    # The split tiles' arrival counts (int32 in a work buffer: zero at setup, and each launch
    # leaves them zero again).
    count = lw.work("split_k_count", tiles) if slices > 1 else lw.zeros(8)
    tx, ty, _ = tile.local
    lw.launch(
        node,
        f"t{problem.kind}_{tile.name}",
        (-(-co // tile.bn) * tx, -(-m // tile.bm) * ty, slices),
        x,
        weights,
        bias,
        res,
        alpha,
        *(depthwise[:2] if depthwise else ()),
        *((gate[0] if gate else lw.zeros(8),) if problem.kind == "gemm" else ()),
        y,
        part,
        count,
        m,
        k,
        co,
        *problem.geometry,
        choice.slice_length(k),
        stride,
        offset,
        *flags,
        *lw.residual_pool(node),
        *((depthwise[2],) if depthwise else ()),
        *((gate[1:] if gate else (0, 0)) if problem.kind == "gemm" else ()),
        local=tile.local,
    )


# -- reach (see _reach): what each launch of these kernels may touch ---------------------------

Span = tuple[int, int]
_NOTHING: Span = (0, 0)


def _c8(c: int) -> int:
    return -(-c // 8) * 8


def _reach_tiled(conv: bool, dw: bool = False) -> Callable[[list, tuple[int, ...]], list[Span]]:
    def reach(a: list, g: tuple[int, ...]) -> list[Span]:
        m, k, co, h, w, ci, oh, ow, kh, kw = a[:10]
        ks, ys, yo, rc, prelu = a[16], a[17], a[18], a[20], a[22]
        pool, pool_w = a[23:25]  # a pooled residual's window and output width
        need(ks >= 1, f"K slice of {ks}")
        need(not dw or k == ci, f"a depthwise-fed product's K ({k}) is its channels ({ci})")
        slices = g[2]
        if conv:
            need(oh >= 1 and ow >= 1 and ci >= 1, f"conv geometry {a[3:16]}")
            images = -(-m // (oh * ow))
            x = (0, images * h * w * ci)
        else:
            x = (0, m * k)
        split = slices > 1
        tiles = g[0] * g[1] // _ITEMS  # groups over M and Co: every tile is one of 256 items
        depthwise = [(0, kh * kw * _c8(ci)), (0, _c8(ci))] if dw else []
        gate = []
        if not conv:  # the gate: one row of K per image of ``rows`` rows of A
            rows = a[25]
            need(rows >= 0, f"gate rows per image {rows}")
            gate = [(0, -(-m // rows) * k) if rows > 0 else _NOTHING]
        return [
            x,
            (0, k * _c8(co)),
            (0, _c8(co)),
            _residual(m, rc, pool, pool_w),
            (0, co * bool(prelu)),
            *gate,
            *depthwise,
            _rows(m, co, ys, yo),
            (0, slices * m * co) if split else _NOTHING,
            (0, tiles) if split else _NOTHING,
        ]

    return reach


def _residual(m: int, rc: int, pool: int, pool_w: int) -> Span:
    """The residual's reads: ``rc`` values per output row, or with a pooled residual (2 x 2
    windows, ``pool_w`` output pixels per row) the window of each of the ``m`` output pixels,
    whose corner is input pixel 2p + 2 pool_w (p // pool_w) (epilogue1.cl)."""
    if pool <= 0 or m <= 0:
        return 0, m * rc
    need(pool == 2 and pool_w >= 1, f"pooled residual of {pool} x {pool} windows, {pool_w} wide")
    last = 2 * (m - 1) + 2 * pool_w * ((m - 1) // pool_w)
    return 0, (last + 2 * pool_w + 2) * rc


def _rows(m: int, co: int, stride: int, offset: int) -> Span:
    """Stores of ``m`` rows of ``co`` values, ``stride`` apart from ``offset`` on."""
    if m <= 0 or co <= 0:
        return _NOTHING
    need(0 <= offset and co + offset <= stride, f"rows of {co} at {offset} in rows of {stride}")
    return offset, (m - 1) * stride + offset + co


register_reach("tgemm", _reach_tiled(False), written=3)
register_reach("tconv", _reach_tiled(True), written=3)
register_reach("tdw", _reach_tiled(True, dw=True), written=3)
