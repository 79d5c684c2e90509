"""A measured choice is remembered: reused without timing, measured again when any part of
its key changes (and the report says which), and a damaged or forged entry is ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import _auto, _auto_cache
from offload.cache import CacheDir, CacheWarning, EntryStore
from offload.errors import CacheError
from tests._auto_fakes import FAST, INITS, SLOW, chain_model, install, slow_reference


def _chosen(path: Path, **kwargs) -> offload.Interpreter:  # type: ignore[no-untyped-def]
    interp = offload.Interpreter(model_path=path, delegates="auto", **kwargs)
    interp.allocate_tensors()
    return interp


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auto_cache: Path) -> Path:
    install(monkeypatch, FAST, SLOW)
    slow_reference(monkeypatch)
    path = tmp_path / "chain.tflite"
    path.write_bytes(chain_model())
    return path


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.decision"))


def test_a_second_interpreter_reuses_the_choice_without_timing(model, auto_cache):
    """The second interpreter takes the stored choice: nothing is prepared but the winner."""
    first = _chosen(model)
    assert first.auto_selection["mode"] == "measured"
    assert first.auto_selection["cache"]["stored"] is True
    assert len(_entries(auto_cache)) == 1
    INITS.clear()
    second = _chosen(model)
    auto = second.auto_selection
    assert auto["mode"] == "cached" and auto["from_cache"] is True
    assert auto["chosen"] == first.auto_selection["chosen"] == ["fast"]
    assert auto["cache"]["status"] == "hit"
    assert INITS == {"FakeKernel": 1}  # the chosen plan, prepared once; slow never touched
    assert auto["candidates"] == first.auto_selection["candidates"]  # explained as measured


def test_a_second_process_reuses_the_choice(tmp_path, auto_cache):
    """Another process, same model and machine: the decision comes from the cache."""
    path = tmp_path / "adds.tflite"
    path.write_bytes(chain_model(("ADD",) * 8))
    script = textwrap.dedent(
        f"""
        import json, offload
        it = offload.Interpreter(model_path={str(path)!r}, delegates="auto", auto_budget_s=0.3)
        it.allocate_tensors()
        a = it.auto_selection
        print(json.dumps([a["mode"], a["chosen"], a["cache"]["status"]]))
        """
    )
    env = {**os.environ, "OFFLOAD_PLUGINS": "dummy", "OFFLOAD_AUTO_CACHE_DIR": str(auto_cache)}

    def run() -> list:
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert first[0] == "measured" and first[2] == "miss"
    assert second == ["cached", first[1], "hit"]


def _change_model(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    path.write_bytes(chain_model(seed=1))
    return {}


def _change_inputs(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    return {"resize": (2, 16)}


def _change_machine(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    other = {**_auto_cache.machine_identity(), "cpu": "another CPU"}
    monkeypatch.setattr(_auto, "_machine_identity", lambda: other)
    return {}


def _change_devices(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(FAST, "identity", lambda self: {"device": "another card"})
    return {}


def _change_versions(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(FAST, "version", "2.0")
    return {}


def _change_options(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    return {"num_threads": 2}


def _change_budget(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    return {"auto_budget_s": 1.0}


CHANGES = {
    "model": _change_model,
    "inputs": _change_inputs,
    "machine": _change_machine,
    "devices": _change_devices,
    "versions": _change_versions,
    "options": _change_options,
    "budget": _change_budget,
}


@pytest.mark.parametrize("field", list(CHANGES))
def test_each_key_field_measures_again_and_says_so(model, monkeypatch, field):
    """A change in any one field of the key measures again; the report names that field."""
    assert _chosen(model).auto_selection["mode"] == "measured"
    assert _chosen(model).auto_selection["mode"] == "cached"
    kwargs = CHANGES[field](model, monkeypatch)
    resize = kwargs.pop("resize", None)
    interp = offload.Interpreter(model_path=model, delegates="auto", **kwargs)
    if resize:
        interp.resize_tensor_input(interp.get_input_details()[0]["index"], resize)
    interp.allocate_tensors()
    auto = interp.auto_selection
    assert auto["mode"] == "measured"
    assert auto["cache"]["status"] == "changed"
    assert auto["cache"]["changed"] == [field]
    assert field in auto["cache"]["detail"]
    # Both decisions are kept: going back is a hit, not another measurement.
    assert _chosen(model, **kwargs).auto_selection["mode"] in ("cached", "measured")


def test_an_unchanged_file_is_not_hashed_again(model, monkeypatch):
    """The model's hash comes from the entry's memo while the file's stat is unchanged."""
    _chosen(model)
    real = _auto_cache.hashlib.sha256
    hashed: list[int] = []

    def sha256(data: bytes = b"") -> object:
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(_auto_cache, "hashlib", types.SimpleNamespace(sha256=sha256))
    assert _chosen(model).auto_selection["mode"] == "cached"
    assert max(hashed, default=0) < model.stat().st_size


