"""Process memory for ``offload benchmark``: current and peak RSS, with a resettable peak.

On Linux the figures come from ``/proc/self/status`` (VmRSS, VmHWM) and the peak is reset
through ``/proc/self/clear_refs``, so each phase (init, first inference, steady state) gets
its own rise; elsewhere ``getrusage``'s lifetime maximum is all there is.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["MemoryProbe"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kb(field_name: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class MemoryProbe:
    """Current and peak RSS in bytes; the peak can be reset on Linux."""

    def __init__(self) -> None:
        self.resettable = False
        self.source = "getrusage"
        if _status_kb("VmHWM") is not None:
            self.source = "/proc/self/status"
            try:
                _CLEAR_REFS.write_text("5")
                self.resettable = True
            except OSError:
                pass

    def rss(self) -> int:
        kb = _status_kb("VmRSS")
        return kb * 1024 if kb is not None else self._maxrss()

    def peak(self) -> int:
        kb = _status_kb("VmHWM")
        return kb * 1024 if kb is not None else self._maxrss()

    def reset_peak(self) -> None:
        if self.resettable:
            try:
                _CLEAR_REFS.write_text("5")
            except OSError:
                self.resettable = False

    @staticmethod
    def _maxrss() -> int:
        import resource

        value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return value if sys.platform == "darwin" else value * 1024

    def start(self) -> int:
        """Reset the peak and return the RSS to measure the rise from."""
        self.reset_peak()
        return self.rss() if self.resettable else self.peak()

    def rise(self, start: int) -> int:
        return max(0, self.peak() - start)
