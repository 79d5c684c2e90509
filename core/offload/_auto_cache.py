"""Remembered choices of ``delegates="auto"``: what a decision is keyed by, and where it lives.

A decision is valid for one key, a dict of named fields:

- ``model``: the SHA-256 of the model's bytes;
- ``inputs``: the input shapes and dtypes it was measured with;
- ``machine``: CPU model, architecture, CPUs this process may use, operating system;
- ``devices``: OpenCL drivers registered (ICD files and the libraries they name, with size and
  modification time, so a driver upgrade shows), the variables that steer device choice, the
  NVIDIA driver's version where there is one, and each candidate delegate's own
  :meth:`~offload.Delegate.device_identity` (its device and driver) and availability;
- ``versions``: offload, numpy, and per candidate delegate its version, its distribution's
  version and the installed version of every package that distribution requires (the
  engines: ai-edge-litert, openvino, pyopencl, PoCL);
- ``options``: every candidate delegate's options, the thread count, the accuracy policy and
  whether CPU fallback is allowed;
- ``budget``: the measuring budget in seconds.

Entries are sealed :mod:`offload.cache` entries (namespace ``"auto"``, kind ``"decision"``),
one per model source (its real path, or the content hash for ``model_content``), each holding
the latest :data:`MAX_RECORDS` decisions with their full keys. A lookup that finds no record
with an equal key reports the fields in which the closest record differs and, within them, the
few settings that moved (``options.num_threads: 1 -> 2``), so "measured again: budget changed"
is said rather than guessed, and read in one line rather than two dictionaries. A damaged or
forged entry fails its HMAC, is deleted with a :class:`~offload.cache.CacheWarning` and the
choice is measured again; a sealed entry whose content does not parse is discarded the same way.

Two figures are expensive to recompute on every lookup, and are memoised in the entry:
the model's hash (kept with the file's device, inode, size and modification and change times,
as git and ccache do; any write changes them) and the package versions (kept with the
modification times of the site-packages directories, which every install, upgrade or removal
touches).

Where: ``auto_cache_dir``, else ``$OFFLOAD_AUTO_CACHE_DIR``, else
``offload.cache.default_location("auto")`` (``~/.cache/offload/auto``). A cache is never fatal
where the program did not ask for it: any fault of the directory or its key file (refused,
unreadable, not a directory, an empty or damaged key file, an I/O error) gives one
:class:`~offload.cache.CacheWarning` naming the directory and the fault, and the choice is
made without remembering (nothing read, nothing stored). Only a store opened ``strict`` (an
explicit ``delegates="auto"`` with an explicit ``auto_cache_dir``) raises
:class:`~offload.errors.CacheError` instead: that program asked for this directory.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import site
import sys
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from offload.cache import CacheDir, CacheWarning, EntryStore, default_location
from offload.errors import CacheError

__all__ = [
    "AUTO_CACHE_ENV",
    "KEY_FIELDS",
    "MAX_RECORDS",
    "DecisionStore",
    "Lookup",
    "ModelSource",
    "clear_auto_cache",
    "device_identity",
    "machine_identity",
    "package_versions",
]

AUTO_CACHE_ENV = "OFFLOAD_AUTO_CACHE_DIR"
NAMESPACE = "auto"
KIND = "decision"
FORMAT = 1
MAX_RECORDS = 8
KEY_FIELDS = ("model", "inputs", "machine", "devices", "versions", "options", "budget")
_LIMIT = 1 << 20  # a JSON list of a few decisions with their candidate tables
# Variables that choose which OpenCL / GPU device a delegate opens.
_DEVICE_ENV = (
    "OCL_ICD_VENDORS",
    "OCL_ICD_FILENAMES",
    "POCL_DEVICES",
    "PYOPENCL_CTX",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
)


# -- identity of the machine -----------------------------------------------------------------


@functools.cache
def machine_identity() -> dict[str, Any]:
    """CPU model, architecture, usable CPUs and OS: what the CPU paths' speed depends on."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "Processor", "cpu model")):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 0
    return {
        "cpu": cpu or platform.processor() or "unknown",
        "arch": platform.machine(),
        "cpus": cpus,
        "system": platform.system(),
    }


