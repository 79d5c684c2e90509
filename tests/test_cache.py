"""offload.cache: a cache that does not trust its directory (no OpenCL, no Core ML needed)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from offload.cache import _KEY_FILE as KEY_FILE
from offload.cache import _MAGIC as MAGIC
from offload.cache import _MANIFEST_FILE as MANIFEST_FILE
from offload.cache import CacheDir, CacheWarning, EntryStore
from offload.errors import CacheError, OffloadError

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the cache needs POSIX (O_NOFOLLOW)")

LIMITS = {"bin": 1 << 20, "tree": 1 << 20}
CONTEXT = {"device": "dev", "plugin": "0", "content": "aaaa"}


def make_store(path: Path, **context: str) -> EntryStore:
    return EntryStore(
        CacheDir.open(path), namespace="test", context={**CONTEXT, **context}, limits=LIMITS
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EntryStore]:
    s = make_store(tmp_path / "cache")
    yield s
    s.directory.close()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def build_package(root: Path) -> None:
    (root / "pkg" / "Data").mkdir(parents=True)
    (root / "pkg" / "Manifest.json").write_text("{}")
    (root / "pkg" / "Data" / "weights.bin").write_bytes(bytes(range(256)) * 4)


# -- the directory ------------------------------------------------------------------------------


def test_new_directory_and_parents_are_0700(tmp_path: Path) -> None:
    """Directories the cache creates are 0700 whatever the umask."""
    old = os.umask(0o022)
    try:
        CacheDir.open(tmp_path / "a" / "b").close()
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "a") == mode_of(tmp_path / "a" / "b") == 0o700


def test_existing_directory_is_never_chmodded(tmp_path: Path) -> None:
    """A directory of ours that we did not create keeps its mode (0755 is accepted)."""
    (tmp_path / "c").mkdir()
    os.chmod(tmp_path / "c", 0o755)
    CacheDir.open(tmp_path / "c").close()
    assert mode_of(tmp_path / "c") == 0o755


def test_directory_writable_by_others_is_refused(tmp_path: Path) -> None:
    """A group- or world-writable directory is refused with CacheError, and not chmod'ed."""
    (tmp_path / "c").mkdir()
    os.chmod(tmp_path / "c", 0o777)
    with pytest.raises(CacheError, match="writable by group or others"):
        CacheDir.open(tmp_path / "c")
    assert mode_of(tmp_path / "c") == 0o777


def test_symlinked_directory_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """A cache path that is a symlink is refused (never followed); its target keeps its mode."""
    target = tmp_path / "target"
    target.mkdir()
    os.chmod(target, 0o755)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(CacheError, match="symbolic link") as info:
        CacheDir.open(tmp_path / "link")
    assert isinstance(info.value, OffloadError) and isinstance(info.value, OSError)
    assert mode_of(target) == 0o755 and list(target.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    """A directory owned by another uid is refused, even for root."""
    (tmp_path / "c").mkdir(mode=0o700)
    os.chown(tmp_path / "c", 12345, -1)
    with pytest.raises(CacheError, match="owned by uid 12345"):
        CacheDir.open(tmp_path / "c")
    assert mode_of(tmp_path / "c") == 0o700


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_cache_path_that_is_not_a_directory_is_refused(tmp_path: Path, kind: str) -> None:
    """A FIFO or a file where the directory should be is refused at once (no hang)."""
    path = tmp_path / "c"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(b"")
    with pytest.raises(CacheError, match="not a directory"):
        CacheDir.open(path)


def test_operations_follow_the_checked_directory_not_the_path(tmp_path: Path) -> None:
    """Swapping the path for a symlink after the check changes nothing: work goes via the fd."""
    s = make_store(tmp_path / "c")
    (tmp_path / "c").rename(tmp_path / "moved")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "c").symlink_to(tmp_path / "elsewhere")
    s.store("k", "bin", b"data")
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert s.load("k", "bin") == b"data"
    s.directory.close()


# -- the key file -------------------------------------------------------------------------------


def test_key_file_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    """The HMAC key is a 32-byte regular file, mode 0600, made on first use."""
    old = os.umask(0o277)
    try:
        s = make_store(tmp_path / "c")
        s.store("k", "bin", b"x")
    finally:
        os.umask(old)
    key = tmp_path / "c" / KEY_FILE
    assert stat.S_ISREG(os.lstat(key).st_mode) and mode_of(key) == 0o600
    assert key.stat().st_size == 32
    assert s.load("k", "bin") == b"x"


