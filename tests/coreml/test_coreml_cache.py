"""The coreml program cache against hostile directories and reused tokens. Runs anywhere:
the packages here are fake or converted without loading them into Core ML."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import offload
from offload.cache import _MAGIC as MAGIC
from offload.cache import _MANIFEST_FILE as MANIFEST_FILE
from offload.cache import CacheWarning
from offload.errors import CacheError
from offload.model.builder import ModelBuilder
from offload_coreml._cache import ProgramCache, partition_key

from ._util import delegate

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the cache needs POSIX (O_NOFOLLOW)")


def _build(calls: list[Path]):
    def build(path: Path) -> None:
        calls.append(path)
        (path / "Data").mkdir(parents=True)
        (path / "Manifest.json").write_text("{}")
        (path / "Data" / "weights.bin").write_bytes(np.arange(64, dtype=np.float32).tobytes())

    return build


def test_entry_is_sealed_and_private(tmp_path: Path) -> None:
    """An entry holds the package, a sealed manifest and its key, all private."""
    cache = ProgramCache(tmp_path / "c")
    path, hit = cache.get_or_build("k", _build([]))
    entry = path.parent
    assert not hit and path.name == "model.mlpackage"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o700
    assert (entry / MANIFEST_FILE).read_bytes().startswith(MAGIC)
    assert cache.get_or_build("k", _build([])) == (path, True)


def test_altered_weights_with_recomputed_checksums_are_rejected(tmp_path: Path) -> None:
    """Altering the weights and rewriting the manifest's checksums fails the HMAC: rebuilt."""
    cache = ProgramCache(tmp_path)
    calls: list[Path] = []
    path, _ = cache.get_or_build("k", _build(calls))
    evil = np.zeros(64, np.float32).tobytes()
    (path / "Data" / "weights.bin").write_bytes(evil)
    blob = (path.parent / MANIFEST_FILE).read_bytes()
    tag, rest = blob[len(MAGIC) :].split(b"\n", 1)
    head, payload = rest.split(b"\n", 1)
    manifest = json.loads(payload)
    manifest["files"]["model.mlpackage/Data/weights.bin"][1] = hashlib.sha256(evil).hexdigest()
    forged = json.dumps(manifest, sort_keys=True).encode()
    (path.parent / MANIFEST_FILE).write_bytes(MAGIC + tag + b"\n" + head + b"\n" + forged)
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
        path, hit = cache.get_or_build("k", _build(calls))
    assert (hit, len(calls)) == (False, 2)
    assert (path / "Data" / "weights.bin").read_bytes() != evil


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_link_or_fifo_inside_a_package_is_rejected(tmp_path: Path, kind: str) -> None:
    """A package file replaced by a symlink (to /dev/zero) or a FIFO is refused, not read."""
    cache = ProgramCache(tmp_path)
    calls: list[Path] = []
    path, _ = cache.get_or_build("k", _build(calls))
    weights = path / "Data" / "weights.bin"
    weights.unlink()
    if kind == "symlink":
        weights.symlink_to("/dev/zero")
    else:
        os.mkfifo(weights)
    with pytest.warns(CacheWarning, match="not a regular file"):
        _, hit = cache.get_or_build("k", _build(calls))
    assert (hit, len(calls)) == (False, 2)


def test_entry_of_other_content_under_the_same_key_is_rebuilt(tmp_path: Path) -> None:
    """The key (a model_token) names the entry, the guard (content) decides if it is good."""
    cache = ProgramCache(tmp_path)
    calls: list[Path] = []
    cache.get_or_build("token-key", _build(calls), guard="weights-v1")
    with pytest.warns(CacheWarning, match="made for another content"):
        _, hit = cache.get_or_build("token-key", _build(calls), guard="weights-v2")
    assert (hit, len(calls)) == (False, 2)
    assert cache.get_or_build("token-key", _build(calls), guard="weights-v2")[1] is True


def test_explicit_symlinked_cache_dir_is_refused(tmp_path: Path) -> None:
    """A cache_dir the user gave that is a symlink raises CacheError; the target is untouched."""
    target = tmp_path / "target"
    target.mkdir()
    os.chmod(target, 0o755)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(CacheError, match="symbolic link"):
        ProgramCache(tmp_path / "link")
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and list(target.iterdir()) == []


def test_refused_default_dir_converts_without_a_cache(tmp_path: Path, monkeypatch) -> None:
    """The default directory (not the user's choice) falls back to a private temporary one."""
    monkeypatch.delenv("OFFLOAD_CACHE_DIR", raising=False)  # the suite's own (conftest)
    bad = tmp_path / "xdg"
    bad.mkdir()
    os.chmod(bad, 0o755)
    (bad / "offload").mkdir()
    os.chmod(bad / "offload", 0o755)
    (bad / "offload" / "coreml").symlink_to(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(bad))
    with pytest.warns(CacheWarning, match="converting without a cache"):
        cache = ProgramCache()
    calls: list[Path] = []
    path, hit = cache.get_or_build("k", _build(calls))
    assert not hit and (path / "Manifest.json").is_file()
    assert tmp_path not in path.parents
    del cache
    assert not path.exists()


def _model(scale: float) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), np.float32)
    c = b.add_constant("c", np.full((1, 4), scale, np.float32))
    y = b.add_tensor("y", (1, 4), np.float32)
    b.add_operator("ADD", [x, c], [y], {"fused_activation_function": "NONE"})
    z = b.add_tensor("z", (1, 4), np.float32)
    b.add_operator("RELU", [y], [z], {})
    b.add_output(z)
    return b.build()


def test_reused_model_token_with_other_weights_is_converted_again(tmp_path: Path) -> None:
    """Two models under one model_token: the second is converted, not read from the cache."""
    d = delegate(cache_dir=str(tmp_path), model_token="same", compute_precision="float32")
    hits, keys, stale = [], [], []
    for scale in (1.0, 1.0, 2.0):
        plan = offload.Interpreter(model_content=_model(scale), experimental_delegates=[d]).plan()
        (part,) = plan.partitions
        keys.append(partition_key(plan.subgraph, part, d.settings(), "same"))
        kernel = d.create_kernel()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                kernel.init(plan.subgraph, part)
            except Exception:  # off macOS loading the MLModel fails after the cache is written
                if sys.platform == "darwin":
                    raise
        hits.append(kernel.from_cache)
        stale.append(any("made for another content" in str(w.message) for w in caught))
    assert keys[0] == keys[1] == keys[2]
    assert hits == [False, True, False] and stale == [False, False, True]
