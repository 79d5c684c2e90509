"""Choosing the GPU family's tile and split per (device, product) by timing them at init.

:func:`gemm_chooser` is what a kernel's init asks: None for the CPU family, else a chooser for
the lowering (_tiling). The :class:`Autotuner` times each distinct product's candidates
(_tiling.candidates: a handful of tiles and split-K factors) on the device, on buffers of the
product's real sizes, and keeps the fastest. What it found is kept three ways: in this
process (so partitions and interpreters of one process search once per device and product),
and in the serialization cache beside the program binary, so a warm start does not search at
all. Nothing read back is trusted: an entry that is not the JSON written here, or that names
a choice which is not among the product's candidates, is searched again and rewritten.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyopencl as cl

from offload_gpu_opencl._cache import SerializationCache
from offload_gpu_opencl._device import DeviceHandle, build_program
from offload_gpu_opencl._errors import GpuOpenCLError
from offload_gpu_opencl._ir import SLACK
from offload_gpu_opencl._source import source_hash
from offload_gpu_opencl._tiling import (
    TILED_FLAG,
    FixedChooser,
    GemmChoice,
    GemmChooser,
    GemmProblem,
    candidates,
    parse_choice,
)

if TYPE_CHECKING:
    from offload_gpu_opencl import GpuOpenCLOptions

__all__ = ["Autotuner", "autotunes", "forget_tuning", "gemm_chooser", "tuning_key"]

_FORMAT = 1  # version of the cache entry's layout
_LOCK = threading.Lock()
# (device, driver, build options) -> {problem key: choice name}: this process's searches.
_MEMO: dict[tuple[str, str, str], dict[str, str]] = {}
# Timed runs per candidate, after one untimed run (a driver compiling lazily compiles then);
# the fastest run counts, so one preempted run does not decide. Times are the device's own
# (profiling events on a queue of the tuner's), not the host's: a small product runs for
# microseconds, less than the host spends enqueueing it.
RUNS = 5
_QUEUES: dict[int, cl.CommandQueue] = {}  # id(DeviceHandle) -> the tuner's profiling queue


def gemm_chooser(
    handle: DeviceHandle,
    options: GpuOpenCLOptions,
    build_options: str,
    cache: SerializationCache | None,
    prefix: str,
) -> GemmChooser | None:
    """The chooser a partition's lowering uses: None for the CPU kernel family (a program
    built without _tiling.family_options' flag has no tiled kernel), else the autotuner (on by
    default on GPUs, ``autotune`` overriding) or the rule of thumb."""
    if TILED_FLAG not in build_options.split():
        return None
    units = int(handle.device.max_compute_units)
    if not autotunes(options, handle):
        return FixedChooser(units)
    return Autotuner(units, handle=handle, build_options=build_options, cache=cache, prefix=prefix)


def autotunes(options: GpuOpenCLOptions, handle: DeviceHandle) -> bool:
    """``autotune`` as set, else on for GPUs and off for CPU devices."""
    if options.autotune is not None:
        return options.autotune
    return not handle.device.type & cl.device_type.CPU


def tuning_key(prefix: str, build_options: str) -> str:
    """The cache key of a partition's choices: beside its program's, and like it tied to the
    kernel source (a changed kernel is timed again)."""
    return f"{prefix}:tuning:{source_hash(build_options)}"


def forget_tuning() -> None:
    """Drop this process's memo of searches (tests and cold-start benchmarks use it)."""
    with _LOCK:
        _MEMO.clear()


