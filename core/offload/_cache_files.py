"""The file system side of offload.cache: files and directories checked through descriptors.

Every name is opened relative to a directory's descriptor, without following links; a file
must be a regular one of ours within its size limit, and is read no further than ``fstat``
said. Writes are whole or absent (temporary file, fsync, rename). The rules are set out in
offload.cache's docstring.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Any

from offload._cache_format import _PIECE, _REGION, _Pieces, _Read, _Rejected

_KEY_FILE = ".offload-key"
_MANIFEST_FILE = ".offload-manifest"
KEY_BYTES = 32

_MANIFEST_MAX = 16 << 20
_TREE_MAX_ITEMS = 100_000
_TREE_MAX_DEPTH = 64
_TMP = ".tmp-"
_TRASH = ".trash-"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
# O_NOFOLLOW on a symlink fails with ELOOP (Linux, macOS) or EMLINK (FreeBSD).
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)


def _what(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return f"a file of type {stat.S_IFMT(mode):#o}"


def _check_owner(info: os.stat_result, what: str) -> None:
    if info.st_uid != os.geteuid():
        raise _Rejected(f"{what} is owned by uid {info.st_uid}, not by us (uid {os.geteuid()})")


# -- files and directories through descriptors --------------------------------------------------


def _open_regular(dir_fd: int, name: str, limit: int) -> tuple[int, int] | None:
    """``(fd, size)`` of the regular file ``name`` (ours, at most ``limit`` bytes), or None."""
    try:
        # lstat first, so a device node or FIFO is refused without even being opened.
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise _Rejected(f"{name} is {_what(info.st_mode)}, not a regular file")
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise _Rejected(f"{name} is a symbolic link (never followed)") from None
        raise _Rejected(f"cannot open {name} ({exc.strerror})") from None
    try:
        # The descriptor, not the name, is what gets read: check what was actually opened.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Rejected(f"{name} is {_what(info.st_mode)}, not a regular file")
        _check_owner(info, name)
        if info.st_size > limit:
            raise _Rejected(f"{name} has {info.st_size} bytes, over the limit of {limit}")
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def _read_regular(dir_fd: int, name: str, limit: int) -> _Read | None:
    """The bytes of regular file ``name`` (see _open_regular), no hashing started, or None if
    it is absent."""
    opened = _open_regular(dir_fd, name, limit)
    if opened is None:
        return None
    fd, size = opened
    try:
        with os.fdopen(fd, "rb") as f:
            # One byte more than fstat said: a file that grew meanwhile is refused, not read on.
            data = f.read(size + 1)
    except OSError as exc:
        raise _Rejected(f"cannot read {name} ({exc.strerror})") from None
    if len(data) != size:
        raise _Rejected(f"{name} changed while being read")
    return _Read(data, None)


def _read_regular_writable(dir_fd: int, name: str, limit: int) -> _Read | None:
    """As _read_regular, into a bytearray (a writable buffer a caller may hand on), each piece
    of the sealed region hashed as soon as it has been read."""
    opened = _open_regular(dir_fd, name, limit)
    if opened is None:
        return None
    fd, size = opened
    data = bytearray(size)
    pieces = _Pieces(size - _REGION, _REGION)
    view = memoryview(data)
    try:
        with os.fdopen(fd, "rb", buffering=0) as f:
            got = 0
            while got < size:
                n = f.readinto(view[got : min(size, got + _PIECE)])
                if not n:
                    break
                got += n
                pieces.feed(view, got)
            grew = got == size and f.read(1)  # as in _read_regular: a file that grew is refused
    except OSError as exc:
        pieces.cancel()
        raise _Rejected(f"cannot read {name} ({exc.strerror})") from None
    except BaseException:
        pieces.cancel()
        raise
    if got != size or grew:
        pieces.cancel()
        raise _Rejected(f"{name} changed while being read")
    return _Read(data, pieces)


def _open_dir(dir_fd: int | None, name: str | os.PathLike[str]) -> int:
    shown = os.path.basename(name) if dir_fd is None else os.fspath(name)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise _Rejected(f"{shown} is a symbolic link (never followed)") from None
        if exc.errno == errno.ENOTDIR:
            try:
                found = _what(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            except OSError:
                found = "not a directory"
            raise _Rejected(f"{shown} is {found}, not a directory") from None
        raise _Rejected(f"cannot open directory {shown} ({exc.strerror})") from None


def _write_new(dir_fd: int, name: str, parts: tuple[bytes, ...]) -> None:
    """Write ``name`` whole or not at all: temporary file, fsync, rename."""
    tmp = f"{_TMP}{secrets.token_hex(8)}"
    fd = os.open(tmp, _NEW_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        _remove(dir_fd, tmp)
        raise


def _remove(dir_fd: int, name: str) -> None:
    """Delete ``name`` (a file, link, FIFO or tree) without following any link; best effort."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=dir_fd)
            return
        # Renamed away first, so the name is free at once even while the tree is deleted.
        trash = f"{_TRASH}{secrets.token_hex(8)}"
        os.rename(name, trash, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True, dir_fd=dir_fd)  # fd-based: follows no links


