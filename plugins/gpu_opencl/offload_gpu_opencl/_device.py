"""Finding an OpenCL device, and building (or loading) the kernel program for it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import cast

import pyopencl as cl

from offload_gpu_opencl._cache import SerializationCache
from offload_gpu_opencl._errors import GpuOpenCLError, KernelBuildError, check
from offload_gpu_opencl._source import KERNELS, PRELUDE, program_source, source_hash

__all__ = [
    "DeviceHandle",
    "build_program",
    "forget_programs",
    "list_devices",
    "open_device",
    "probe",
    "profiling_queue",
    "program_key",
    "save_program",
]

_LOCK = threading.Lock()
_DEVICES: dict[tuple[str, str], DeviceHandle] = {}
_UNUSABLE: dict[tuple[str, str], str] = {}


@dataclass
class DeviceHandle:
    """One device with its context and in-order queue, shared by every partition in a process."""

    platform: cl.Platform
    device: cl.Device
    context: cl.Context
    queue: cl.CommandQueue
    programs: dict[str, cl.Program] = field(default_factory=dict)
    # A second in-order queue that timestamps its commands, made when profiling is first asked
    # for: timestamps cost on some drivers, so the queue every invoke uses never has them.
    profiling: cl.CommandQueue | None = None

    @property
    def name(self) -> str:
        return self.device.name.strip()

    @property
    def driver(self) -> str:
        return f"{self.platform.version.strip()} / driver {self.device.driver_version.strip()}"

    @property
    def has_fp16(self) -> bool:
        return "cl_khr_fp16" in self.device.extensions.split()

    @property
    def plain_access(self) -> bool:
        """Build with ``-DPLAIN_ACCESS`` (see _source): on CPU devices, where PoCL calls
        vload8 / vload_half out of line; GPUs keep the builtins their compilers expect."""
        return bool(self.device.type & cl.device_type.CPU)


def list_devices() -> list[tuple[int, cl.Platform, int, cl.Device]]:
    """Every (platform index, platform, device index, device) pyopencl reports."""
    found = []
    for pi, platform in enumerate(cl.get_platforms()):
        try:
            devices = platform.get_devices()
        except cl.Error:  # a platform with no devices raises CL_DEVICE_NOT_FOUND
            continue
        for di, device in enumerate(devices):
            found.append((pi, platform, di, device))
    return found


def probe() -> str | None:
    """None if some OpenCL device can build and run a kernel, else why not (for Availability).

    A device that enumerates is not yet usable: an OpenCL compiler that does not know the
    host CPU (PoCL built on an LLVM older than the processor) fails every build, and the
    delegate must then be unavailable with that reason rather than fail every partition.
    """
    try:
        open_device(None, None)
    except GpuOpenCLError as exc:
        return str(exc)
    except Exception as exc:  # no ICD loader, no platform, broken driver
        return f"no OpenCL platform: {type(exc).__name__}: {exc}".strip()
    return None


def _matches(index: int, obj: cl.Platform | cl.Device, want: int | str | None) -> bool:
    if want is None:
        return True
    if isinstance(want, int) or want.strip().isdigit():
        return index == int(want)
    return want.lower() in obj.name.lower()


def open_device(platform: int | str | None, device: int | str | None) -> DeviceHandle:
    """The first device matching the platform and device selectors (index or name substring).

    GPUs are preferred over other device types when nothing is selected.
    """
    candidates = [
        (p, d)
        for pi, p, di, d in list_devices()
        if _matches(pi, p, platform) and _matches(di, d, device)
    ]
    if not candidates:
        seen = (
            ", ".join(
                f"[{pi}] {p.name.strip()} / [{di}] {d.name.strip()}"
                for pi, p, di, d in list_devices()
            )
            or "none"
        )
        raise GpuOpenCLError(
            f"no OpenCL device matches platform={platform!r} device={device!r}; devices: {seen}"
        )
    if platform is None and device is None:
        candidates.sort(key=lambda pd: 0 if pd[1].type & cl.device_type.GPU else 1)
    failures = []
    for plat, dev in candidates:
        try:
            return _open(plat, dev)
        except GpuOpenCLError as exc:
            failures.append(f"{plat.name.strip()} / {dev.name.strip()}: {exc}")
    raise GpuOpenCLError(
        f"no usable OpenCL device matches platform={platform!r} device={device!r}: "
        + "; ".join(failures)
    )


# A kernel every OpenCL C compiler must accept: building it tells whether the device's
# compiler works at all on this machine.
_PROBE_SOURCE = "__kernel void offload_probe(__global float *x) { x[get_global_id(0)] += 1.0f; }"


def _first_errors(exc: Exception) -> str:
    """The compiler's own ``error:`` lines, which name the cause; the rest is boilerplate."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    errors = list(dict.fromkeys(ln for ln in lines if ln.startswith("error:")))
    return "; ".join(errors[:3]) or " ".join(" ".join(lines).split())[:300]


