"""The machine's peak for a roofline: float32 FMA throughput and memory bandwidth, measured once.

:func:`machine_peak` measures at first use, in a process of its own (offload._peak_probe: BLAS
reads its thread count at import, so the count asked is set in that process's environment),
well under 2 s in total, and keeps the figures per machine (CPU model, architecture, CPUs this
process may use, operating system: :func:`offload._auto_cache.machine_identity`) and thread
count in one small JSON file under ``offload.cache.default_location("roofline")``
(``~/.cache/offload/roofline``; ``$OFFLOAD_CACHE_DIR`` and ``$XDG_CACHE_HOME`` move it).

The file is read as untrusted: the directory passes :class:`offload.cache.CacheDir`'s checks,
the file must be a regular file of ours of at most a few KiB, and every figure must be a
finite number in a plausible range. Anything else (garbage, wrong types, negative or absurd
numbers, another machine's figures) is measured again and the file rewritten. A directory that
cannot be used means measuring without remembering; a probe that fails means measuring in this
process, at the BLAS threads it has. Never an error.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from offload import _peak_probe
from offload._auto_cache import machine_identity
from offload._cache_files import _read_regular, _write_new
from offload._cache_format import _Rejected
from offload.cache import CacheDir, default_location
from offload.errors import CacheError

__all__ = ["MachinePeak", "machine_peak", "peak_file"]

FORMAT = 1
NAMESPACE = "roofline"
MATMUL_SIZE = 512
COPY_BYTES = 64 << 20
SECONDS = 0.3  # per thread count: half timing the matmul, half the copy
_FILE_LIMIT = 64 << 10
_MAX_THREADS = 4096
# Plausible figures: a CPU does more than 1 MFLOP/s and less than 1 PFLOP/s; its memory moves
# more than 1 MB/s and less than 100 TB/s. Outside: a damaged or forged file.
_GFLOPS_RANGE = (1e-3, 1e6)
_GBPS_RANGE = (1e-3, 1e5)
_BLAS_THREAD_VARIABLES = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

# Figures measured in this process that could not be stored, by (threads, directory): measured
# once per process even where the cache is refused.
_UNSTORED: dict[tuple[int, str], MachinePeak] = {}


@dataclass(frozen=True)
class MachinePeak:
    """The roofs: float32 FMA throughput (GFLOP/s) and memory bandwidth (GB/s, bytes read
    plus written) at ``threads`` threads on ``cpu``; ``source`` says where they came from
    (``"measured now"`` or ``"cached"``), ``note`` why they were measured where a file was
    refused, ``file`` the cache file (empty when none could be used)."""

    cpu: str
    threads: int
    gflops: float
    gbps: float
    source: str
    file: str = ""
    note: str = ""

    @property
    def ridge(self) -> float:
        """The intensity (FLOPs per byte) from which the FMA units, not memory, bound a run."""
        return self.gflops / self.gbps

    def roof(self, intensity: float) -> float:
        """GFLOP/s reachable at ``intensity`` FLOPs per byte: min(peak, intensity x bandwidth)."""
        return min(self.gflops, intensity * self.gbps)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ridge_flops_per_byte": self.ridge}


def peak_file(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache file of this machine's figures (its name: a digest of the machine)."""
    where = Path(cache_dir) if cache_dir is not None else default_location(NAMESPACE)
    machine = json.dumps(machine_identity(), sort_keys=True)
    return where / f"peak-{hashlib.sha256(machine.encode()).hexdigest()[:16]}.json"


