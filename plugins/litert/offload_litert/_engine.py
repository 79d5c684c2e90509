"""The one place the plugin imports LiteRT, and reads what LiteRT writes to the C stderr.

LiteRT is the plugin's engine, not offload's dependency: when ``ai_edge_litert`` does not
import, the plugin still loads and the delegate is unavailable with the reason, as the
plugin-loading policy asks of a delegate that cannot run here.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from types import ModuleType

__all__ = ["IMPORT_ERROR", "compiled_api", "litert", "native_stderr", "logged_errors"]

litert: ModuleType | None
try:
    from ai_edge_litert import interpreter as _interpreter
except Exception as exc:  # an ImportError, or a wheel whose native part fails to load
    litert = None
    IMPORT_ERROR = (
        f"ai-edge-litert does not import ({type(exc).__name__}: {exc}); install it with "
        "pip install ai-edge-litert"
    )
else:
    litert = _interpreter
    IMPORT_ERROR = ""

# LiteRT's CompiledModel modules (the GPU accelerator's path), bound now, with the plugin: a
# program run under offload run imports ai_edge_litert.compiled_model later and gets offload's
# stand-in, which must not become this plugin's LiteRT. Absent (None) where LiteRT is.
compiled_api: tuple[ModuleType, ...] | None = None
if litert is not None:
    try:
        from ai_edge_litert import compiled_model, cpu_options, hardware_accelerator, options
    except Exception:  # the GPU path then says, when asked, why it cannot start
        pass
    else:
        compiled_api = (compiled_model, cpu_options, hardware_accelerator, options)


# File descriptor 2 is the process's: two threads redirecting it at once would each restore
# the other's sink. Re-entrant, so that a capture inside a capture nests.
_REDIRECTING = threading.RLock()


@contextlib.contextmanager
def native_stderr() -> Iterator[list[str]]:
    """Collect what native code writes to file descriptor 2 meanwhile, line by line.

    LiteRT reports why an accelerator or a model failed in its log, not in the exception it
    raises ("ERROR: [compiled_model.cc:1036]"); this is how its own words reach the user.
    Only around loading and allocating, never around invoke.
    """
    lines: list[str] = []
    with _REDIRECTING, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())


# "ERROR: [delegate_webgpu.cc:359] Failed ..." and "E0000 00:00:17.87 8045 file.cc:736] ..."
_PREFIX = re.compile(r"^(?:ERROR: \[[^\]]*\]\s*|E\d{4} [\d:.]+\s+\d+ [^\]]*\]\s*|Warning: )")
_TELLING = re.compile(r"(?i)error|fail|couldn't|cannot|not found|unsupported|not supported")


def logged_errors(lines: list[str], limit: int = 4) -> str:
    """LiteRT's error lines among ``lines``, prefixes stripped, repeats dropped, joined."""
    found: list[str] = []
    for line in lines:
        text = line.strip()
        # INFO and WARNING lines are LiteRT's notes on optional parts (an NPU plugin it did
        # not find); the reason something failed is on its ERROR lines and its backends' own.
        skip = ("INFO:", "WARNING:", "└", "at ", "===")
        if not text or text.startswith(skip) or not _TELLING.search(text):
            continue
        text = _PREFIX.sub("", text).strip()
        if text and text not in found:
            found.append(text)
    return "; ".join(found[:limit])