def _open(plat: cl.Platform, dev: cl.Device) -> DeviceHandle:
    """The shared handle of a device whose compiler builds a trivial kernel (memoised,
    failures too, so an unusable device costs one build per process)."""
    key = (plat.name, dev.name + str(dev.int_ptr))
    with _LOCK:
        handle = _DEVICES.get(key)
        if handle is not None:
            return handle
        reason = _UNUSABLE.get(key)
        if reason is None:
            try:
                context = check("clCreateContext", cl.Context, [dev])
                queue = check("clCreateCommandQueue", cl.CommandQueue, context, dev)
                cl.Program(context, _PROBE_SOURCE).build()
            except (cl.Error, GpuOpenCLError) as exc:
                reason = f"its OpenCL compiler fails on a trivial kernel ({_first_errors(exc)})"
                _UNUSABLE[key] = reason
            else:
                handle = DeviceHandle(plat, dev, context, queue)
                _DEVICES[key] = handle
                return handle
    raise GpuOpenCLError(reason)


def profiling_queue(handle: DeviceHandle) -> cl.CommandQueue:
    """The device's queue with ``PROFILING_ENABLE`` (its events carry device timestamps)."""
    with _LOCK:
        if handle.profiling is None:
            handle.profiling = check(
                "clCreateCommandQueue(PROFILING_ENABLE)",
                cl.CommandQueue,
                handle.context,
                handle.device,
                properties=cl.command_queue_properties.PROFILING_ENABLE,
            )
        return handle.profiling


def _build_from_source(handle: DeviceHandle, options: str) -> cl.Program:
    try:
        return cl.Program(handle.context, program_source()).build(options=options)
    except cl.Error as exc:
        whole_log = str(exc)
        code = getattr(exc, "code", None)
    # Find the kernel that broke the build: rebuild each family alone (failure path only).
    for name, src in KERNELS.items():
        try:
            cl.Program(handle.context, PRELUDE + src).build(options=options)
        except cl.Error as exc:
            raise KernelBuildError(name, str(exc), getattr(exc, "code", None)) from None
    raise KernelBuildError("(whole program)", whole_log, code)


def program_key(prefix: str, options: str) -> str:
    return f"{prefix}:program:{source_hash(options)}"


def build_program(
    handle: DeviceHandle, options: str, cache: SerializationCache | None, prefix: str
) -> tuple[cl.Program, str]:
    """The program for ``options`` on ``handle`` and where it came from.

    Order: this process's memo (``"memo"``), the serialization cache's binary (``"binary"``),
    a source build (``"source"``).
    """
    memo = source_hash(options)
    with _LOCK:
        program = handle.programs.get(memo)
    if program is not None:
        return program, "memo"
    origin = "source"
    if cache is not None:
        key = program_key(prefix, options)
        binary = cache.load(key, "clbin")
        if binary is not None:
            try:
                program = cl.Program(handle.context, [handle.device], [binary]).build(
                    options=options
                )
                origin = "binary"
            except cl.Error as exc:
                cache.discard(key, "clbin", f"driver rejected the binary: {exc}")
                program = None
    if program is None:
        program = _build_from_source(handle, options)
    with _LOCK:
        handle.programs.setdefault(memo, program)
        return handle.programs[memo], origin


def save_program(
    handle: DeviceHandle, options: str, cache: SerializationCache, prefix: str
) -> None:
    """Store the program's binary (call after a first run, so lazily compiled code is in it)."""
    program = handle.programs.get(source_hash(options))
    if program is None:
        return
    # pyopencl's stub types every get_info as object; BINARIES is one bytes-like per device.
    binaries = cast(
        "list[bytes]",
        check("clGetProgramInfo(BINARIES)", program.get_info, cl.program_info.BINARIES),
    )
    if binaries and binaries[0]:
        cache.store(program_key(prefix, options), "clbin", bytes(binaries[0]))


def forget_programs() -> None:
    """Drop this process's memo of built programs (benchmarks use it to measure cold starts)."""
    with _LOCK:
        for handle in _DEVICES.values():
            handle.programs.clear()