@pytest.mark.parametrize("damage", ["mode", "symlink", "fifo", "size"])
def test_bad_key_file_refuses_the_cache(tmp_path: Path, damage: str) -> None:
    """A key file that is not a regular 0600 file of 32 bytes is refused (CacheError)."""
    make_store(tmp_path / "c").store("k", "bin", b"x")
    key = tmp_path / "c" / KEY_FILE
    if damage == "mode":
        os.chmod(key, 0o644)
    elif damage == "size":
        key.write_bytes(b"short")
    else:
        secret = tmp_path / "secret"
        secret.write_bytes(key.read_bytes())
        os.chmod(secret, 0o600)
        key.unlink()
        if damage == "symlink":
            key.symlink_to(secret)
        else:
            os.mkfifo(key)
    with pytest.raises(CacheError, match="key file refused"):
        make_store(tmp_path / "c").load("k", "bin")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_key_file_of_another_user_is_refused(tmp_path: Path) -> None:
    """A key file planted by another user is not used."""
    make_store(tmp_path / "c").store("k", "bin", b"x")
    os.chown(tmp_path / "c" / KEY_FILE, 12345, -1)
    with pytest.raises(CacheError, match="owned by uid 12345"):
        make_store(tmp_path / "c").load("k", "bin")


# -- file entries -------------------------------------------------------------------------------


def test_entry_round_trip_leaves_only_the_entry_and_the_key(store: EntryStore) -> None:
    """An entry is stored atomically: no temporary files, 0600, read back as written."""
    assert store.load("k", "bin") is None
    assert store.store("k", "bin", b"payload")
    assert store.load("k", "bin") == b"payload"
    names = sorted(p.name for p in store.directory.path.iterdir())
    assert names == sorted([KEY_FILE, store.name("k", "bin")])
    assert mode_of(store.path("k", "bin")) == 0o600


def test_fifo_in_place_of_an_entry_does_not_hang(store: EntryStore) -> None:
    """A FIFO where an entry should be is refused without being read, and removed."""
    os.mkfifo(store.path("k", "bin"))
    with pytest.warns(CacheWarning, match="FIFO"):
        assert store.load("k", "bin") is None
    assert not os.path.lexists(store.path("k", "bin"))
    assert store.rejected and "FIFO" in store.rejected[-1][1]


def test_symlink_to_dev_zero_is_refused(store: EntryStore) -> None:
    """An entry that is a symlink (to /dev/zero) is refused, never followed, and removed."""
    os.symlink("/dev/zero", store.path("k", "bin"))
    with pytest.warns(CacheWarning, match="symbolic link"):
        assert store.load("k", "bin") is None
    assert not os.path.lexists(store.path("k", "bin"))


@pytest.mark.parametrize("swap", ["fifo", "symlink"])
def test_entry_swapped_after_the_lstat_is_still_refused(
    store: EntryStore, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    """A FIFO or symlink swapped in between the lstat and the open is refused by the open
    itself (O_NONBLOCK | O_NOFOLLOW, then fstat): no hang, no read through the link."""
    store.store("k", "bin", b"x")
    name, real_open = store.name("k", "bin"), os.open

    def racing_open(path, flags, *args, dir_fd=None, **kwargs):
        if path == name:
            os.unlink(name, dir_fd=dir_fd)
            if swap == "fifo":
                os.mkfifo(name, dir_fd=dir_fd)
            else:
                os.symlink("/dev/zero", name, dir_fd=dir_fd)
        return real_open(path, flags, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "open", racing_open)
    with pytest.warns(CacheWarning, match="FIFO" if swap == "fifo" else "symbolic link"):
        assert store.load("k", "bin") is None
    monkeypatch.undo()
    assert not os.path.lexists(store.path("k", "bin"))


def test_oversized_entry_is_refused_before_reading(tmp_path: Path) -> None:
    """An entry over its kind's limit is refused on its size alone."""
    big = make_store(tmp_path / "c")
    big.store("k", "bin", b"x" * 100_000)
    small = EntryStore(big.directory, namespace="test", context=CONTEXT, limits={"bin": 1000})
    with pytest.warns(CacheWarning, match="over the limit"):
        assert small.load("k", "bin") is None
    with pytest.warns(CacheWarning, match="over the limit"):
        assert not small.store("k", "bin", b"x" * 1001)


def _split(blob: bytes) -> tuple[bytes, bytes, bytes]:
    tag, rest = blob[len(MAGIC) :].split(b"\n", 1)
    head, payload = rest.split(b"\n", 1)
    return tag, head, payload


def test_altered_payload_with_recomputed_checksum_is_rejected(store: EntryStore) -> None:
    """Altering an entry and recomputing a plain SHA-256 in place of its HMAC is caught."""
    store.store("k", "bin", b"\x7fELF program binary")
    path = store.path("k", "bin")
    _, head, payload = _split(path.read_bytes())
    evil = payload.replace(b"program", b"exploit")
    plain = hashlib.sha256(MAGIC + head + b"\n" + evil).hexdigest().encode()
    path.write_bytes(MAGIC + plain + b"\n" + head + b"\n" + evil)
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
        assert store.load("k", "bin") is None
    assert not path.exists()


def test_entry_forged_with_another_key_is_rejected(tmp_path: Path) -> None:
    """An entry sealed by another cache (another key) is not accepted here."""
    ours, theirs = make_store(tmp_path / "ours"), make_store(tmp_path / "theirs")
    theirs.store("k", "bin", b"forged constants")
    ours.path("k", "bin").write_bytes(theirs.path("k", "bin").read_bytes())
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
        assert ours.load("k", "bin") is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_damaged_entry_is_discarded(store: EntryStore, damage: str) -> None:
    """A damaged entry reads as absent, with a warning, and is deleted."""
    store.store("k", "bin", b"x" * 100)
    path = store.path("k", "bin")
    blob = bytearray(path.read_bytes())
    blob = {
        "flip": blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:],
        "truncate": blob[:-5],
        "garbage": bytearray(b"not a cache entry at all"),
        "empty": bytearray(),
    }[damage]
    path.write_bytes(bytes(blob))
    with pytest.warns(CacheWarning, match="discarding"):
        assert store.load("k", "bin") is None
    assert not path.exists()


