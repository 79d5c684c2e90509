"""Enqueueing an invoke's launches for the least host time.

A small model makes 40-120 launches per invoke, and on a GPU each costs the host several
microseconds in the driver: more than many of the kernels take on the device. The launches never
change between invokes (arguments are set once at init), so they are prepared once:

* ``command_buffer``: ``cl_khr_command_buffer`` records every launch at init; an invoke
  enqueues the recorded buffer, one call whatever the launch count.
* ``direct``: each launch one call of the OpenCL library's ``clEnqueueNDRangeKernel`` with its
  arguments made once as C values, and no event asked for. pyopencl makes an event for every
  launch (and frees it later): on an NVIDIA H200 an empty launch cost the host 8.2 us through
  pyopencl and 5.1 us direct. Whole models gained less (0.87-1.04x, medians 0.94, 1.00 and
  1.00 in three runs: benchmarks/RESULTS.md): there the device's own gap between dependent
  kernels, not the host, is most of what a launch costs.
* ``pyopencl``: ``pyopencl.enqueue_nd_range_kernel`` per launch (as the profiling queue
  always does, since each of its launches needs an event).

``auto`` takes a command buffer on GPUs and other non-CPU devices whose driver has the
extension (NVIDIA's has not), else direct calls there, and pyopencl's on CPU devices. PoCL's
CPU driver makes events cheaply, so there ctypes' own cost per call (nine arguments converted)
makes direct calls slower (3.7 against 2.6 us per empty launch), and it ran recorded buffers
slower than the same launches enqueued (176 against 134 us for a launch of 1M items); its
kernels, not the host, bound its time.

The OpenCL library called is the one pyopencl loaded, so handles (``int_ptr``) pass between
them. The extension's entry points come from ``clGetExtensionFunctionAddressForPlatform``; their
argument layout is the same in every revision of the provisional extension (0.9.x) that drivers
ship, and the recorded launches are chained by sync points so that no revision may reorder them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyopencl as cl

from offload_gpu_opencl._errors import GpuOpenCLError, check, status_name

__all__ = [
    "COMMAND_BUFFER_EXTENSION", "EnqueueMode", "LaunchSpec", "Launcher", "make_launcher"
]  # fmt: skip

EnqueueMode = Literal["auto", "command_buffer", "direct", "pyopencl"]
COMMAND_BUFFER_EXTENSION = "cl_khr_command_buffer"

_void_p = ctypes.c_void_p
_cl_int = ctypes.c_int32
_cl_uint = ctypes.c_uint32
_size_p = ctypes.POINTER(ctypes.c_size_t)
_sync_point = ctypes.c_uint32  # cl_sync_point_khr
_INVALID_OPERATION = -59

# A launch as pyopencl takes it: the kernel (arguments set), global size, local size.
LaunchSpec = tuple[cl.Kernel, tuple[int, ...], tuple[int, ...] | None]


def _library_path() -> str | None:
    """The OpenCL library (ICD loader) this process has loaded through pyopencl."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "libOpenCL" in os.path.basename(path) and os.path.exists(path):
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("OpenCL")


_LIBRARY: ctypes.CDLL | None = None
_LIBRARY_REASON = ""


def _library() -> ctypes.CDLL | None:
    global _LIBRARY, _LIBRARY_REASON
    if _LIBRARY is None and not _LIBRARY_REASON:
        path = _library_path()
        if path is None:
            _LIBRARY_REASON = "no OpenCL library found in this process"
            return None
        try:
            lib = ctypes.CDLL(path)
            lookup = lib.clGetExtensionFunctionAddressForPlatform
        except (OSError, AttributeError) as exc:
            _LIBRARY_REASON = f"{path}: {exc}"
            return None
        lookup.argtypes = [_void_p, ctypes.c_char_p]
        lookup.restype = _void_p
        _LIBRARY = lib
    return _LIBRARY


def _fail(what: str, status: int) -> GpuOpenCLError:
    return GpuOpenCLError(f"{what} failed: {status_name(status)}", status)


@dataclass(frozen=True)
class _Call:
    """One launch's arguments as the C call takes them, made once."""

    kernel: int
    name: str
    dims: int
    global_size: ctypes.Array[ctypes.c_size_t]
    local_size: ctypes.Array[ctypes.c_size_t] | None