def test_a_touched_file_is_hashed_once_more_then_remembered(model, monkeypatch):
    """A new modification time with the same bytes: hashed again, still a hit, and the memo
    is written back so that the next process does not hash it either."""
    _chosen(model)
    info = model.stat()
    os.utime(model, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    assert _chosen(model).auto_selection["mode"] == "cached"
    real = _auto_cache.hashlib.sha256
    hashed: list[int] = []

    def sha256(data: bytes = b"") -> object:
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(_auto_cache, "hashlib", types.SimpleNamespace(sha256=sha256))
    assert _chosen(model).auto_selection["mode"] == "cached"
    assert max(hashed, default=0) < model.stat().st_size


def test_a_damaged_entry_is_ignored_and_measured_again(model, auto_cache):
    """A flipped byte fails the entry's HMAC: a CacheWarning, then a fresh measurement."""
    _chosen(model)
    (entry,) = _entries(auto_cache)
    data = bytearray(entry.read_bytes())
    data[-3] ^= 0x20
    entry.write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match="HMAC"):
        interp = _chosen(model)
    assert interp.auto_selection["mode"] == "measured"
    assert interp.auto_selection["cache"]["status"] == "rejected"
    assert _chosen(model).auto_selection["mode"] == "cached"  # stored again, whole


def test_a_forged_entry_is_ignored_and_measured_again(model, tmp_path, auto_cache, monkeypatch):
    """An entry sealed under another cache's key (copied in) is rejected, not trusted."""
    other = tmp_path / "other-cache"
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(other))
    _chosen(model)
    (forged,) = _entries(other)
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(auto_cache))
    CacheDir.open(auto_cache).key()
    (auto_cache / forged.name).write_bytes(forged.read_bytes())
    with pytest.warns(CacheWarning, match="forged"):
        interp = _chosen(model)
    assert interp.auto_selection["cache"]["status"] == "rejected"
    assert interp.auto_selection["mode"] == "measured"


def _seal(auto_cache: Path, model: Path, payload: bytes) -> None:
    store = EntryStore(
        CacheDir.open(auto_cache),
        namespace="auto",
        context={"format": _auto_cache.FORMAT},
        limits={"decision": 1 << 20},
    )
    store.store(f"path:{os.path.realpath(model)}", "decision", payload)


def test_a_sealed_entry_that_does_not_parse_is_discarded(model, auto_cache):
    """Sealed with the right key but not a decision list: discarded and measured again."""
    _seal(auto_cache, model, b"[1, 2, 3]")
    with pytest.warns(CacheWarning, match="unreadable decision entry"):
        interp = _chosen(model)
    assert interp.auto_selection["mode"] == "measured"


def test_a_stored_choice_naming_a_missing_delegate_is_measured_again(model, auto_cache):
    """A record whose delegate cannot be built (uninstalled, bad options) is not used."""
    _chosen(model)
    (entry,) = _entries(auto_cache)
    store = EntryStore(
        CacheDir.open(auto_cache),
        namespace="auto",
        context={"format": _auto_cache.FORMAT},
        limits={"decision": 1 << 20},
    )
    name = f"path:{os.path.realpath(model)}"
    payload = json.loads(store.load(name, "decision"))
    payload["records"][0]["chosen"] = [{"name": "fast", "options": {"no_such_option": 1}}]
    store.store(name, "decision", json.dumps(payload).encode())
    interp = _chosen(model)
    assert interp.auto_selection["mode"] == "measured"
    assert "could not be rebuilt" in interp.auto_selection["cache"]["detail"]


def test_clear_auto_cache_forgets_every_decision(model, auto_cache):
    """offload.clear_auto_cache() removes the entries; the next interpreter measures again."""
    _chosen(model)
    assert offload.clear_auto_cache() == 1
    assert _entries(auto_cache) == []
    assert _chosen(model).auto_selection["cache"]["status"] == "miss"
    assert offload.clear_auto_cache(tmp := auto_cache.parent / "none") == 0 and not tmp.exists()


def test_a_refused_directory_named_by_the_user_raises(model, tmp_path):
    """A cache directory the user named and that is unsafe (group-writable) is an error."""
    bad = tmp_path / "shared"
    bad.mkdir()
    bad.chmod(0o777)
    interp = offload.Interpreter(model_path=model, delegates="auto", auto_cache_dir=bad)
    with pytest.raises(CacheError, match="writable by group or others"):
        interp.allocate_tensors()