def test_same_name_other_content_is_stale(tmp_path: Path) -> None:
    """The key names, the context guards: same key, other model content -> stale, rebuilt."""
    make_store(tmp_path / "c", content="weights-v1").store("token", "bin", b"v1 constants")
    v2 = make_store(tmp_path / "c", content="weights-v2")
    with pytest.warns(CacheWarning, match="stale entry, made for another content"):
        assert v2.load("token", "bin") is None
    v2.store("token", "bin", b"v2 constants")
    assert v2.load("token", "bin") == b"v2 constants"


def test_header_is_checked_after_the_hmac(store: EntryStore) -> None:
    """The header names namespace, key, kind and context, all covered by the HMAC."""
    store.store("k", "bin", b"data")
    _, head, payload = _split(store.path("k", "bin").read_bytes())
    header = json.loads(head)
    assert header == {"namespace": "test", "key": "k", "kind": "bin", "context": CONTEXT}
    assert payload == b"data"


def test_concurrent_writers_leave_one_whole_entry(store: EntryStore) -> None:
    """Writers racing on one key leave one complete, valid entry and no temporary files."""
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    threads = [threading.Thread(target=store.store, args=("k", "bin", p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.load("k", "bin") in payloads
    names = sorted(p.name for p in store.directory.path.iterdir())
    assert names == sorted([KEY_FILE, store.name("k", "bin")])


def test_unknown_kind_is_a_programming_error(store: EntryStore) -> None:
    """Every kind needs a stated size limit."""
    with pytest.raises(ValueError, match="no size limit"):
        store.load("k", "other")


# -- tree entries -------------------------------------------------------------------------------


def test_tree_round_trip(store: EntryStore) -> None:
    """A tree is built privately, sealed, committed by one rename, and verified on load."""
    assert store.load_tree("k", "tree") is None
    path = store.store_tree("k", "tree", build_package)
    assert path == store.path("k", "tree") and mode_of(path) == 0o700
    assert {p.name for p in path.iterdir()} == {"pkg", KEY_FILE, MANIFEST_FILE}
    assert store.load_tree("k", "tree") == path
    assert [p.name for p in store.directory.path.iterdir()] == [path.name]


@pytest.mark.parametrize("damage", ["alter", "add", "remove", "symlink", "fifo"])
def test_damaged_tree_is_discarded(store: EntryStore, damage: str) -> None:
    """Any change to a tree's files (or a link, FIFO) rejects the whole entry."""
    path = store.store_tree("k", "tree", build_package)
    weights = path / "pkg" / "Data" / "weights.bin"
    if damage == "alter":
        weights.write_bytes(b"\0" * 1024)
    elif damage == "add":
        (path / "pkg" / "extra").write_bytes(b"")
    elif damage == "remove":
        weights.unlink()
    elif damage == "symlink":
        weights.unlink()
        weights.symlink_to("/dev/zero")
    else:
        weights.unlink()
        os.mkfifo(weights)
    with pytest.warns(CacheWarning, match="discarding"):
        assert store.load_tree("k", "tree") is None
    assert not os.path.lexists(path)


def test_tree_with_recomputed_manifest_is_rejected(store: EntryStore) -> None:
    """Rewriting the manifest to match altered files fails the HMAC (no key, no seal)."""
    path = store.store_tree("k", "tree", build_package)
    weights = path / "pkg" / "Data" / "weights.bin"
    weights.write_bytes(b"\1" * 1024)
    blob = (path / MANIFEST_FILE).read_bytes()
    tag, head, payload = _split(blob)
    manifest = json.loads(payload)
    manifest["files"]["pkg/Data/weights.bin"] = [1024, hashlib.sha256(b"\1" * 1024).hexdigest()]
    evil = json.dumps(manifest, sort_keys=True).encode()
    (path / MANIFEST_FILE).write_bytes(MAGIC + tag + b"\n" + head + b"\n" + evil)
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
        assert store.load_tree("k", "tree") is None


def test_tree_of_other_content_is_stale(tmp_path: Path) -> None:
    """A tree made for other model content under the same name is rebuilt."""
    make_store(tmp_path / "c", content="v1").store_tree("token", "tree", build_package)
    with pytest.warns(CacheWarning, match="made for another content"):
        assert make_store(tmp_path / "c", content="v2").load_tree("token", "tree") is None


def test_tree_that_cannot_be_recorded_is_an_uncached_copy(store: EntryStore) -> None:
    """A built tree holding a symlink is used once, not recorded, and removed on close."""

    def build(root: Path) -> None:
        build_package(root)
        (root / "pkg" / "link").symlink_to("/etc/passwd")

    with pytest.warns(CacheWarning, match="using an uncached copy"):
        path = store.store_tree("k", "tree", build)
    assert (path / "pkg" / "Manifest.json").is_file() and path != store.path("k", "tree")
    assert store.load_tree("k", "tree") is None
    store.directory.close()
    assert not os.path.lexists(path)


def test_failed_build_leaves_nothing(store: EntryStore) -> None:
    """An exception from the builder propagates and its partial tree is deleted."""

    def build(root: Path) -> None:
        (root / "half").write_bytes(b"")
        raise RuntimeError("converter crashed")

    with pytest.raises(RuntimeError, match="converter crashed"):
        store.store_tree("k", "tree", build)
    assert list(store.directory.path.iterdir()) == []


def test_default_location_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A delegate's default cache is <XDG_CACHE_HOME or ~/.cache>/offload/<namespace>; only a
    path, created by CacheDir.open."""
    monkeypatch.delenv("OFFLOAD_CACHE_DIR", raising=False)  # the suite's own (conftest)
    from offload.cache import default_location

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_location("openvino") == tmp_path / "offload" / "openvino"
    assert not (tmp_path / "offload").exists()
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_location("x") == Path.home() / ".cache" / "offload" / "x"


def test_load_buffer_is_a_writable_view_checked_as_load(tmp_path: Path):
    """load_buffer gives the payload load gives, as a writable view (no copy to hand on);
    a damaged entry is refused by it as by load."""
    store = EntryStore(CacheDir.open(tmp_path / "c"), namespace="t", context={}, limits={"bin": 64})
    assert store.load_buffer("k", "bin") is None
    store.store("k", "bin", b"payload bytes")
    view = store.load_buffer("k", "bin")
    assert view is not None and bytes(view) == b"payload bytes" == store.load("k", "bin")
    assert not view.readonly
    path = store.path("k", "bin")
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match="HMAC"):
        assert store.load_buffer("k", "bin") is None


PIECE = 4 << 20  # what the HMAC covers piece by piece (offload.cache._PIECE)


@pytest.mark.parametrize("size", [3 * PIECE - 200, 5 * PIECE, 6 * PIECE + 12345])
@pytest.mark.parametrize("at", ["first", "boundary", "middle", "last"])
def test_large_entry_hashed_in_pieces_round_trips_and_catches_any_altered_byte(
    tmp_path: Path, size: int, at: str
) -> None:
    """Entries of several 4 MiB pieces (hashed on threads, while being read) round-trip through
    load and load_buffer, and one altered byte in any piece, a piece boundary included, fails
    the HMAC."""
    store = EntryStore(
        CacheDir.open(tmp_path / "c"), namespace="t", context={}, limits={"bin": 8 * PIECE}
    )
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    store.store("k", "bin", payload)
    assert store.load("k", "bin") == payload
    view = store.load_buffer("k", "bin")
    assert view is not None and view == payload
    path = store.path("k", "bin")
    blob = bytearray(path.read_bytes())
    where = {
        "first": len(blob) - size,
        "boundary": len(MAGIC) + 65 + 2 * PIECE - 1,
        "middle": len(blob) - size // 2,
        "last": len(blob) - 1,
    }[at]
    blob[where] ^= 0x40
    path.write_bytes(bytes(blob))
    load = store.load if at in ("first", "last") else store.load_buffer
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
        assert load("k", "bin") is None
    assert not path.exists()


def test_entry_of_another_cache_format_is_stale_not_forged(store: EntryStore) -> None:
    """An entry written by an offload with another cache format is discarded as such (and
    rebuilt), not reported as forged."""
    store.store("k", "bin", b"data")
    path = store.path("k", "bin")
    path.write_bytes(b"OFFLOAD-CACHE 2\n" + path.read_bytes()[len(MAGIC) :])
    with pytest.warns(CacheWarning, match="cache format '2' by another offload"):
        assert store.load("k", "bin") is None