def machine_peak(
    threads: int = 1,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    size: int | None = None,
    copy_bytes: int = COPY_BYTES,
    seconds: float = SECONDS,
) -> MachinePeak:
    """This machine's peak at ``threads`` threads: from the cache file where it holds valid
    figures, else measured now (and stored). ``size``, ``copy_bytes`` and ``seconds`` size the
    measurement (smaller: faster and less exact); the matmul grows with the threads, so that
    each thread still has a compute-bound share."""
    threads = min(max(int(threads), 1), _MAX_THREADS)
    if size is None:
        size = max(64, round(MATMUL_SIZE * threads ** (1 / 3) / 64) * 64)
    machine = machine_identity()
    path = peak_file(cache_dir)
    memo = _UNSTORED.get((threads, str(path)))
    if memo is not None:
        return memo
    try:
        directory = CacheDir.open(path.parent)
    except (CacheError, OSError) as exc:
        peak = _measured(machine, threads, size, copy_bytes, seconds, note=f"not cached: {exc}")
        _UNSTORED[(threads, str(path))] = peak
        return peak
    try:
        peaks, why = _read(directory, path.name, machine)
        entry = peaks.get(str(threads))
        if entry is not None:
            return MachinePeak(
                machine["cpu"], threads, entry["gflops"], entry["gbps"], "cached", str(path)
            )
        note = why or ""
        peak = _measured(machine, threads, size, copy_bytes, seconds, note=note)
        peaks[str(threads)] = {"gflops": peak.gflops, "gbps": peak.gbps}
        document = {"format": FORMAT, "machine": machine, "peaks": peaks}
        try:
            _write_new(directory.fd, path.name, (json.dumps(document, indent=1).encode(),))
        except OSError as exc:
            peak = _with(peak, note=_join(note, f"not cached: {exc.strerror or exc}"))
            _UNSTORED[(threads, str(path))] = peak
            return peak
        return _with(peak, file=str(path))
    finally:
        directory.close()


def _read(directory: CacheDir, name: str, machine: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The valid figures of the file by thread count, and why the file was set aside (empty
    when it was absent or whole)."""
    try:
        read = _read_regular(directory.fd, name, _FILE_LIMIT)
    except _Rejected as exc:
        return {}, f"measured again: {exc}"
    if read is None:
        return {}, ""
    try:
        document = json.loads(bytes(read.data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}, "measured again: the cache file is not JSON"
    why = _invalid(document, machine)
    if why:
        return {}, f"measured again: {why}"
    return {k: dict(v) for k, v in document["peaks"].items()}, ""


def _invalid(document: Any, machine: dict[str, Any]) -> str:
    """Why ``document`` is not a peak file of this machine, or empty when it is one."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return f"the cache file is not a format-{FORMAT} peak file"
    if document.get("machine") != machine:
        return "the cache file describes another machine"
    peaks = document.get("peaks")
    if not isinstance(peaks, dict):
        return "the cache file's peaks are not a table"
    for key, entry in peaks.items():
        if not (isinstance(key, str) and key.isdecimal() and 1 <= int(key) <= _MAX_THREADS):
            return f"the cache file names {key!r} threads"
        if not isinstance(entry, dict):
            return f"the cache file's figures for {key} threads are not a table"
        for field, (low, high) in (("gflops", _GFLOPS_RANGE), ("gbps", _GBPS_RANGE)):
            value = entry.get(field)
            if not _number_in(value, low, high):
                return f"the cache file's {field} for {key} threads is {value!r}"
    return ""


def _number_in(value: Any, low: float, high: float) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )


def _measured(
    machine: dict[str, Any], threads: int, size: int, copy_bytes: int, seconds: float, note: str
) -> MachinePeak:
    """Figures measured now by the probe, in a process of its own; in this one if that fails."""
    args = [str(threads), str(max(size, 8)), str(max(copy_bytes, 4096)), str(seconds)]
    env = {**os.environ, **dict.fromkeys(_BLAS_THREAD_VARIABLES, str(threads))}
    figures: Any = None
    try:
        run = subprocess.run(
            [sys.executable, "-P", _peak_probe.__file__, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        figures = json.loads(run.stdout) if run.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, TypeError, ValueError):
        figures = None
    if not _valid_figures(figures):
        # Here, at the BLAS threads this process has: figures, if not for exactly that count.
        figures = _peak_probe.measure(threads, int(args[1]), int(args[2]), seconds)
        note = _join(note, "the probe process failed: measured in this process")
    if not _valid_figures(figures):
        figures = {"gflops": _GFLOPS_RANGE[0], "gbps": _GBPS_RANGE[0]}
        note = _join(note, "the measurement gave no usable figures")
    return MachinePeak(
        machine["cpu"],
        threads,
        float(figures["gflops"]),
        float(figures["gbps"]),
        "measured now",
        note=note,
    )


def _valid_figures(figures: Any) -> bool:
    return (
        isinstance(figures, dict)
        and _number_in(figures.get("gflops"), *_GFLOPS_RANGE)
        and _number_in(figures.get("gbps"), *_GBPS_RANGE)
    )


def _with(peak: MachinePeak, **changes: str) -> MachinePeak:
    return MachinePeak(**{**asdict(peak), **changes})


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)