def test_the_default_location_refused_only_warns(model, tmp_path, monkeypatch):
    """The default location, refused, warns and runs without remembering."""
    monkeypatch.delenv("OFFLOAD_CACHE_DIR", raising=False)  # the suite's own (conftest)
    monkeypatch.delenv("OFFLOAD_AUTO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    where = tmp_path / "xdg" / "offload" / "auto"
    where.mkdir(parents=True)
    where.chmod(0o777)
    with pytest.warns(CacheWarning, match="without remembering"):
        interp = _chosen(model)
    assert interp.auto_selection["mode"] == "measured"
    assert interp.auto_selection["cache"]["status"] == "off"


def test_no_cache_when_asked(model, auto_cache):
    """auto_cache_dir=False measures every time and writes nothing."""
    assert _chosen(model, auto_cache_dir=False).auto_selection["mode"] == "measured"
    assert _chosen(model, auto_cache_dir=False).auto_selection["mode"] == "measured"
    assert not auto_cache.exists()


def test_the_cached_plan_computes_what_the_reference_computes(model):
    """The plan rebuilt from the cache runs, and agrees with the CPU reference."""
    _chosen(model)
    interp = _chosen(model)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    ref = offload.Interpreter(model_path=model, delegates=[])
    ref.allocate_tensors()
    for it in (interp, ref):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
    out = interp.get_output_details()[0]["index"]
    np.testing.assert_allclose(interp.get_tensor(out), ref.get_tensor(out), rtol=1e-6)


def test_unreadable_cache_warnings_do_not_leak_from_candidates(model):
    """Warnings raised while candidates are measured stay in their rows."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _chosen(model)


def _decision_key(precision_loss_allowed: bool, num_threads: int) -> dict:
    return {
        "model": "ab" * 32,
        "inputs": [[[1, 16], "float32"]],
        "machine": {"cpu": "a CPU", "cpus": 2},
        "devices": {"delegates": {"fast": {"device": "the card"}}},
        "versions": {"offload": "0.1.0", "numpy": "2.0"},
        "options": {
            "delegates": {"fast": {"num_threads": 1, "max_delegated_partitions": None}},
            "num_threads": num_threads,
            "accuracy": {"float_relative": 1e-4, "precision_loss_allowed": precision_loss_allowed},
            "hardware": ["cpu", "gpu"],
        },
        "budget": 2.0,
    }


def test_a_changed_key_names_only_the_settings_that_differ(tmp_path):
    """Two decisions apart in precision_loss_allowed and num_threads: the lookup names those
    two leaves with stored -> now, never the options' whole dictionaries."""
    source = _auto_cache.ModelSource(b"model bytes")
    stored = {"chosen": [{"name": "fast", "options": {}}]}
    assert _auto_cache.DecisionStore(tmp_path).save(source, _decision_key(True, 1), stored)
    found = _auto_cache.DecisionStore(tmp_path).lookup(source, _decision_key(False, 2))
    assert found.status == "changed"
    assert found.changed == ["options"]  # the key fields, as before
    assert found.differences == [
        {"key": "options.accuracy.precision_loss_allowed", "stored": "true", "now": "false"},
        {"key": "options.num_threads", "stored": "1", "now": "2"},
    ]
    assert found.detail == (
        "the stored decision was made with other settings: "
        "options.accuracy.precision_loss_allowed: true -> false; options.num_threads: 1 -> 2"
    )
    assert found.summary()["differences"] == found.differences


def test_long_values_in_a_changed_key_are_shortened():
    """Hashes show their first 12 characters, lists of more than four items their count, a
    missing key "absent", and no hardware named "any"."""
    stored = {
        "model": "a" * 64,
        "options": {"hardware": ["cpu", "gpu"], "gate": {"samples": "c" * 64}},
        "versions": {"ops": ["ADD", "MUL"]},
    }
    now = {
        "model": "b" * 64,
        "options": {"hardware": None, "gate": {"samples": "d" * 64}},
        "versions": {"ops": ["ADD", "MUL", "SUB", "DIV", "EXP"], "openvino": "2025.1"},
    }
    assert _auto_cache.key_differences(stored, now) == [
        {"key": "model", "stored": "a" * 12, "now": "b" * 12},
        {"key": "options.gate.samples", "stored": "c" * 12, "now": "d" * 12},
        {"key": "options.hardware", "stored": "cpu,gpu", "now": "any"},
        {"key": "versions.openvino", "stored": "absent", "now": "2025.1"},
        {"key": "versions.ops", "stored": "ADD,MUL", "now": "[5 items]"},
    ]


def test_a_program_with_other_auto_options_is_reported_by_setting(model, auto_cache):
    """A decision stored by a program that allowed precision loss, looked up by one that does
    not and runs two threads: the report lists the options' leaves that moved, each short."""
    _chosen(model, auto_precision_loss_allowed=True, num_threads=1)
    auto = _chosen(model, num_threads=2).auto_selection
    cache = auto["cache"]
    assert cache["status"] == "changed" and cache["changed"] == ["options"]
    moved = {d["key"]: (d["stored"], d["now"]) for d in cache["differences"]}
    assert moved["options.accuracy.precision_loss_allowed"] == ("true", "false")
    assert moved["options.num_threads"] == ("1", "2")
    assert all(key.startswith("options.") for key in moved)
    assert "{" not in cache["detail"] and len(cache["detail"]) < 400