def _close_dir(fd: int, scratch: set[str]) -> None:
    for name in list(scratch):
        _remove(fd, name)
    scratch.clear()
    os.close(fd)


# -- keys and trees ------------------------------------------------------------------------


def _read_key(dir_fd: int) -> bytes | None:
    opened = _open_regular(dir_fd, _KEY_FILE, KEY_BYTES)
    if opened is None:
        return None
    fd, _ = opened
    with os.fdopen(fd, "rb") as f:
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        if mode != 0o600:
            raise _Rejected(f"{_KEY_FILE} has mode {mode:#o}, not 0o600")
        key = f.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise _Rejected(f"{_KEY_FILE} holds {len(key)} bytes, not {KEY_BYTES}")
    return key


def _key_of(dir_fd: int) -> bytes:
    """The directory's HMAC key, created on first use."""
    key = _read_key(dir_fd)
    if key is not None:
        return key
    tmp = f"{_TMP}{secrets.token_hex(8)}"
    fd = os.open(tmp, _NEW_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)  # whatever the umask left: we check for exactly 0600
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            # link(2) publishes a finished file and fails if a key exists: when two processes
            # race, both end up with the first one's key instead of overwriting each other.
            os.link(tmp, _KEY_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: rename, unless a key appeared
            if _read_key(dir_fd) is None:
                os.rename(tmp, _KEY_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        _remove(dir_fd, tmp)
    key = _read_key(dir_fd)
    if key is None:
        raise _Rejected(f"{_KEY_FILE} vanished right after being created")
    return key


def _scan_tree(root_fd: int, limit: int) -> dict[str, Any]:
    """Every directory and file under ``root_fd`` (sizes and SHA-256), refusing anything else."""
    files: dict[str, list[Any]] = {}
    dirs: list[str] = []
    total = 0

    def walk(fd: int, prefix: str, depth: int) -> None:
        nonlocal total
        if depth > _TREE_MAX_DEPTH:
            raise _Rejected(f"{prefix} is nested more than {_TREE_MAX_DEPTH} deep")
        with os.scandir(fd) as it:
            names = sorted(entry.name for entry in it)
        for name in names:
            if not prefix and name in (_KEY_FILE, _MANIFEST_FILE):
                continue
            rel = prefix + name
            if len(files) + len(dirs) >= _TREE_MAX_ITEMS:
                raise _Rejected(f"more than {_TREE_MAX_ITEMS} files")
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                dirs.append(rel)
                sub = _open_dir(fd, name)
                try:
                    _check_owner(os.fstat(sub), rel)
                    walk(sub, rel + "/", depth + 1)
                finally:
                    os.close(sub)
                continue
            if not stat.S_ISREG(mode):
                raise _Rejected(f"{rel} is {_what(mode)}, not a regular file or directory")
            opened = _open_regular(fd, name, limit - total)
            if opened is None:
                raise _Rejected(f"{rel} vanished while being checked")
            file_fd, size = opened
            digest, seen = hashlib.sha256(), 0
            try:
                while chunk := os.read(file_fd, min(1 << 20, size + 1 - seen)):
                    digest.update(chunk)
                    seen += len(chunk)
                    if seen > size:
                        break
            finally:
                os.close(file_fd)
            if seen != size:
                raise _Rejected(f"{rel} changed while being read")
            total += size
            files[rel] = [size, digest.hexdigest()]

    walk(root_fd, "", 0)
    return {"dirs": dirs, "files": files}


def _make_parents(parent: Path) -> None:
    """Create the missing ancestors, 0700 each (they hold nothing but the cache)."""
    missing = []
    while not os.path.lexists(parent) and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