def _calls(launches: Sequence[LaunchSpec]) -> list[_Call]:
    made = []
    for kernel, global_size, local_size in launches:
        sizes = ctypes.c_size_t * len(global_size)
        local = None if local_size is None else sizes(*local_size)
        dims, name = len(global_size), kernel.function_name
        made.append(_Call(kernel.int_ptr, name, dims, sizes(*global_size), local))
    return made


class Launcher:
    """Enqueues a fixed list of launches on one queue; ``mode`` says how."""

    mode: str = "pyopencl"

    def __init__(
        self,
        queue: cl.CommandQueue,
        launches: Sequence[LaunchSpec],
        flush_every: int,
    ) -> None:
        self.queue = queue
        self.launches = list(launches)
        self.flush_every = flush_every
        self.reason = ""  # why a better mode was not taken, for stats()

    def bind(self, lib: ctypes.CDLL) -> None:
        """Make what enqueue calls from the OpenCL library ``lib`` (raises GpuOpenCLError)."""

    def enqueue(self) -> None:
        queue, flush_every = self.queue, self.flush_every
        for pos, (kernel, global_size, local_size) in enumerate(self.launches):
            cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
            if flush_every and pos % flush_every == 0:
                check("clFlush", queue.flush)


class _DirectLauncher(Launcher):
    """Each launch one call of the library's ``clEnqueueNDRangeKernel``, its arguments made
    once as C values, and no event asked for: pyopencl makes (and later frees) an event per
    launch, which some drivers charge for."""

    mode = "direct"

    def bind(self, lib: ctypes.CDLL) -> None:
        # A private handle of the function: argtypes stay unset (C values pass as they are).
        self._enqueue = lib.clEnqueueNDRangeKernel
        self._enqueue.restype = _cl_int
        self._flush = lib.clFlush
        self._flush.restype = _cl_int
        self._queue_ptr = _void_p(self.queue.int_ptr)
        # The size arrays are passed by address: self._calls keeps them alive.
        self._calls = _calls(self.launches)
        null = _void_p(None)
        self._args = [
            (
                call.name,
                (
                    self._queue_ptr, _void_p(call.kernel), _cl_uint(call.dims), null,
                    _void_p(ctypes.addressof(call.global_size)),
                    null if call.local_size is None else _void_p(ctypes.addressof(call.local_size)),
                    _cl_uint(0), null, null,
                ),
            )
            for call in self._calls
        ]  # fmt: skip

    def enqueue(self) -> None:
        enqueue, flush_every = self._enqueue, self.flush_every
        for pos, (name, args) in enumerate(self._args):
            status = enqueue(*args)
            if status:
                raise _fail(f"clEnqueueNDRangeKernel({name})", status)
            if flush_every and pos % flush_every == 0:
                status = self._flush(self._queue_ptr)
                if status:
                    raise _fail("clFlush", status)


class _CommandBufferLauncher(Launcher):
    mode = "command_buffer"

    def bind(self, lib: ctypes.CDLL) -> None:
        queue = self.queue
        entry = _command_buffer_entry_points(lib, queue)
        self._run = entry["clEnqueueCommandBufferKHR"]
        status = _cl_int(0)
        handle = entry["clCreateCommandBufferKHR"](
            1, ctypes.byref(_void_p(queue.int_ptr)), None, ctypes.byref(status)
        )
        if status.value or not handle:
            raise _fail("clCreateCommandBufferKHR", status.value)
        self._handle = handle
        # Released with this object, however it goes (an error below included).
        self._finalizer = weakref.finalize(self, entry["clReleaseCommandBufferKHR"], handle)
        record = entry["clCommandNDRangeKernelKHR"]
        previous: _sync_point | None = None
        for call in _calls(self.launches):
            point = _sync_point(0)
            wait = (1, ctypes.byref(previous)) if previous is not None else (0, None)
            status_code = record(
                handle, None, None, call.kernel, call.dims, None, call.global_size,
                call.local_size, *wait, ctypes.byref(point), None,
            )  # fmt: skip
            if status_code:
                raise _fail(f"clCommandNDRangeKernelKHR({call.name})", status_code)
            previous = point
        status_code = entry["clFinalizeCommandBufferKHR"](handle)
        if status_code:
            raise _fail("clFinalizeCommandBufferKHR", status_code)

    def enqueue(self) -> None:
        status = self._run(0, None, self._handle, 0, None, None)
        if status == _INVALID_OPERATION:
            # The buffer is still pending from an invoke that raised before its wait: a buffer
            # recorded without simultaneous use runs once at a time. Wait for it, then retry.
            check("clFinish", self.queue.finish)
            status = self._run(0, None, self._handle, 0, None, None)
        if status:
            raise _fail("clEnqueueCommandBufferKHR", status)


