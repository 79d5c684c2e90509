"""The on-disk cache of converted programs.

Layout: ``<cache_dir>/<key>/model.mlpackage`` plus ``<key>/checksums.json`` (SHA-256 of every
file in the package). The directory is created private (0700) and refused if someone else can
write to it. An entry is written in a temporary directory beside it and renamed into place, so
readers see a whole entry or none; an entry whose checksums do not match is deleted and rebuilt.

The key covers what changes the program: the partition's content (ops, options, shapes and
constant bytes) or, if the user gives ``model_token``, that token plus the partition's node
list; the conversion options; and the versions of this plugin and coremltools.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from offload import Partition, Subgraph

__all__ = ["default_cache_dir", "partition_key", "ProgramCache"]

_CHECKSUMS = "checksums.json"
_PACKAGE = "model.mlpackage"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "offload" / "coreml"


def partition_key(
    subgraph: Subgraph, partition: Partition, settings: Mapping[str, Any], model_token: str | None
) -> str:
    """A hex digest naming the converted program of ``partition`` under ``settings``."""
    h = hashlib.sha256()
    h.update(json.dumps(dict(settings), sort_keys=True, default=str).encode())
    h.update(repr(partition.nodes).encode())
    if model_token:
        h.update(b"token:" + model_token.encode())
        return h.hexdigest()
    tensors = subgraph.tensors
    for n in partition.nodes:
        node = subgraph.nodes[n]
        h.update(f"{node.op}/{node.version}/{sorted(node.options.items())!r}".encode())
        for t in (*node.inputs, *node.outputs):
            if t < 0:
                h.update(b"-")
                continue
            tensor = tensors[t]
            h.update(f"{t}:{tensor.shape}:{tensor.dtype}".encode())
            if tensor.data is not None and tensor.dtype != np.dtype(object):
                h.update(np.ascontiguousarray(tensor.data).tobytes())
    return h.hexdigest()


def _files(root: Path) -> Iterable[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _checksums(package: Path) -> dict[str, str]:
    sums: dict[str, str] = {}
    for path in _files(package):
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        sums[path.relative_to(package).as_posix()] = digest.hexdigest()
    return sums


class ProgramCache:
    """Converted ``.mlpackage`` directories by key, private, checksummed, written atomically."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()

    def _ensure_root(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = self.root.stat()
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise PermissionError(f"cache directory {self.root} belongs to another user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(self.root, 0o700)

    def path(self, key: str) -> Path:
        return self.root / key / _PACKAGE

    def valid(self, key: str) -> bool:
        entry = self.root / key
        try:
            recorded = json.loads((entry / _CHECKSUMS).read_text())
        except (OSError, ValueError):
            return False
        return isinstance(recorded, dict) and recorded == _checksums(entry / _PACKAGE)

    def get_or_build(self, key: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
        """The package for ``key``; ``build(path)`` writes it when missing or corrupt.

        Returns ``(package path, True if it came from the cache)``.
        """
        self._ensure_root()
        entry = self.root / key
        if self.valid(key):
            return entry / _PACKAGE, True
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)  # corrupt or half-deleted: rebuild
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=self.root))
        try:
            build(tmp / _PACKAGE)
            (tmp / _CHECKSUMS).write_text(json.dumps(_checksums(tmp / _PACKAGE), indent=1))
            try:
                os.rename(tmp, entry)
            except OSError:
                if not self.valid(key):  # another process won the race with a bad entry
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return entry / _PACKAGE, False