@dataclass
class Autotuner(GemmChooser):
    """Times the candidates of each product not found in the memo or the cache."""

    handle: DeviceHandle | None = None
    build_options: str = ""
    cache: SerializationCache | None = None
    prefix: str = ""
    searched: int = 0
    from_cache: int = 0
    from_memo: int = 0
    timings: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.handle is not None
        device = self.handle
        self._memo_key = (device.name, device.driver, self.build_options)
        self._key = tuning_key(self.prefix, self.build_options)
        self._dirty = False  # the entry needs writing though nothing new was searched
        self._stored: dict[str, str] = self._load()
        self._program: cl.Program | None = None
        self._buffers: dict[str, tuple[int, cl.Buffer]] = {}

    # -- the cache entry ----------------------------------------------------------------------

    def _load(self) -> dict[str, str]:
        """Choices from the cache entry: names only, each checked when its product comes up."""
        if self.cache is None:
            return {}
        payload = self.cache.load(self._key, "json")
        if payload is None:
            return {}
        try:
            data = json.loads(payload)
            choices = data["choices"]
            if data.get("format") != _FORMAT or not isinstance(choices, dict):
                raise ValueError("not this format")
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            self.cache.discard(self._key, "json", f"unreadable tuning entry ({exc})")
            self._dirty = True
            return {}
        return {str(k): v for k, v in choices.items() if isinstance(v, str)}

    def done(self) -> None:
        self._buffers.clear()
        self._program = None
        if self.cache is None or not (self._dirty or set(self.chosen) - set(self._stored)):
            return
        choices = {**self._stored, **self.chosen}
        payload = {"format": _FORMAT, "choices": choices}
        self.cache.store(self._key, "json", json.dumps(payload, sort_keys=True).encode())
        self._stored = dict(choices)
        self._dirty = False

    # -- choosing -----------------------------------------------------------------------------

    def choose(self, problem: GemmProblem) -> GemmChoice:
        allowed = {c.name: c for c in candidates(problem, self.units)}
        with _LOCK:
            name = _MEMO.get(self._memo_key, {}).get(problem.key)
        if name in allowed:
            self.from_memo += 1
            return self._keep(problem, allowed[name])
        stored = parse_choice(self._stored.get(problem.key))
        if stored is not None and stored.name in allowed:
            self.from_cache += 1
            return self._keep(problem, stored)
        if problem.key in self._stored:  # a name that is no candidate of this product
            self._dirty = True
        self.searched += 1
        return self._keep(problem, self._search(problem, list(allowed.values())))

    def _keep(self, problem: GemmProblem, choice: GemmChoice) -> GemmChoice:
        self.chosen[problem.key] = choice.name
        with _LOCK:
            _MEMO.setdefault(self._memo_key, {})[problem.key] = choice.name
        return choice

    def _search(self, problem: GemmProblem, choices: list[GemmChoice]) -> GemmChoice:
        times: dict[str, float] = {}
        for choice in choices:
            try:
                times[choice.name] = self._time(problem, choice)
            except cl.Error:
                continue  # a tile this device cannot run (resources): not a candidate here
        self.timings[problem.key] = times
        if not times:
            raise GpuOpenCLError(
                f"no tiled kernel ran on {self.handle.name if self.handle else '?'} for "
                f"{problem.key}; kernel_family='cpu' avoids them"
            )
        best = min(times, key=lambda name: times[name])
        return next(c for c in choices if c.name == best)

    def summary(self) -> dict[str, Any]:
        return {
            **super().summary(),
            "autotuned": True,
            "searched": self.searched,
            "from_cache": self.from_cache,
            "from_memo": self.from_memo,
            # What this chooser timed (products found in the memo or cache were not):
            # device microseconds per candidate, the evidence behind each choice.
            "timed_us": {
                key: {name: round(seconds * 1e6, 2) for name, seconds in times.items()}
                for key, times in self.timings.items()
            },
        }

    # -- timing -------------------------------------------------------------------------------

    def _time(self, problem: GemmProblem, choice: GemmChoice) -> float:
        """Device seconds of one run of ``choice`` on ``problem``: the fastest of RUNS."""
        queue = self._queue()
        calls = self._calls(problem, choice)
        for kernel, global_size, local_size in calls:
            cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
        queue.finish()
        runs = [[cl.enqueue_nd_range_kernel(queue, *call) for call in calls] for _ in range(RUNS)]
        queue.finish()
        return min(sum(e.profile.end - e.profile.start for e in run) for run in runs) * 1e-9

    def _queue(self) -> cl.CommandQueue:
        """A timestamping queue on the device, the tuner's own (the kernels' queue does not
        pay for timestamps)."""
        assert self.handle is not None
        with _LOCK:
            queue = _QUEUES.get(id(self.handle))
            if queue is None:
                profiling = cl.command_queue_properties.PROFILING_ENABLE
                queue = cl.CommandQueue(
                    self.handle.context, self.handle.device, properties=profiling
                )
                _QUEUES[id(self.handle)] = queue
        return queue

    def _calls(
        self, problem: GemmProblem, choice: GemmChoice
    ) -> list[tuple[cl.Kernel, tuple[int, ...], tuple[int, ...]]]:
        """The launches of ``choice`` as the lowering makes them (no epilogue), on zeroed
        buffers of the product's sizes."""
        program = self._get_program()
        m, k, co = problem.m, problem.k, problem.co
        co8 = -(-co // 8) * 8
        if problem.kind in ("conv", "dw"):
            h, w, ci, oh, ow = problem.geometry[:5]
            x_count = -(-m // (oh * ow)) * h * w * ci
        else:
            x_count = m * k
        tile, slices = choice.tile, choice.slices(k)
        x = self._buffer("x", x_count)
        weights = self._buffer("w", k * co8)
        bias = self._buffer("b", co8)
        zero = self._buffer("zero", 8)
        y = self._buffer("y", m * co)
        part = self._buffer("part", slices * m * co) if slices > 1 else zero
        tiles = -(-co // tile.bn) * -(-m // tile.bm)
        count = self._buffer("count", tiles) if slices > 1 else zero  # zeroed: see _buffer
        ints = [np.int32(v) for v in (m, k, co, *problem.geometry, choice.slice_length(k), co, 0)]
        flags = [np.int32(0)] * 6  # the epilogue's and a pooled residual's: all off
        # A "dw" product also reads the depthwise weights and bias, and takes its activation;
        # a "gemm" one takes a gate (timed without: its loads are a small part of A's).
        extra: list[cl.Buffer] = []
        if problem.kind == "dw":
            kh, kw = problem.geometry[5:7]
            c8 = -(-k // 8) * 8
            extra = [self._buffer("dw_w", kh * kw * c8), self._buffer("dw_b", c8)]
            flags.append(np.int32(0))
        elif problem.kind == "gemm":
            extra = [zero]
            flags += [np.int32(0), np.int32(0)]
        tx, ty, _ = tile.local
        tiled = cl.Kernel(program, f"t{problem.kind}_{tile.name}")
        tiled.set_args(x, weights, bias, zero, zero, *extra, y, part, count, *ints, *flags)
        grid = (-(-co // tile.bn) * tx, -(-m // tile.bm) * ty, slices)
        return [(tiled, grid, tile.local)]

    def _get_program(self) -> cl.Program:
        if self._program is None:
            assert self.handle is not None
            self._program, _ = build_program(
                self.handle, self.build_options, self.cache, self.prefix
            )
        return self._program

    def _buffer(self, name: str, count: int) -> cl.Buffer:
        """A zeroed device buffer of at least ``count`` elements (+ slack), reused across
        candidates and products and grown as needed; 4 bytes per element covers every
        storage type."""
        assert self.handle is not None
        need = (count + SLACK) * 4
        held = self._buffers.get(name)
        if held is None or held[0] < need:
            zeros = np.zeros(need // 4, np.float32)
            flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
            buffer = cl.Buffer(self.handle.context, flags, hostbuf=zeros)
            self._buffers[name] = held = (need, buffer)
        return held[1]