def _file_signature(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "absent"
    return f"{info.st_size}:{info.st_mtime_ns}"


def _icd_files() -> list[Path]:
    where = os.environ.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
    base = Path(where)
    if base.is_file():
        return [base]
    try:
        return sorted(p for p in base.iterdir() if p.suffix == ".icd")
    except OSError:
        return []


def device_identity() -> dict[str, Any]:
    """The accelerators' drivers as the system registers them, read without opening any."""
    icds = {}
    for icd in _icd_files():
        try:
            library = icd.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        icds[icd.name] = f"{library} {_file_signature(library)}" if library else ""
    nvidia = ""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as f:
            nvidia = f.readline().strip()
    except OSError:
        pass
    env = {name: os.environ[name] for name in _DEVICE_ENV if name in os.environ}
    return {"opencl_icds": icds, "nvidia": nvidia, "env": env}


# -- installed versions ------------------------------------------------------------------------


def _path_signature() -> str:
    """Modification times of the directories packages are installed in: an install, upgrade
    or removal changes one. (Not all of ``sys.path``: its first entry is the running script's
    directory, which differs from one program to the next.)"""
    try:
        dirs = [*site.getsitepackages(), site.getusersitepackages()]
    except AttributeError:  # a virtualenv without the site functions
        dirs = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    parts = []
    for entry in sorted(set(dirs)):
        try:
            info = os.stat(entry)
        except OSError:
            continue
        parts.append(f"{entry}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _requirement_names(distribution: str) -> list[str]:
    try:
        required = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    names = set()
    for line in required:
        match = re.match(r"[A-Za-z0-9._-]+", line)
        if match:
            names.add(match.group(0))
    return sorted(names)


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_versions(distributions: Iterable[str]) -> dict[str, str]:
    """Installed versions of ``distributions``, of everything they require, of offload and
    numpy (the CPU reference's speed is numpy's)."""
    names = {"offload", "numpy"}
    for dist in distributions:
        if dist:
            names.add(dist)
            names.update(_requirement_names(dist))
    found = {}
    for name in sorted(names):
        version = _version(name)
        if version is not None:
            found[name] = version
    found.setdefault("numpy", np.__version__)
    return found


# -- the model's identity -------------------------------------------------------------------------


@dataclass
class ModelSource:
    """Where a model came from: a file (with its stat, for the hash memo) or bytes."""

    content: Any  # bytes or mmap
    path: str | None = None
    stat: dict[str, int] | None = None
    _hash: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, content: Any, model_path: str | os.PathLike[str] | None) -> ModelSource:
        if model_path is None:
            return cls(content)
        path = os.path.realpath(os.fspath(model_path))
        try:
            info = os.stat(path)
        except OSError:
            return cls(content)
        stat = {
            "dev": info.st_dev,
            "ino": info.st_ino,
            "size": info.st_size,
            "mtime_ns": info.st_mtime_ns,
            "ctime_ns": info.st_ctime_ns,
        }
        return cls(content, path, stat)

    def content_hash(self) -> str:
        if self._hash is None:
            self._hash = hashlib.sha256(self.content).hexdigest()
        return self._hash

    def entry_name(self) -> str:
        return f"path:{self.path}" if self.path else f"content:{self.content_hash()}"


# -- lookups and the store ---------------------------------------------------------------------


@dataclass
class Lookup:
    """What a lookup found: ``status`` is "hit", "miss", "changed", "rejected" or "off".

    Where "changed": ``changed`` names the key fields (:data:`KEY_FIELDS`) in which the
    closest stored record differs, and ``differences`` the leaves that differ in them, each
    ``{"key": "options.num_threads", "stored": "1", "now": "2"}`` with values shortened as
    ``detail`` shows them."""

    status: str
    record: dict[str, Any] | None = None
    changed: list[str] = field(default_factory=list)
    detail: str = ""
    path: str | None = None
    differences: list[dict[str, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "changed": list(self.changed),
            "differences": [dict(d) for d in self.differences],
            "detail": self.detail,
            "path": self.path,
        }


# How many differences the detail names before "and N more": a device or version change can
# differ in dozens of leaves, and a person reads the first few (``differences`` has them all).
_SHOWN_DIFFERENCES = 6
_LIST_ITEMS = 4  # a longer list is shown as its count
_TEXT_CHARS = 40  # a longer string is cut to this many characters
_HASH = re.compile(r"[0-9a-f]{32,}")
# Leaves whose null means something a person would not guess from "null".
_NULL_MEANS = {"options.hardware": "any"}


def _show(value: Any, key: str = "", *, nested: bool = False) -> str:
    """``value`` as a short token: JSON scalars, hashes cut to 12 characters, short lists
    comma-joined, longer lists and mappings by their size."""
    if value is None:
        return _NULL_MEANS.get(key, "null")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if _HASH.fullmatch(value):
            return value[:12]
        if not value:
            return '""'
        return value if len(value) <= _TEXT_CHARS else value[: _TEXT_CHARS - 3] + "..."
    if isinstance(value, list):
        if len(value) > _LIST_ITEMS:
            return f"[{len(value)} items]"
        text = ",".join(_show(v, nested=True) for v in value)
        return f"[{text}]" if nested or not value else text
    if isinstance(value, dict):
        return f"{{{len(value)} keys}}"
    return str(value)


def key_differences(stored: Any, now: Any, key: str = "") -> list[dict[str, str]]:
    """The leaves in which ``stored`` and ``now`` differ, walking mappings key by key: a
    difference is said as the few settings that moved, not as two whole dictionaries.
    A key present on one side only is shown as "absent" on the other."""
    if stored == now:
        return []
    if isinstance(stored, dict) and isinstance(now, dict):
        found = []
        for k in sorted(stored.keys() | now.keys(), key=str):
            path = f"{key}.{k}" if key else str(k)
            if k not in stored or k not in now:
                found.append(
                    {
                        "key": path,
                        "stored": _show(stored[k], path) if k in stored else "absent",
                        "now": _show(now[k], path) if k in now else "absent",
                    }
                )
            else:
                found += key_differences(stored[k], now[k], path)
        return found
    return [{"key": key, "stored": _show(stored, key), "now": _show(now, key)}]


def describe_differences(found: list[dict[str, str]]) -> str:
    """``a.b: old -> new; c: old -> new`` for the first few, then how many more."""
    shown = "; ".join(
        f"{d['key']}: {d['stored']} -> {d['now']}" for d in found[:_SHOWN_DIFFERENCES]
    )
    more = len(found) - _SHOWN_DIFFERENCES
    return f"{shown}; and {more} more" if more > 0 else shown


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def cache_directory(explicit: str | os.PathLike[str] | None) -> tuple[Path, bool]:
    """The directory to use and whether the user named it (then a refusal raises)."""
    if explicit is not None:
        return Path(explicit), True
    env = os.environ.get(AUTO_CACHE_ENV)
    if env:
        return Path(env), True
    return default_location(NAMESPACE), False


class DecisionStore:
    """The decisions of one model source, in the cache directory.

    ``strict``: a fault of the cache raises CacheError, where ``directory`` is given (the
    program named it); otherwise a fault warns once and the store is off from then on."""

    def __init__(self, directory: str | os.PathLike[str] | None, *, strict: bool = False) -> None:
        self.path, _ = cache_directory(directory)
        self.strict = strict and directory is not None
        self._entries: EntryStore | None = None
        self.refused = ""
        # Entries read during one resolution: the memos and the lookup read the same one.
        self._read: dict[str, tuple[dict[str, Any] | None, str]] = {}
        # A memo recomputed in this resolution (the file touched, a package installed):
        # written back on a hit, so later processes find it again.
        self.stale_memo = False

    def _store(self) -> EntryStore | None:
        if self._entries is not None or self.refused:
            return self._entries
        cache_dir: CacheDir | None = None
        try:
            cache_dir = CacheDir.open(self.path)
            cache_dir.key()
        except (CacheError, OSError) as exc:
            if cache_dir is not None:
                cache_dir.close()
            self._fault(exc)
            return None
        self._entries = EntryStore(
            cache_dir, namespace=NAMESPACE, context={"format": FORMAT}, limits={KIND: _LIMIT}
        )
        return self._entries

    def _fault(self, exc: OSError) -> None:
        """A fault of the cache: raised where strict, else one warning and the store off.

        OSError covers CacheError (a refusal) and what the file system says under it (EIO,
        ENOSPC, a directory removed meanwhile): either way the cache, not the model, failed.
        """
        if self.strict:
            if isinstance(exc, CacheError):
                raise exc
            raise CacheError(f"auto cache {self.path}: {exc}") from exc
        if self._entries is not None:
            self._entries.directory.close()
            self._entries = None
        if self.refused:
            return  # warned once already
        self.refused = str(exc) or type(exc).__name__
        warnings.warn(
            f"offload runs without remembering delegate choices: the auto cache {self.path} "
            f"is not used ({self.refused}); delegates are chosen without it",
            CacheWarning,
            stacklevel=5,
        )

    def _load(self, name: str) -> tuple[dict[str, Any] | None, str]:
        """The entry's payload (None if absent or rejected) and why it was rejected."""
        if name not in self._read:
            self._read[name] = self._read_entry(name)
        return self._read[name]

    def _read_entry(self, name: str) -> tuple[dict[str, Any] | None, str]:
        store = self._store()
        if store is None:
            return None, self.refused
        before = len(store.rejected)
        try:
            payload = store.load(name, KIND)
        except (CacheError, OSError) as exc:
            self._fault(exc)
            return None, self.refused
        if payload is None:
            rejected = store.rejected[before:]
            return None, "; ".join(why for _, why in rejected)
        try:
            entry = json.loads(payload)
            if not isinstance(entry, dict) or not isinstance(entry.get("records"), list):
                raise ValueError("no record list")
            for record in entry["records"]:
                if not isinstance(record, dict) or not isinstance(record.get("key"), dict):
                    raise ValueError("a record without a key")
                if not isinstance(record.get("chosen"), list):
                    raise ValueError("a record without a choice")
        except ValueError as exc:
            why = f"unreadable decision entry ({exc})"
            store.discard(name, KIND, why)
            return None, why
        return entry, ""

    def model_hash(self, source: ModelSource) -> str:
        """The model's SHA-256, from the entry's memo when the file is unchanged."""
        if source._hash is None and source.path and source.stat:
            entry, _ = self._load(source.entry_name())
            memo = (entry or {}).get("model_memo") or {}
            if memo.get("stat") == source.stat and isinstance(memo.get("sha256"), str):
                source._hash = memo["sha256"]
            elif entry is not None:
                self.stale_memo = True
        return source.content_hash()

    def versions(self, source: ModelSource, distributions: Iterable[str]) -> dict[str, str]:
        """Installed versions, from the entry's memo when no import directory changed."""
        signature = _path_signature()
        entry, _ = self._load(source.entry_name())
        memo = (entry or {}).get("versions_memo") or {}
        wanted = sorted(set(distributions))
        if memo.get("path") == signature and memo.get("distributions") == wanted:
            found = memo.get("versions")
            if isinstance(found, dict):
                return dict(found)
        if entry is not None:
            self.stale_memo = True
        return package_versions(wanted)

    def refresh_memos(self, source: ModelSource, versions_memo: Mapping[str, Any]) -> None:
        """Write the entry back with memos recomputed in this resolution, if any were."""
        if not self.stale_memo:
            return
        store = self._store()
        name = source.entry_name()
        entry, _ = self._load(name)
        if store is None or entry is None:
            return
        payload = dict(entry)
        if source.path and source.stat:
            payload["model_memo"] = {"stat": source.stat, "sha256": source.content_hash()}
        payload["versions_memo"] = _jsonable(dict(versions_memo))
        self._read.pop(name, None)
        self.stale_memo = False
        self._write(store, name, json.dumps(payload, sort_keys=True).encode())

    def _write(self, store: EntryStore, name: str, payload: bytes) -> bool:
        try:
            return store.store(name, KIND, payload)
        except (CacheError, OSError) as exc:
            self._fault(exc)
            return False

    def lookup(self, source: ModelSource, key: Mapping[str, Any]) -> Lookup:
        where = str(self.path)
        store = self._store()  # raises only where strict
        if store is None:
            return Lookup("off", detail=self.refused, path=where)
        entry, rejected = self._load(source.entry_name())
        if self.refused:  # the read itself failed: the cache went off
            return Lookup("off", detail=self.refused, path=where)
        if entry is None:
            if rejected:
                return Lookup("rejected", detail=f"stored entry rejected: {rejected}", path=where)
            return Lookup("miss", detail="no decision stored for this model here", path=where)
        key = _jsonable(dict(key))
        # The closest record: fewest key fields apart, then fewest settings within them.
        best: tuple[int, int, list[str], list[dict[str, str]]] | None = None
        for record in entry["records"]:
            found = record["key"]
            differ = [f for f in KEY_FIELDS if found.get(f) != key.get(f)]
            if not differ:
                return Lookup("hit", record=record, path=where)
            leaves = [d for f in differ for d in key_differences(found.get(f), key.get(f), f)]
            if best is None or (len(differ), len(leaves)) < best[:2]:
                best = (len(differ), len(leaves), differ, leaves)
        changed, leaves = (best[2], best[3]) if best else ([], [])
        detail = "the stored decision was made with other settings: " + describe_differences(leaves)
        return Lookup("changed", changed=changed, detail=detail, path=where, differences=leaves)

    def save(
        self,
        source: ModelSource,
        key: Mapping[str, Any],
        record: Mapping[str, Any],
        versions_memo: Mapping[str, Any] | None = None,
    ) -> bool:
        store = self._store()
        if store is None:
            return False
        name = source.entry_name()
        entry, _ = self._load(name)
        key = _jsonable(dict(key))
        new = _jsonable({**record, "key": key, "stored_at": time.time()})
        older = [r for r in (entry or {}).get("records", []) if r.get("key") != key]
        payload: dict[str, Any] = {"records": [new, *older][:MAX_RECORDS]}
        if source.path and source.stat:
            payload["model_memo"] = {"stat": source.stat, "sha256": source.content_hash()}
        if versions_memo is not None:
            payload["versions_memo"] = _jsonable(dict(versions_memo))
        self._read.pop(name, None)
        return self._write(store, name, json.dumps(payload, sort_keys=True).encode())


def versions_memo(distributions: Iterable[str], versions: Mapping[str, str]) -> dict[str, Any]:
    return {
        "path": _path_signature(),
        "distributions": sorted(set(distributions)),
        "versions": dict(versions),
    }


def clear_auto_cache(directory: str | os.PathLike[str] | None = None) -> int:
    """Forget every decision ``delegates="auto"`` remembered; returns how many entries went.

    ``directory``: the cache directory (default: ``$OFFLOAD_AUTO_CACHE_DIR``, else
    ``~/.cache/offload/auto``). The next ``"auto"`` (or default) interpreter of each model
    measures again. Raises :class:`~offload.errors.CacheError` if the directory is refused.
    """
    path, _ = cache_directory(directory)
    if not os.path.lexists(path):
        return 0
    cache_dir = CacheDir.open(path, create=False)
    removed = 0
    try:
        with os.scandir(cache_dir.fd) as it:
            names = [
                e.name
                for e in it
                if e.name.endswith(f".{KIND}") and e.is_file(follow_symlinks=False)
            ]
        for name in names:
            try:
                os.unlink(name, dir_fd=cache_dir.fd)
                removed += 1
            except FileNotFoundError:
                pass
    finally:
        cache_dir.close()
    return removed
