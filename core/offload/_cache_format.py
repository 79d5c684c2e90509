"""The sealed format of an offload.cache entry: the magic line, the HMAC, the header.

An entry is the magic line, the hex HMAC-SHA256 line, then the sealed region: a JSON header
line and the payload. The HMAC is taken over the SHA-256 of each :data:`_PIECE` bytes of the
region, so that a large entry is checked on every core, piece by piece as it is read. What a
file system can do to an entry is offload._cache_files' business; this module only says
whether bytes that were read are an entry sealed under a key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

_MAGIC = b"OFFLOAD-CACHE 3\n"
# What every format's magic line starts with: an entry of another format is stale, not forged.
_MAGIC_PREFIX = b"OFFLOAD-CACHE "

_TAG_LEN = 64  # hex HMAC-SHA256
_HEADER_MAX = 64 * 1024  # the JSON header line; ours are a few hundred bytes
_OVERHEAD = len(_MAGIC) + _TAG_LEN + 1 + _HEADER_MAX + 1
# The sealed region (header line and payload) starts right after the tag line.
_REGION = len(_MAGIC) + _TAG_LEN + 1
_PIECE = 4 << 20
# Entries of fewer pieces are hashed on the calling thread: threads cost more than they save.
_PARALLEL_PIECES = 4


class _Rejected(Exception):
    """Why a file or entry is not trusted; becomes a warning or a CacheError, never escapes."""


def _sha256(piece: memoryview) -> bytes:
    return hashlib.sha256(piece).digest()  # without the GIL: pieces hash in parallel


class _Pieces:
    """SHA-256 of each :data:`_PIECE` bytes of a sealed region (what an entry's HMAC covers),
    which starts at ``start`` in the buffer fed. A region of many pieces is hashed on worker
    threads, each piece as soon as it is there."""

    def __init__(self, region_size: int, start: int) -> None:
        self.start = start
        count = -(-max(0, region_size) // _PIECE)
        self.pool = ThreadPoolExecutor(os.cpu_count() or 1) if count >= _PARALLEL_PIECES else None
        self.started: list[Future[bytes]] = []

    def feed(self, view: memoryview, available: int) -> None:
        """Start on every whole piece within ``view[:available]`` not yet started."""
        if self.pool is None:
            return
        while (end := self.start + (len(self.started) + 1) * _PIECE) <= available:
            self.started.append(self.pool.submit(_sha256, view[end - _PIECE : end]))

    def digests(self, view: memoryview) -> bytes:
        """Every piece's digest, in order, once ``view`` holds the whole region."""
        self.feed(view, len(view))
        rest = range(self.start + len(self.started) * _PIECE, len(view), _PIECE)
        tail = [_sha256(view[at : at + _PIECE]) for at in rest]
        done = [future.result() for future in self.started]
        self.cancel()
        return b"".join(done + tail)

    def cancel(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


@dataclass
class _Read:
    """A file read whole, and the hashing of its pieces started meanwhile (None: not yet)."""

    data: bytes | bytearray
    pieces: _Pieces | None


def _tag(key: bytes, pieces: bytes) -> bytes:
    return hmac.new(key, _MAGIC + pieces, hashlib.sha256).hexdigest().encode()


def _seal(key: bytes, header: dict[str, Any], payload: bytes) -> tuple[bytes, ...]:
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    # The region is head, newline, payload; only its first piece is copied to be hashed.
    split = _PIECE - len(head) - 1
    rest = memoryview(payload)[split:]
    digests = _sha256(memoryview(b"".join((head, b"\n", payload[:split]))))
    digests += _Pieces(len(rest), 0).digests(rest)
    return _MAGIC, _tag(key, digests), b"\n", head, b"\n", payload


def _unseal(key: bytes, read: _Read) -> tuple[dict[str, Any], int]:
    """Header and payload offset of a sealed blob whose HMAC holds; the header is read only
    then."""
    blob = read.data
    pieces = read.pieces or _Pieces(len(blob) - _REGION, _REGION)
    try:
        if not blob.startswith(_MAGIC):
            if blob.startswith(_MAGIC_PREFIX):
                found = bytes(blob[len(_MAGIC_PREFIX) : blob.find(b"\n", 0, 32)])
                raise _Rejected(
                    f"written in cache format {found.decode(errors='replace')!r} by another "
                    f"offload, this one reads format {_MAGIC.decode().split()[-1]}"
                )
            raise _Rejected("not a cache entry (bad magic line)")
        tag_end = len(_MAGIC) + _TAG_LEN
        head_end = blob.find(b"\n", tag_end + 1, tag_end + 2 + _HEADER_MAX)
        if blob[tag_end : tag_end + 1] != b"\n" or head_end < 0:
            raise _Rejected("unreadable entry (truncated or not ours)")
        tag = _tag(key, pieces.digests(memoryview(blob)))
    finally:
        pieces.cancel()
    if not hmac.compare_digest(tag, blob[len(_MAGIC) : tag_end]):
        raise _Rejected("HMAC mismatch: the entry was altered, forged or damaged")
    try:
        header = json.loads(blob[tag_end + 1 : head_end])
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise _Rejected("unreadable header")
    return header, head_end + 1
