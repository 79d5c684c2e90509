"""The compiled-model cache: what OpenVINO compiled for a partition, kept on disk.

OpenVINO's own ``CACHE_DIR`` keys its blobs on the model it is handed, so it saves only the
compile step: the partition would still be exported and read by the TensorFlow Lite frontend
on every start, which on InceptionV3 takes longer than compiling. Here the key is
``offload.partition_fingerprint`` (one hash over the partition, no export) with the device and
the compile settings; on a hit the compiled model is imported from memory
(``Core.import_model``), with no export, no file and no conversion.

Entries are :mod:`offload.cache` entries: a directory that is ours and private, each payload
sealed with an HMAC and written atomically, an entry made for another OpenVINO build, device,
plugin version or setting refused as stale. That matters here because OpenVINO parses an
imported blob natively: a damaged or planted one never reaches it. A blob OpenVINO still
refuses to import is discarded with a warning and the partition compiled again.

Devices that cannot export a compiled model (``AUTO``, some virtual devices) use OpenVINO's
own ``CACHE_DIR`` instead, a subdirectory of the same checked cache directory.

An explicit ``cache_dir`` that is refused raises :class:`offload.errors.CacheError`; the default
one (``offload.cache.default_location("openvino")``), which the user did not choose, falls back
to running without a cache, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from offload.cache import CacheDir, CacheWarning, EntryStore, default_location
from offload.errors import CacheError

__all__ = ["CompiledModelCache", "open_cache"]

_KIND = "ovblob"
# A compiled model holds the partition's weights (a .tflite stays under 2 GiB), in the
# precision it runs at, plus OpenVINO's graph.
_LIMITS = {_KIND: 4 << 30}
_NATIVE = "openvino-native"


class CompiledModelCache:
    """Compiled models of one (OpenVINO build, device, plugin version) under ``directory``."""

    def __init__(self, directory: CacheDir, identity: Mapping[str, str]) -> None:
        self.directory = directory
        self.identity = dict(identity)
        self.entries = EntryStore(
            directory, namespace="openvino", context=self.identity, limits=_LIMITS
        )

    @staticmethod
    def key(fingerprint: str, settings: Mapping[str, Any]) -> str:
        """The entry of a partition compiled with ``settings`` (device, properties, shapes)."""
        text = json.dumps(dict(settings), sort_keys=True, default=str)
        return hashlib.sha256(f"{fingerprint}\n{text}".encode()).hexdigest()

    def load(self, key: str) -> memoryview | None:
        """The compiled model stored under ``key``, as a writable view of the buffer read from
        disk (OpenVINO imports it from there without a copy)."""
        return self.entries.load_buffer(key, _KIND)

    def store(self, key: str, blob: bytes) -> bool:
        return self.entries.store(key, _KIND, blob)

    def discard(self, key: str, why: str) -> None:
        self.entries.discard(key, _KIND, why)

    def native_dir(self) -> str:
        """OpenVINO's own ``CACHE_DIR`` for devices that cannot export: a private directory
        inside this one, checked as the rest."""
        sub = CacheDir.open(self.directory.path / _NATIVE)
        return str(sub.path)


def open_cache(cache_dir: str | None, identity: Mapping[str, str]) -> CompiledModelCache | None:
    """The cache the ``cache_dir`` option names: None for ``""`` (no cache, as OpenVINO's
    ``CACHE_DIR=""``), the default location for None."""
    if cache_dir == "":
        return None
    chosen = cache_dir is not None
    path = Path(cache_dir) if cache_dir is not None else default_location("openvino")
    try:
        directory = CacheDir.open(path)
        directory.key()  # a refused key file refuses the cache now, not halfway through init
    except CacheError as exc:
        if chosen:
            raise  # the user chose this directory: say so rather than run uncached
        warnings.warn(f"openvino: {exc}; compiling without a cache", CacheWarning, stacklevel=3)
        return None
    return CompiledModelCache(directory, identity)
