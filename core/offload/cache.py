"""On-disk caches for delegates, built not to trust their own directory.

Delegates keep what is slow to make in a cache directory: compiled programs, pre-transformed
weights, converted model packages. Anything in that directory may have been put there by
someone else, damaged, or made for another model. This module reads nothing it has not checked
first. Third-party delegates should use it instead of opening cache files themselves::

    from offload.cache import CacheDir, EntryStore

    store = EntryStore(
        CacheDir.open(path),  # offload.errors.CacheError if the directory is refused
        namespace="my_delegate",
        context={"device": device_name, "plugin": __version__, "content": model_hash},
        limits={"bin": 256 << 20},  # the largest entry of each kind, in bytes
    )
    blob = store.load(key, "bin")  # bytes, or None: absent or rejected, so rebuild
    if blob is None:
        blob = compile_it()
        store.store(key, "bin", blob)

The rules, each for a way a cache has been used against its users:

- **The directory.** Its last component is opened with ``O_NOFOLLOW``, so a symbolic link is
  refused, never followed. It must be a directory owned by us (the effective uid) and not
  writable by group or others. A directory we create gets mode 0700; a directory we did not
  create is never chmod'ed. After this check every operation goes through the directory's file
  descriptor (``openat`` and friends), so swapping the path afterwards changes nothing.
  Ancestors are not checked: a symlinked ``~/.cache`` is common and legitimate.
- **Files.** They are opened with ``O_NOFOLLOW | O_NONBLOCK``, so a FIFO cannot block and a
  symlink is refused. ``fstat`` must show a regular file, owned by us, no larger than the
  kind's limit. Reads never go past the size ``fstat`` reported.
- **Integrity.** Every entry carries an HMAC-SHA256 under a random 32-byte key kept in the
  cache directory as ``.offload-key``. That file is created atomically (``link(2)`` of a
  finished 0600 file) and must be a regular 0600 file owned by us; otherwise the cache is
  refused. An altered or forged entry fails the HMAC even if its checksums were recomputed.
  The HMAC is taken over the SHA-256 of each 4 MiB piece of the entry, so that a large entry
  (a compiled network of 100 MB) is checked on every core, piece by piece as it is read.
- **Identity.** ``key`` names an entry; ``context`` guards it. An entry made under another
  context (device, versions, the model's content hash) is stale. Put the content hash in the
  context even when the user names the model (LiteRT's ``model_token``): the token names, the
  hash guards.
- **Rejection.** An entry that fails a check is deleted with a :class:`CacheWarning`, its
  reason is recorded in :attr:`EntryStore.rejected`, and the caller rebuilds it. A rejected
  entry is never loaded.
- **Writes.** A temporary file (``O_EXCL``, 0600) in the same directory, then ``fsync``, then
  ``rename``: a reader sees a whole entry or none.
- **Trees.** A directory entry (a Core ML ``.mlpackage``, say) is built in a private
  temporary directory, then sealed with a manifest of every file's size and SHA-256 under an
  HMAC. The tree holds its own key file and manifest, so it is self-contained and one rename
  commits it. On load every file is checked against the manifest by the rules above.

These checks cover the file system. What a payload means is the caller's business: after
decoding it, check what you decoded (dtype, shape) against what the model needs.

POSIX only (``O_NOFOLLOW``, ``openat``); elsewhere :meth:`CacheDir.open` raises
:class:`~offload.errors.CacheError`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
import warnings
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from offload._cache_files import (
    _DIRECTORY,
    _KEY_FILE,
    _MANIFEST_FILE,
    _MANIFEST_MAX,
    _NOFOLLOW,
    _TMP,
    _check_owner,
    _close_dir,
    _key_of,
    _make_parents,
    _open_dir,
    _read_key,
    _read_regular,
    _read_regular_writable,
    _remove,
    _scan_tree,
    _what,
    _write_new,
)
from offload._cache_files import KEY_BYTES as KEY_BYTES  # offload.cache.KEY_BYTES, as before
from offload._cache_format import _MAGIC, _OVERHEAD, _Read, _Rejected, _seal, _unseal
from offload._deprecation import deprecated_attributes, deprecation
from offload.errors import CacheError

__all__ = [
    "CacheDir",
    "CACHE_DIR_ENV",
    "CacheWarning",
    "EntryStore",
    "default_location",
]

_KIND_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


# The root of every delegate's default cache directory (see default_location).
CACHE_DIR_ENV = "OFFLOAD_CACHE_DIR"


def default_location(namespace: str) -> Path:
    """Where a delegate keeps its cache when the user names no directory: ``namespace`` under
    ``$OFFLOAD_CACHE_DIR`` where that is set (one root for every delegate's cache: a CI job
    or a container points it at a volume), else under ``$XDG_CACHE_HOME/offload``
    (``~/.cache/offload`` where that is unset), as most Linux tools place theirs. Only a path:
    :meth:`CacheDir.open` checks and creates it."""
    root = os.environ.get(CACHE_DIR_ENV)
    if root:
        return Path(root) / namespace
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "offload" / namespace


class CacheWarning(UserWarning):
    """An entry was rejected (it will be rebuilt) or could not be written; the run goes on."""


# -- the public classes -----------------------------------------------------------------------


class CacheDir:
    """A cache directory that passed the checks, used from then on through its descriptor.

    Make one with :meth:`open`. ``path`` is for messages and for handing paths to libraries
    that want one; this module itself works through ``fd``.
    """

    def __init__(self, path: Path, fd: int, created: bool) -> None:
        self.path = path
        self.fd = fd
        self.created = created
        self._key: bytes | None = None
        # Uncommitted trees handed out by EntryStore.store_tree; removed when this closes.
        self._scratch: set[str] = set()
        self._finalizer = weakref.finalize(self, _close_dir, fd, self._scratch)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = True) -> CacheDir:
        """Open (or create, mode 0700) the directory ``path``, or raise CacheError."""
        where = Path(os.path.abspath(os.fspath(path)))  # abspath: normalises, follows nothing
        if not (_NOFOLLOW and _DIRECTORY and os.open in os.supports_dir_fd):
            raise CacheError(
                f"cache directory {where}: this platform lacks O_NOFOLLOW/openat, which the "
                "cache needs to check what it reads; run without a cache here"
            )
        created = False
        if create and not os.path.lexists(where):
            try:
                _make_parents(where.parent)
                os.mkdir(where, 0o700)
                created = True
            except FileExistsError:
                pass  # made by someone else meanwhile: checked below like any other
            except OSError as exc:
                raise CacheError(f"cannot create cache directory {where}: {exc.strerror}") from exc
        try:
            fd = _open_dir(None, where)
        except _Rejected as exc:
            raise CacheError(_refusal(where, str(exc))) from None
        try:
            info = os.fstat(fd)
            _check_owner(info, "it")
            mode = stat.S_IMODE(info.st_mode)
            if created and mode != 0o700:
                os.fchmod(fd, 0o700)  # ours, just made: the umask may have taken bits away
            elif mode & 0o022:
                raise _Rejected(
                    f"it is writable by group or others (mode {mode:#o}); offload never changes "
                    "the mode of a directory it did not create: run `chmod go-w` on it yourself"
                )
        except _Rejected as exc:
            os.close(fd)
            raise CacheError(_refusal(where, str(exc))) from None
        except BaseException:
            os.close(fd)
            raise
        return cls(where, fd, created)

    def key(self) -> bytes:
        """This directory's HMAC key (created on first use), or CacheError if it is refused."""
        if self._key is None:
            try:
                self._key = _key_of(self.fd)
            except (_Rejected, OSError) as exc:
                raise CacheError(
                    f"cache directory {self.path}: key file refused: {exc}; delete "
                    f"{self.path / _KEY_FILE} to start afresh (every entry is then rebuilt)"
                ) from None
        return self._key

    def close(self) -> None:
        """Remove this directory's uncommitted scratch trees and close its descriptor."""
        self._finalizer()
        self.fd = -1  # later use fails with EBADF instead of reaching a reused descriptor

    def __repr__(self) -> str:
        return f"CacheDir({str(self.path)!r})"


