"""The serialization cache: compiled program binaries and pre-transformed constants on disk.

Every entry is one file: a magic line, a one-line JSON header, then the payload. The header
carries the entry's key, the device, driver and plugin version it was made for, and the
payload's size and sha256. A reader checks all of them; an entry that fails any check is
corrupt or stale, is deleted and rebuilt by the caller (never a crash, never a wrong result).
Writers write a temporary file in the same directory and ``os.replace`` it into place, so a
reader (or a concurrent writer) never sees half an entry. The directory is created 0700.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SerializationCache", "MAGIC"]

MAGIC = b"OFFLOAD-GPU-OPENCL-CACHE 1\n"


class SerializationCache:
    """Entries for one (device, driver, plugin version) under ``directory``."""

    def __init__(self, directory: str | os.PathLike[str], identity: dict[str, str]) -> None:
        self.directory = Path(directory)
        self.identity = dict(identity)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)

    def path(self, key: str, kind: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()[:40]
        return self.directory / f"{digest}.{kind}"

    # -- raw entries -------------------------------------------------------------------------

    def load(self, key: str, kind: str) -> bytes | None:
        """The payload stored under (key, kind), or None if absent, corrupt or stale."""
        path = self.path(key, kind)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            warnings.warn(f"gpu_opencl cache: cannot read {path}: {exc}", stacklevel=3)
            return None
        problem = None
        payload = b""
        if not blob.startswith(MAGIC):
            problem = "bad magic line"
        else:
            head_end = blob.find(b"\n", len(MAGIC))
            try:
                header = json.loads(blob[len(MAGIC) : head_end])
            except (ValueError, UnicodeDecodeError):
                header = None
            if head_end < 0 or not isinstance(header, dict):
                problem = "unreadable header"
            else:
                payload = blob[head_end + 1 :]
                if header.get("key") != key or header.get("kind") != kind:
                    problem = "entry belongs to another key"
                elif any(header.get(k) != v for k, v in self.identity.items()):
                    problem = "stale entry (device, driver or plugin version changed)"
                elif header.get("size") != len(payload):
                    problem = f"truncated payload ({len(payload)} of {header.get('size')} bytes)"
                elif header.get("sha256") != hashlib.sha256(payload).hexdigest():
                    problem = "checksum mismatch"
        if problem:
            self.discard(key, kind, problem)
            return None
        return payload

    def store(self, key: str, kind: str, payload: bytes) -> None:
        """Write an entry atomically (temporary file in the same directory, then replace)."""
        header = {
            "key": key,
            "kind": kind,
            **self.identity,
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        path = self.path(key, kind)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=f".{kind}")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC)
                f.write(json.dumps(header, sort_keys=True).encode() + b"\n")
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            warnings.warn(f"gpu_opencl cache: cannot write {path}: {exc}", stacklevel=3)

    def discard(self, key: str, kind: str, why: str) -> None:
        path = self.path(key, kind)
        warnings.warn(f"gpu_opencl cache: discarding {path.name}: {why}; rebuilding", stacklevel=4)
        try:
            path.unlink()
        except OSError:
            pass

    # -- typed entries -----------------------------------------------------------------------

    def load_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        payload = self.load(key, "npz")
        if payload is None:
            return None
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as data:
                return {name: data[name] for name in data.files}
        except Exception as exc:  # a payload that passed its checksum but is not an npz
            self.discard(key, "npz", f"unreadable array archive ({type(exc).__name__})")
            return None

    def store_arrays(self, key: str, arrays: dict[str, Any]) -> None:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        self.store(key, "npz", buf.getvalue())
