"""OpenCL failures as offload errors: status codes are named in one function, :func:`check`.

:class:`ShapeCheckError` is the other kind of failure: a model whose shapes the lowering
cannot vouch for, found before any buffer is sized or kernel launched from them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pyopencl as cl

from offload.errors import DelegateError

__all__ = ["GpuOpenCLError", "KernelBuildError", "ShapeCheckError", "status_name", "check"]

T = TypeVar("T")

# The status codes of cl.h (OpenCL 3.0) and the two extension codes drivers commonly return.
_STATUS = {
    0: "CL_SUCCESS",
    -1: "CL_DEVICE_NOT_FOUND",
    -2: "CL_DEVICE_NOT_AVAILABLE",
    -3: "CL_COMPILER_NOT_AVAILABLE",
    -4: "CL_MEM_OBJECT_ALLOCATION_FAILURE",
    -5: "CL_OUT_OF_RESOURCES",
    -6: "CL_OUT_OF_HOST_MEMORY",
    -7: "CL_PROFILING_INFO_NOT_AVAILABLE",
    -8: "CL_MEM_COPY_OVERLAP",
    -9: "CL_IMAGE_FORMAT_MISMATCH",
    -10: "CL_IMAGE_FORMAT_NOT_SUPPORTED",
    -11: "CL_BUILD_PROGRAM_FAILURE",
    -12: "CL_MAP_FAILURE",
    -13: "CL_MISALIGNED_SUB_BUFFER_OFFSET",
    -14: "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
    -15: "CL_COMPILE_PROGRAM_FAILURE",
    -16: "CL_LINKER_NOT_AVAILABLE",
    -17: "CL_LINK_PROGRAM_FAILURE",
    -18: "CL_DEVICE_PARTITION_FAILED",
    -19: "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
    -30: "CL_INVALID_VALUE",
    -31: "CL_INVALID_DEVICE_TYPE",
    -32: "CL_INVALID_PLATFORM",
    -33: "CL_INVALID_DEVICE",
    -34: "CL_INVALID_CONTEXT",
    -35: "CL_INVALID_QUEUE_PROPERTIES",
    -36: "CL_INVALID_COMMAND_QUEUE",
    -37: "CL_INVALID_HOST_PTR",
    -38: "CL_INVALID_MEM_OBJECT",
    -39: "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
    -40: "CL_INVALID_IMAGE_SIZE",
    -41: "CL_INVALID_SAMPLER",
    -42: "CL_INVALID_BINARY",
    -43: "CL_INVALID_BUILD_OPTIONS",
    -44: "CL_INVALID_PROGRAM",
    -45: "CL_INVALID_PROGRAM_EXECUTABLE",
    -46: "CL_INVALID_KERNEL_NAME",
    -47: "CL_INVALID_KERNEL_DEFINITION",
    -48: "CL_INVALID_KERNEL",
    -49: "CL_INVALID_ARG_INDEX",
    -50: "CL_INVALID_ARG_VALUE",
    -51: "CL_INVALID_ARG_SIZE",
    -52: "CL_INVALID_KERNEL_ARGS",
    -53: "CL_INVALID_WORK_DIMENSION",
    -54: "CL_INVALID_WORK_GROUP_SIZE",
    -55: "CL_INVALID_WORK_ITEM_SIZE",
    -56: "CL_INVALID_GLOBAL_OFFSET",
    -57: "CL_INVALID_EVENT_WAIT_LIST",
    -58: "CL_INVALID_EVENT",
    -59: "CL_INVALID_OPERATION",
    -60: "CL_INVALID_GL_OBJECT",
    -61: "CL_INVALID_BUFFER_SIZE",
    -62: "CL_INVALID_MIP_LEVEL",
    -63: "CL_INVALID_GLOBAL_WORK_SIZE",
    -64: "CL_INVALID_PROPERTY",
    -65: "CL_INVALID_IMAGE_DESCRIPTOR",
    -66: "CL_INVALID_COMPILER_OPTIONS",
    -67: "CL_INVALID_LINKER_OPTIONS",
    -68: "CL_INVALID_DEVICE_PARTITION_COUNT",
    -69: "CL_INVALID_PIPE_SIZE",
    -70: "CL_INVALID_DEVICE_QUEUE",
    -71: "CL_INVALID_SPEC_ID",
    -72: "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
    -1001: "CL_PLATFORM_NOT_FOUND_KHR",
    -1002: "CL_INVALID_D3D10_DEVICE_KHR",
}


class GpuOpenCLError(DelegateError):
    """An OpenCL call failed; the message names the call and the status name."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KernelBuildError(GpuOpenCLError):
    """The OpenCL C compiler rejected a kernel; ``kernel`` names it and ``log`` is its build log."""

    def __init__(self, kernel: str, log: str, status: int | None = None) -> None:
        super().__init__(
            f"building OpenCL kernel {kernel!r} failed ({status_name(status)}); compiler log:\n"
            f"{log.strip() or '(the driver gave no log)'}",
            status,
        )
        self.kernel = kernel
        self.log = log


class ShapeCheckError(GpuOpenCLError):
    """A node's shapes or parameters do not add up, or a launch would reach past a buffer.

    On PoCL device memory is the host heap, so a kernel sized from a shape nobody checked
    corrupts the process instead of failing. The lowering computes every node's output shape
    from its inputs and options and every kernel's index range from its arguments, and raises
    this at init when the model disagrees; the core then runs the partition on the CPU (or
    raises DelegateError in strict mode).
    """


def status_name(code: int | None) -> str:
    """``-5`` -> ``"CL_OUT_OF_RESOURCES"``; unknown codes keep their number."""
    if code is None:
        return "unknown status"
    return _STATUS.get(int(code), f"OpenCL status {int(code)}")


def check(what: str, func: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Call ``func``; turn a pyopencl error into :class:`GpuOpenCLError` naming ``what``."""
    try:
        return func(*args, **kwargs)
    except cl.Error as exc:
        code = getattr(exc, "code", None)
        raise GpuOpenCLError(f"{what} failed: {status_name(code)}: {exc}", code) from exc
