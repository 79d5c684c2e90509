"""The serialization cache: compiled program binaries and pre-transformed constants on disk.

The file-system rules live in :mod:`offload.cache`, which every delegate shares. It refuses a
symlinked, foreign or group-writable directory, reads only regular files up to a limit per
kind, seals every entry with an HMAC and writes atomically. This module adds what is
gpu_opencl's own:

- each entry's context: device, driver and plugin version, plus the partition's content hash.
  The user's ``model_token`` only *names* entries; the content hash guards them, so reusing a
  token for a model with other weights rebuilds the entries instead of loading stale ones.
- the size limit of each kind: program binaries, constants, the autotuner's choices.
- what a constants payload must be once decoded: an ``.npz`` of float32 arrays (what
  ``Lowering`` makes), read without pickles. The names must also be exactly those the lowering
  asks for, which the kernel checks (_kernel).

``serialization_dir`` is always the user's explicit choice, so a refused directory raises
:class:`offload.errors.CacheError` rather than quietly running without a cache.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from offload.cache import CacheDir, EntryStore

__all__ = ["SerializationCache", "LIMITS"]

# The largest entry of each kind. PoCL's binary of the whole program is ~1.2 MB. Constants are
# float32 copies of a partition's weights (int8 weights grow 4x), and a .tflite file stays
# under 2 GiB. The autotuner's choices (_autotune) are a JSON map of ~100-byte entries, one per
# distinct product of the partition.
LIMITS = {"clbin": 256 << 20, "npz": 8 << 30, "json": 4 << 20}


class SerializationCache:
    """Entries of one partition on one (device, driver, plugin version) under ``directory``."""

    def __init__(
        self, directory: str | os.PathLike[str], identity: dict[str, str], content: str = ""
    ) -> None:
        self.directory = Path(directory)
        self.identity = dict(identity)
        cache_dir = CacheDir.open(self.directory)
        cache_dir.key()  # a refused key file refuses the cache now, not halfway through init
        self.entries = EntryStore(
            cache_dir,
            namespace="gpu_opencl",
            context={**self.identity, "content": content},
            limits=LIMITS,
        )

    def path(self, key: str, kind: str) -> Path:
        return self.entries.path(key, kind)

    # -- raw entries -------------------------------------------------------------------------

    def load(self, key: str, kind: str) -> bytes | None:
        """The payload stored under (key, kind); None if absent, rejected or stale."""
        return self.entries.load(key, kind)

    def store(self, key: str, kind: str, payload: bytes) -> None:
        self.entries.store(key, kind, payload)

    def discard(self, key: str, kind: str, why: str) -> None:
        self.entries.discard(key, kind, why)

    # -- typed entries -----------------------------------------------------------------------

    def load_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        """Float32 arrays by name; None (the entry discarded) if the payload is not that."""
        payload = self.load(key, "npz")
        if payload is None:
            return None
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except Exception as exc:  # an entry that passed its HMAC but is not an npz
            self.discard(key, "npz", f"unreadable array archive ({type(exc).__name__})")
            return None
        for name, arr in arrays.items():
            if arr.dtype != np.float32:
                self.discard(key, "npz", f"constant {name!r} is {arr.dtype}, not float32")
                return None
        return arrays

    def store_arrays(self, key: str, arrays: dict[str, Any]) -> None:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        self.store(key, "npz", buf.getvalue())