def _refusal(where: Path, why: str) -> str:
    return (
        f"cache directory {where} refused: {why}. A cache is only trusted in a directory of "
        "your own: give another path (or none, to run without a cache)"
    )


class EntryStore:
    """Sealed entries in a :class:`CacheDir`, by ``(key, kind)``.

    ``namespace`` names the owner (a delegate) and keeps two owners' entries apart.
    ``context`` is what an entry must have been made for (JSON values: device, driver,
    versions, the model's content hash); one made for another is stale. ``limits`` gives each
    kind this store handles its largest size in bytes: the payload of a file entry, the sum
    of the files of a tree.
    """

    def __init__(
        self,
        directory: CacheDir,
        *,
        namespace: str,
        context: Mapping[str, Any],
        limits: Mapping[str, int],
    ) -> None:
        for kind, limit in limits.items():
            if not kind or len(kind) > 16 or not set(kind) <= _KIND_CHARS or limit <= 0:
                raise ValueError(f"bad cache kind {kind!r} or limit {limit!r}")
        self.directory = directory
        self.namespace = namespace
        # A JSON round trip, so the context compares equal to what a header reads back.
        self.context = json.loads(json.dumps(dict(context), sort_keys=True))
        self.limits = dict(limits)
        self.rejected: list[tuple[str, str]] = []  # (file name, reason), oldest first

    # -- names ------------------------------------------------------------------------------

    def name(self, key: str, kind: str) -> str:
        """The entry's file name: a digest of ``key`` (never the key itself), then the kind."""
        self._limit(kind)
        return f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.{kind}"

    def path(self, key: str, kind: str) -> Path:
        return self.directory.path / self.name(key, kind)

    def _limit(self, kind: str) -> int:
        try:
            return self.limits[kind]
        except KeyError:
            raise ValueError(
                f"{self.namespace} cache: kind {kind!r} has no size limit; "
                f"declared: {sorted(self.limits)}"
            ) from None

    def _header(self, key: str, kind: str) -> dict[str, Any]:
        return {"namespace": self.namespace, "key": key, "kind": kind, "context": self.context}

    def _check(self, header: dict[str, Any], key: str, kind: str) -> None:
        want = self._header(key, kind)
        for field in ("namespace", "key", "kind"):
            if header.get(field) != want[field]:
                raise _Rejected(f"the entry belongs to another {field}")
        found = header.get("context")
        if not isinstance(found, dict):
            raise _Rejected("unreadable header")
        keys = found.keys() | self.context.keys()
        changed = sorted(k for k in keys if found.get(k) != self.context.get(k))
        if changed:
            raise _Rejected(f"stale entry, made for another {', '.join(changed)}")

    # -- file entries -------------------------------------------------------------------------

    def load(self, key: str, kind: str) -> bytes | None:
        """The payload stored under ``(key, kind)``; None if absent or rejected (rebuild it).

        Raises CacheError if the directory's key file is refused (see :meth:`CacheDir.key`).
        """
        found = self._load(key, kind, _read_regular)
        if found is None:
            return None
        blob, offset = found
        return blob[offset:]

    def load_buffer(self, key: str, kind: str) -> memoryview | None:
        """As :meth:`load`, the payload as a writable view into the buffer the file was read
        into: no copy beyond the read. For payloads a consumer shares rather than copies (a
        runtime importing a compiled model from memory). Checked exactly as :meth:`load`."""
        found = self._load(key, kind, _read_regular_writable)
        if found is None:
            return None
        blob, offset = found
        return memoryview(blob)[offset:]

    def _load(
        self, key: str, kind: str, read: Callable[[int, str, int], _Read | None]
    ) -> tuple[Any, int] | None:
        limit = self._limit(kind)
        name = self.name(key, kind)
        try:
            found = read(self.directory.fd, name, limit + _OVERHEAD)
        except (_Rejected, OSError) as exc:
            self._discard(name, str(exc))
            return None
        if found is None:
            return None
        blob = found.data
        try:
            # Raised, not discarded: a refused key is the cache's error, not the entry's.
            secret = self.directory.key()
        except BaseException:
            if found.pieces is not None:
                found.pieces.cancel()
            raise
        try:
            header, offset = _unseal(secret, found)
            self._check(header, key, kind)
        except _Rejected as exc:
            self._discard(name, str(exc))
            return None
        if len(blob) - offset > limit:  # only a sealed but oversized entry gets here
            size = len(blob) - offset
            self._discard(name, f"payload of {size} bytes, over the limit of {limit}")
            return None
        return blob, offset

    def store(self, key: str, kind: str, payload: bytes) -> bool:
        """Write an entry atomically; False (with a warning) if it could not be written.

        Raises CacheError if the directory's key file is refused (see :meth:`CacheDir.key`).
        """
        limit = self._limit(kind)
        name = self.name(key, kind)
        if len(payload) > limit:
            self._warn(f"not caching {name}: {len(payload)} bytes, over the limit of {limit}")
            return False
        parts = _seal(self.directory.key(), self._header(key, kind), payload)
        try:
            _write_new(self.directory.fd, name, parts)
        except OSError as exc:
            self._warn(f"cannot write {name}: {exc}")
            return False
        return True

    def discard(self, key: str, kind: str, why: str) -> None:
        """Delete an entry the caller found unusable (a driver rejected it, say), with ``why``."""
        self._discard(self.name(key, kind), why)

    def _discard(self, name: str, why: str) -> None:
        self.rejected.append((name, why))
        self._warn(f"discarding {name}: {why}; rebuilding it")
        _remove(self.directory.fd, name)

    def _warn(self, message: str) -> None:
        where = f"{self.namespace} cache ({self.directory.path})"
        warnings.warn(f"{where}: {message}", CacheWarning, stacklevel=4)

    # -- tree entries ---------------------------------------------------------------------------

    def load_tree(self, key: str, kind: str) -> Path | None:
        """The verified directory stored under ``(key, kind)``; None if absent or rejected."""
        limit = self._limit(kind)
        name = self.name(key, kind)
        dir_fd = self.directory.fd
        try:
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                return None
            if not stat.S_ISDIR(mode):
                raise _Rejected(f"{name} is {_what(mode)}, not a directory")
            fd = _open_dir(dir_fd, name)
            try:
                info = os.fstat(fd)
                _check_owner(info, name)
                if stat.S_IMODE(info.st_mode) & 0o077:
                    raise _Rejected(f"{name} has mode {stat.S_IMODE(info.st_mode):#o}, not 0o700")
                key_bytes = _read_key(fd)
                sealed = _read_regular(fd, _MANIFEST_FILE, _MANIFEST_MAX)
                if key_bytes is None or sealed is None:
                    raise _Rejected(f"{name} has no key or no manifest (unfinished or damaged)")
                header, offset = _unseal(key_bytes, sealed)
                blob = sealed.data
                self._check(header, key, kind)
                try:
                    manifest = json.loads(blob[offset:])
                except ValueError:
                    raise _Rejected("unreadable manifest") from None
                if _scan_tree(fd, limit) != manifest:
                    raise _Rejected("its files differ from its manifest (altered or damaged)")
            finally:
                os.close(fd)
        except (_Rejected, OSError) as exc:
            self._discard(name, str(exc))
            return None
        return self.directory.path / name

    def store_tree(self, key: str, kind: str, build: Callable[[Path], None]) -> Path:
        """Let ``build(root)`` fill a fresh private directory, seal it and commit it.

        Returns the committed entry's path. If the tree cannot be recorded (over the limit, a
        link or FIFO among its files, a write error), a warning says why and the path of the
        uncommitted tree is returned instead; it lasts as long as the :class:`CacheDir`.
        Errors raised by ``build`` propagate, and its partial tree is deleted. The names
        ``.offload-key`` and ``.offload-manifest`` at the top of the tree are reserved.
        """
        limit = self._limit(kind)
        name = self.name(key, kind)
        dir_fd = self.directory.fd
        scratch = f"{_TMP}{secrets.token_hex(8)}.{kind}"
        try:
            os.mkdir(scratch, 0o700, dir_fd=dir_fd)
            self.directory._scratch.add(scratch)
            fd = _open_dir(dir_fd, scratch)
        except (_Rejected, OSError) as exc:
            raise CacheError(f"cannot make a directory in {self.directory.path}: {exc}") from None
        try:
            os.fchmod(fd, 0o700)  # we made it; the umask may have taken bits away
            try:
                build(self.directory.path / scratch)
            except BaseException:
                self._forget(scratch)
                raise
            try:
                manifest = _scan_tree(fd, limit)
                payload = json.dumps(manifest, sort_keys=True).encode()
                _write_new(fd, _MANIFEST_FILE, _seal(_key_of(fd), self._header(key, kind), payload))
            except (_Rejected, OSError) as exc:
                self._warn(f"cannot record {name}: {exc}; using an uncached copy")
                return self.directory.path / scratch
        finally:
            os.close(fd)
        for _ in range(2):
            try:
                os.rename(scratch, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                    self._warn(f"cannot record {name}: {exc}; using an uncached copy")
                    return self.directory.path / scratch
                # Something is in the way: another process's entry (use it if it is good) or
                # a bad one (load_tree discards it, and the rename is tried again).
                if self.load_tree(key, kind) is not None:
                    self._forget(scratch)
                    return self.directory.path / name
                continue
            self.directory._scratch.discard(scratch)
            return self.directory.path / name
        self._warn(f"cannot record {name}: the name stays taken; using an uncached copy")
        return self.directory.path / scratch

    def _forget(self, scratch: str) -> None:
        self.directory._scratch.discard(scratch)
        _remove(self.directory.fd, scratch)


# The format's magic line and the names of the key and manifest files were public by accident:
# they are the cache's own business (a delegate stores entries through EntryStore and
# CacheDir, and a format change is said by the magic line, not by callers reading it).
__getattr__ = deprecated_attributes(
    __name__,
    {
        name: (
            deprecation(
                f"cache-{name}",
                old=f"offload.cache.{name}",
                new=f"CacheDir and EntryStore, which keep the cache's {what} to themselves",
                since="0.2.0",
                removal="0.3.0",
            ),
            lambda value=value: value,  # type: ignore[misc]  # bound now, read when asked
        )
        for name, what, value in (
            ("MAGIC", "format", _MAGIC),
            ("KEY_FILE", "key file", _KEY_FILE),
            ("MANIFEST_FILE", "manifest file", _MANIFEST_FILE),
        )
    },
)