_PROTOTYPES = {
    "clCreateCommandBufferKHR": ctypes.CFUNCTYPE(
        _void_p, _cl_uint, ctypes.POINTER(_void_p), _void_p, ctypes.POINTER(_cl_int)
    ),
    "clCommandNDRangeKernelKHR": ctypes.CFUNCTYPE(
        _cl_int,
        _void_p,
        _void_p,
        _void_p,
        _void_p,
        _cl_uint,
        _size_p,
        _size_p,
        _size_p,
        _cl_uint,
        ctypes.POINTER(_sync_point),
        ctypes.POINTER(_sync_point),
        _void_p,
    ),  # fmt: skip
    "clFinalizeCommandBufferKHR": ctypes.CFUNCTYPE(_cl_int, _void_p),
    "clEnqueueCommandBufferKHR": ctypes.CFUNCTYPE(
        _cl_int, _cl_uint, _void_p, _void_p, _cl_uint, _void_p, _void_p
    ),
    "clReleaseCommandBufferKHR": ctypes.CFUNCTYPE(_cl_int, _void_p),
}


def _command_buffer_entry_points(lib: ctypes.CDLL, queue: cl.CommandQueue) -> dict[str, Any]:
    device = queue.device
    if COMMAND_BUFFER_EXTENSION not in device.extensions.split():
        raise GpuOpenCLError(f"{device.name.strip()} has no {COMMAND_BUFFER_EXTENSION}")
    platform = device.platform.int_ptr
    found: dict[str, Any] = {}
    for name, prototype in _PROTOTYPES.items():
        address = lib.clGetExtensionFunctionAddressForPlatform(platform, name.encode())
        if not address:
            raise GpuOpenCLError(
                f"the OpenCL platform lists {COMMAND_BUFFER_EXTENSION} but has no {name}"
            )
        found[name] = prototype(address)
    return found


def make_launcher(
    mode: EnqueueMode,
    queue: cl.CommandQueue,
    launches: Sequence[LaunchSpec],
    flush_every: int,
) -> Launcher:
    """The launcher ``mode`` asks for, ``auto`` as the module says (``reason`` then says why a
    command buffer was not taken, for stats()). A mode asked for by name that cannot be had
    raises :class:`GpuOpenCLError`."""
    if mode == "pyopencl":
        return Launcher(queue, launches, flush_every)
    if mode == "auto" and queue.device.type & cl.device_type.CPU:
        launcher = Launcher(queue, launches, flush_every)
        launcher.reason = "a CPU device: pyopencl's launches cost least there (see _replay)"
        return launcher
    lib = _library()
    if lib is None:
        if mode != "auto":
            raise GpuOpenCLError(f"enqueue={mode!r} needs the OpenCL library: {_LIBRARY_REASON}")
        launcher = Launcher(queue, launches, flush_every)
        launcher.reason = _LIBRARY_REASON
        return launcher
    if mode == "direct":
        return _bound(_DirectLauncher(queue, launches, flush_every), lib)
    try:
        return _bound(_CommandBufferLauncher(queue, launches, flush_every), lib)
    except GpuOpenCLError as exc:
        if mode == "command_buffer":
            raise
        launcher = _bound(_DirectLauncher(queue, launches, flush_every), lib)
        launcher.reason = str(exc)
        return launcher


def _bound(launcher: Launcher, lib: ctypes.CDLL) -> Launcher:
    launcher.bind(lib)
    return launcher
