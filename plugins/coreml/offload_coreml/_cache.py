"""The on-disk cache of converted programs.

Every entry is a tree entry of :mod:`offload.cache`: a private directory holding
``model.mlpackage``, a manifest (size and SHA-256 of every file) under an HMAC, and the key
that seals it. On load every file is checked against the manifest, and links, FIFOs, foreign
files and oversized trees are refused. A bad entry is deleted with a warning and converted
again. The checks on the directory itself (no symlink, ours, not writable by others, made
0700, never chmod'ed if someone else made it) are also :mod:`offload.cache`'s.

The key names the entry. It covers what changes the program: the partition's content (ops,
options, shapes and constant bytes) or, if the user gives ``model_token``, that token plus the
partition's node list; the conversion options; and the versions of this plugin and
coremltools. The guard is always the content key, even with a token: a token reused for a
model with other weights gets its entry rebuilt, not the old program.

An explicit ``cache_dir`` that is refused raises :class:`offload.errors.CacheError`. The
default directory (``~/.cache/offload/coreml``), which the user did not choose, falls back to
converting into a private temporary directory, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from offload import Partition, Subgraph
from offload.cache import CacheDir, CacheWarning, EntryStore, default_location
from offload.errors import CacheError

__all__ = ["default_cache_dir", "partition_key", "ProgramCache"]

_PACKAGE = "model.mlpackage"
_KIND = "mlprogram"
# Weights are float16 or float32 copies of the partition's constants, and a .tflite file stays
# under 2 GiB.
_LIMITS = {_KIND: 8 << 30}


def default_cache_dir() -> Path:
    return default_location("coreml")


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


class ProgramCache:
    """Converted ``.mlpackage`` directories by key: private, sealed, written atomically.

    ``root=None`` means the default directory. If that one is refused, packages are converted
    into a temporary directory that lives as long as this object.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.directory: CacheDir | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        try:
            self.directory = CacheDir.open(self.root)
        except CacheError as exc:
            if root is not None:
                raise  # the user chose this directory: say so rather than run uncached
            warnings.warn(f"coreml: {exc}; converting without a cache", CacheWarning, stacklevel=2)
            self._scratch = tempfile.TemporaryDirectory(prefix="offload-coreml-")

    def _store(self, key: str, guard: str | None) -> EntryStore:
        assert self.directory is not None
        return EntryStore(
            self.directory, namespace="coreml", context={"content": guard or key}, limits=_LIMITS
        )

    def valid(self, key: str, guard: str | None = None) -> bool:
        """Whether a good entry is stored under ``key`` (a bad one is discarded, with a warning)."""
        return (
            self.directory is not None and self._store(key, guard).load_tree(key, _KIND) is not None
        )

    def get_or_build(
        self, key: str, build: Callable[[Path], None], guard: str | None = None
    ) -> tuple[Path, bool]:
        """The package for ``key``; ``build(path)`` writes it when missing, stale or corrupt.

        ``guard`` is the content key (default: ``key`` itself); an entry made for another
        content is rebuilt. Returns ``(package path, True if it came from the cache)``.
        """
        if self.directory is None:
            assert self._scratch is not None
            path = Path(tempfile.mkdtemp(dir=self._scratch.name)) / _PACKAGE
            build(path)
            return path, False
        store = self._store(key, guard)
        root = store.load_tree(key, _KIND)
        if root is not None:
            return root / _PACKAGE, True
        return store.store_tree(key, _KIND, lambda tree: build(tree / _PACKAGE)) / _PACKAGE, False
