"""A damaged decision cache never stops a program that did not ask for it.

Each kind of damage (an empty, garbage, loose or misplaced key file; a cache path that is a
file, a link, shared or unreadable; a read or write that fails) is tried on every way the
cache is reached: the default Interpreter and CompiledModel warn once, naming the directory
and the fault, and run; ``delegates="auto"`` with the directory from the environment warns,
measures and stores nothing; only ``delegates="auto"`` with ``auto_cache_dir=`` given raises.
"""

from __future__ import annotations

import errno
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import compiled_model as cm
from offload.cache import _KEY_FILE as KEY_FILE
from offload.cache import CacheWarning, EntryStore
from offload.errors import CacheError
from tests._auto_fakes import FAST, LITERT, SLOW, chain_model, install, slow_reference

X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)


def _empty_key(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.mkdir(mode=0o700)
    (d / KEY_FILE).write_bytes(b"")
    (d / KEY_FILE).chmod(0o600)


def _garbage_key(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.mkdir(mode=0o700)
    (d / KEY_FILE).write_bytes(b"\x00garbage, not a key\n")
    (d / KEY_FILE).chmod(0o600)


def _loose_key(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.mkdir(mode=0o700)
    (d / KEY_FILE).write_bytes(os.urandom(32))
    (d / KEY_FILE).chmod(0o644)


def _key_is_a_directory(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.mkdir(mode=0o700)
    (d / KEY_FILE).mkdir()


def _key_is_a_symlink(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.mkdir(mode=0o700)
    real = d.parent / "elsewhere.key"
    real.write_bytes(os.urandom(32))
    real.chmod(0o600)
    (d / KEY_FILE).symlink_to(real)


def _dir_is_a_file(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.write_bytes(b"not a directory")


def _dir_is_a_symlink(d: Path, mp: pytest.MonkeyPatch) -> None:
    real = d.parent / "real-cache"
    real.mkdir(mode=0o700)
    d.symlink_to(real)


def _dir_is_shared(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.mkdir()
    d.chmod(0o777)


def _parent_is_a_file(d: Path, mp: pytest.MonkeyPatch) -> None:
    d.parent.write_bytes(b"")  # the cache path's parent: a file, so it cannot be made


def _dir_unreadable(d: Path, mp: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a directory of mode 0 (the tests run as root here)")
    d.mkdir(mode=0o700)
    d.chmod(0)


def _dir_denied(d: Path, mp: pytest.MonkeyPatch) -> None:
    """What a user who is not root meets in a directory of mode 0, for root as well: opening
    it fails with EACCES."""
    d.mkdir(mode=0o700)
    real_open = os.open

    def denied(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if os.fspath(path) == str(d):
            raise PermissionError(errno.EACCES, "Permission denied", str(d))
        return real_open(path, *args, **kwargs)

    mp.setattr(os, "open", denied)
    mp.setattr(os, "supports_dir_fd", os.supports_dir_fd | {denied})


# name -> (damage, where the cache path points relative to tmp_path, the fault's words)
DAMAGE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "empty key file": (_empty_key, "cache", "holds 0 bytes"),
    "garbage key file": (_garbage_key, "cache", r"holds \d+ bytes, not 32"),
    "key file readable by others": (_loose_key, "cache", "mode 0o644"),
    "key file is a directory": (_key_is_a_directory, "cache", "a directory, not a regular"),
    "key file is a symlink": (_key_is_a_symlink, "cache", "symbolic link"),
    "cache dir is a regular file": (_dir_is_a_file, "cache", "not a directory"),
    "cache dir is a symlink": (_dir_is_a_symlink, "cache", "symbolic link"),
    "cache dir writable by others": (_dir_is_shared, "cache", "writable by group or others"),
    "cache dir under a file": (_parent_is_a_file, "file/cache", "cannot create"),
    "cache dir unreadable": (_dir_unreadable, "cache", "Permission denied"),
    "cache dir denied (EACCES)": (_dir_denied, "cache", "Permission denied"),
}


@pytest.fixture(params=list(DAMAGE))
def damaged(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """A damaged cache directory (not yet in the environment) and the fault's words."""
    damage, where, fault = DAMAGE[request.param]
    path = tmp_path / where
    damage(path, monkeypatch)
    if request.param == "cache dir unreadable":
        request.addfinalizer(lambda: path.chmod(0o700))
    install(monkeypatch, FAST, SLOW, LITERT)
    slow_reference(monkeypatch)
    return path, fault


def _reference() -> np.ndarray:
    ref = offload.Interpreter(model_content=chain_model(), delegates=[])
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], X)
    ref.invoke()
    return ref.get_tensor(ref.get_output_details()[0]["index"])


def _run(interp: offload.Interpreter) -> np.ndarray:
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], X)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def _cache_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def _warned_once(caught: list[warnings.WarningMessage], path: Path, fault: str) -> None:
    (message,) = _cache_warnings(caught)
    assert issubclass(CacheWarning, UserWarning)
    assert str(path) in message and "without remembering" in message, message
    assert re.search(fault, message), message


def _untouched(path: Path, before: list[str]) -> None:
    """Nothing was repaired or written: the damage is the user's to look at."""
    assert _listing(path) == before


def _listing(path: Path) -> list[str]:
    if path.is_symlink() or not path.is_dir():
        return [f"{path.name}:{path.lstat().st_mode:o}"] if os.path.lexists(path) else []
    try:
        return sorted(f"{p.name}:{p.lstat().st_size}" for p in path.iterdir())
    except OSError:
        return ["unreadable"]


def test_the_default_interpreter_warns_once_and_runs(damaged, monkeypatch):
    """A plain Interpreter(model) with the damaged cache set by the environment runs, on the
    default delegates, with one warning naming the directory and the fault."""
    path, fault = damaged
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(path))
    before = _listing(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interp = offload.Interpreter(model_content=chain_model())
        got = _run(interp)
    _warned_once(caught, path, fault)
    np.testing.assert_allclose(got, _reference(), rtol=1e-6)
    report = interp.delegation_report()["default"]
    assert report["applied"] == ["litert"] and report["source"] == "litert"
    _untouched(path, before)


def test_compiled_model_warns_once_and_runs(damaged, monkeypatch):
    """CompiledModel (which measures its candidates, as auto does) with the damaged cache set
    by the environment compiles and runs, with one warning."""
    path, fault = damaged
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(path))
    monkeypatch.setenv("OFFLOAD_AUTO_BUDGET_S", "0.2")
    before = _listing(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = cm.CompiledModel.from_buffer(chain_model())
        ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
        ins[0].write(X)
        model.run_by_index(0, ins, outs)
    _warned_once(caught, path, fault)
    np.testing.assert_allclose(outs[0].read(16, np.float32), _reference().ravel(), rtol=1e-6)
    assert model.interpreter.auto_selection["cache"]["status"] == "off"
    _untouched(path, before)


def test_auto_with_the_directory_from_the_environment_measures_and_stores_nothing(
    damaged, monkeypatch
):
    """delegates="auto" whose cache directory the environment set (not the program): one
    warning, a measured choice, nothing stored."""
    path, fault = damaged
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(path))
    before = _listing(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interp = offload.Interpreter(
            model_content=chain_model(), delegates="auto", auto_budget_s=0.2
        )
        got = _run(interp)
    _warned_once(caught, path, fault)
    auto = interp.auto_selection
    assert auto["mode"] == "measured" and auto["chosen"] in (["fast"], ["litert"])
    assert auto["cache"]["status"] == "off" and auto["cache"]["stored"] is False
    np.testing.assert_allclose(got, _reference(), rtol=1e-6)
    _untouched(path, before)


def test_auto_with_an_explicit_directory_raises(damaged):
    """delegates="auto" with auto_cache_dir= given: the program asked for this directory, so
    its fault is a CacheError at allocate_tensors, naming it."""
    path, fault = damaged
    interp = offload.Interpreter(
        model_content=chain_model(), delegates="auto", auto_budget_s=0.2, auto_cache_dir=path
    )
    with pytest.raises(CacheError, match=fault) as info:
        interp.allocate_tensors()
    assert str(path) in str(info.value)


def test_the_default_with_an_explicit_directory_only_warns(damaged):
    """auto_cache_dir= without delegates="auto" is only read by the default: it warns."""
    path, fault = damaged
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _run(offload.Interpreter(model_content=chain_model(), auto_cache_dir=path))
    _warned_once(caught, path, fault)
    np.testing.assert_allclose(got, _reference(), rtol=1e-6)


def test_auto_asked_by_the_environment_only_warns(damaged, monkeypatch):
    """$OFFLOAD_DELEGATES=auto is set for a program, not by it: a fault warns, even with
    auto_cache_dir= given by the program."""
    path, fault = damaged
    monkeypatch.setenv("OFFLOAD_DELEGATES", "auto")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interp = offload.Interpreter(
            model_content=chain_model(), auto_budget_s=0.2, auto_cache_dir=path
        )
        got = _run(interp)
    _warned_once(caught, path, fault)
    assert interp.auto_selection["mode"] == "measured"
    np.testing.assert_allclose(got, _reference(), rtol=1e-6)


# -- faults of the file system under a healthy directory ----------------------------------------


@pytest.fixture
def failing_io(monkeypatch: pytest.MonkeyPatch, auto_cache: Path) -> Path:
    """A good cache whose reads and writes fail with EIO, as on a failing disk."""
    install(monkeypatch, FAST, SLOW, LITERT)
    slow_reference(monkeypatch)

    def fail(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(EntryStore, "load", fail)
    monkeypatch.setattr(EntryStore, "store", fail)
    return auto_cache


def test_failing_reads_and_writes_warn_once_where_not_asked(failing_io):
    """An I/O error reading or writing an entry: the default and auto with the directory from
    the environment warn once and run."""
    for kwargs in ({}, {"delegates": "auto", "auto_budget_s": 0.2}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = _run(offload.Interpreter(model_content=chain_model(), **kwargs))
        _warned_once(caught, failing_io, "Input/output error")
        np.testing.assert_allclose(got, _reference(), rtol=1e-6)


def test_failing_reads_raise_where_asked(failing_io):
    """The same I/O error with auto and auto_cache_dir= given is a CacheError naming it."""
    interp = offload.Interpreter(
        model_content=chain_model(), delegates="auto", auto_budget_s=0.2, auto_cache_dir=failing_io
    )
    with pytest.raises(CacheError, match=f"auto cache {failing_io}: .*Input/output error"):
        interp.allocate_tensors()
