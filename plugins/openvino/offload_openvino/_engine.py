"""The one place the plugin imports OpenVINO: its Core, its devices, its errors, and reading a
.tflite model from bytes.

OpenVINO is the plugin's engine, not offload's dependency: when ``openvino`` does not import,
the plugin still loads and the delegate is unavailable with the reason, as the plugin-loading
policy asks of a delegate that cannot run here.

OpenVINO's TensorFlow Lite frontend reads a model from a path ending in ``.tflite`` and from
nothing else (``Core.read_model`` given bytes or a ``BytesIO`` answers "unable to read the
model"; the frontend's ``load`` takes only a file name). So an exported partition that has
to be converted is written to a private temporary file (on tmpfs where there is one, so it
never reaches a disk) and removed as soon as OpenVINO has read it. A partition found in the
compiled-model cache (_cache) needs no file: the compiled model is imported from memory.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import tempfile
from types import ModuleType
from typing import Any

from offload.errors import DelegateError

__all__ = [
    "IMPORT_ERROR",
    "core",
    "devices",
    "ov",
    "ov_failure",
    "read_tflite",
    "resolve_device",
    "version",
]

ov: ModuleType | None
try:
    import openvino as _openvino
except Exception as exc:  # an ImportError, or a wheel whose native part fails to load
    ov = None
    IMPORT_ERROR = (
        f"openvino does not import ({type(exc).__name__}: {exc}); install it with "
        "pip install offload-openvino (or pip install openvino)"
    )
else:
    ov = _openvino
    IMPORT_ERROR = ""

# Device names the option takes besides those OpenVINO lists: the virtual devices that choose
# among or combine the others.
_VIRTUAL = ("AUTO", "MULTI", "HETERO", "BATCH")


@functools.cache
def core() -> Any:
    """The process's one ``openvino.Core``: it loads each device plugin once, which is slow."""
    assert ov is not None
    return ov.Core()


@functools.cache
def version() -> str:
    """OpenVINO's full build string (``2026.4.1-22982-...``): compiled models are not portable
    across builds, so the compiled-model cache keys on it."""
    assert ov is not None
    return str(ov.get_version())


@functools.cache
def devices() -> dict[str, str]:
    """Device name (``CPU``, ``GPU.0``, ``NPU``) -> its ``FULL_DEVICE_NAME``, as OpenVINO finds
    them here."""
    found: dict[str, str] = {}
    engine = core()
    for name in engine.available_devices:
        try:
            found[name] = str(engine.get_property(name, "FULL_DEVICE_NAME"))
        except Exception as exc:  # a device whose plugin loads but cannot describe itself
            found[name] = f"(no name: {clean(str(exc))})"
    return found


def describe_devices() -> str:
    listed = devices()
    if not listed:
        return "OpenVINO finds no device here"
    return "; ".join(f"{name}: {full}" for name, full in listed.items())


def resolve_device(wanted: str) -> tuple[str, str]:
    """(OpenVINO's device name, "") for the ``device`` option, or ("", why it is absent).

    Taken: a name OpenVINO lists (``CPU``, ``GPU.1``), a device type whose first device it
    lists (``GPU`` for ``GPU.0``: OpenVINO's own reading of a bare type), a virtual device
    (``AUTO``, ``AUTO:GPU,CPU``, ``HETERO:GPU,CPU``) whose named devices are present, or a
    ``FULL_DEVICE_NAME`` as listed (case aside).
    """
    listed = devices()
    if wanted in listed:
        return wanted, ""
    kind, _, members = wanted.partition(":")
    if kind in _VIRTUAL:
        named = [m.split("(")[0].strip() for m in members.split(",") if m.strip()]
        absent = [m for m in named if resolve_device(m)[0] == ""]
        if not absent and (named or listed):
            return wanted, ""
        what = f"{', '.join(absent)} (named by {wanted!r})" if absent else "any device"
        return "", f"OpenVINO finds no {what}; devices here: {describe_devices()}"
    of_kind = [name for name in listed if name.split(".")[0] == wanted]
    if of_kind:
        return wanted, ""
    by_full_name = [name for name, full in listed.items() if full.lower() == wanted.lower()]
    if by_full_name:
        return by_full_name[0], ""
    return "", f"OpenVINO finds no device {wanted!r}; devices here: {describe_devices()}"


def supported_properties(device: str) -> set[str]:
    """The properties ``device`` takes at compile time (empty where it cannot say)."""
    try:
        return {str(k) for k in core().get_property(device.split(":")[0], "SUPPORTED_PROPERTIES")}
    except Exception:
        return set()


def can_export(device: str) -> bool:
    """Whether ``device`` can export a compiled model (and so import one from the cache)."""
    try:
        capabilities = core().get_property(device, "OPTIMIZATION_CAPABILITIES")
    except Exception:
        return False
    return "EXPORT_IMPORT" in [str(c) for c in capabilities]


# "Exception from src/inference/src/cpp/core.cpp:84:" and "Check 'x' failed at src/a.cpp:53:"
_WHERE = re.compile(r"^Exception from \S+:\d+:?$")
_CHECK = re.compile(r"^Check '.*' failed at \S+:\d+:\s*")
_API = re.compile(r"^FrontEnd API failed with \w+:\s*")


def clean(message: str, limit: int = 800) -> str:
    """OpenVINO's exception text without its source locations, on one line."""
    kept: list[str] = []
    for line in message.splitlines():
        text = line.strip()
        if not text or _WHERE.match(text):
            continue
        text = _API.sub("", _CHECK.sub("", text)).strip()
        if text and text not in kept:
            kept.append(text)
    joined = " ".join(kept) or message.strip()
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def ov_failure(what: str, exc: BaseException) -> DelegateError:
    """OpenVINO's failure as a :class:`DelegateError` that carries its own message."""
    return DelegateError(f"OpenVINO could not {what}: {clean(str(exc)) or type(exc).__name__}")


def _scratch_dir() -> str | None:
    """tmpfs where there is one: the file lives for one read and need not touch a disk."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def read_tflite(model: bytes) -> Any:
    """``ov.Model`` from .tflite bytes, through OpenVINO's TensorFlow Lite frontend.

    Raises :class:`DelegateError` with OpenVINO's message when the frontend refuses the model.
    """
    engine = core()
    # A private directory (0700) of our own: nobody else can swap the file between our write
    # and OpenVINO's read.
    with tempfile.TemporaryDirectory(prefix="offload-openvino-", dir=_scratch_dir()) as where:
        path = os.path.join(where, "partition.tflite")
        with open(path, "wb") as f:
            f.write(model)
        try:
            return engine.read_model(path)
        except Exception as exc:
            raise ov_failure("convert the partition", exc) from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
