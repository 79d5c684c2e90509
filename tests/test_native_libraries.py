"""A LiteRT C delegate library (.so) is native code only LiteRT loads: load_delegate and
--external_delegate_path hand it to the installed delegate that runs such libraries, and say
what to install when there is none. Tested with fake entry points, without LiteRT."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import offload
from offload import Availability, Capabilities, Delegate, ModelTypeSupport, OpCapability
from offload.errors import DelegateOptionsError, DelegateUnavailableError, PluginError
from offload.tools._common import add_delegate_args, build_delegates, requested_delegates

CAPS = Capabilities(
    ops=(OpCapability(op="ADD"),),
    model_types={t: ModelTypeSupport(support="yes") for t in offload.ModelType.__args__},
)


class _Runner(Delegate):
    """Stands in for the litert delegate: records the library it was given. Its plugin
    implements offload_native_library_delegate with :meth:`made_for`."""

    name = "runner"
    CAPABILITIES = CAPS
    available = True

    @classmethod
    def made_for(cls, library: str, options: Mapping[str, Any]) -> _Runner:
        made = cls()
        made.library = (library, dict(options))
        return made

    @classmethod
    def availability(cls) -> Availability:
        return Availability(cls.available, "" if cls.available else "no engine here")


class _Plain(Delegate):
    name = "plain"
    CAPABILITIES = CAPS


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, type[Delegate]]]:
    """Fake entry points: name -> delegate class, each in a module of its own."""
    registry: dict[str, type[Delegate]] = {}

    def entry_points() -> list[importlib.metadata.EntryPoint]:
        found = []
        for name, cls in sorted(registry.items()):
            module = types.ModuleType(f"fake_native_{name}")
            module.offload_register_delegates = offload.hookimpl(lambda cls=cls: [cls])  # type: ignore[attr-defined]
            if hasattr(cls, "made_for"):
                module.offload_native_library_delegate = offload.hookimpl(  # type: ignore[attr-defined]
                    lambda library, options, cls=cls: cls.made_for(library, options)
                )
            monkeypatch.setitem(sys.modules, module.__name__, module)
            found.append(importlib.metadata.EntryPoint(name, module.__name__, "offload.delegates"))
        return found

    monkeypatch.setattr("offload._plugins._entry_points", entry_points)
    monkeypatch.delenv("OFFLOAD_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("OFFLOAD_PLUGINS", raising=False)
    monkeypatch.setattr(_Runner, "available", True)
    offload.reload_plugins()
    yield registry
    offload.reload_plugins()


@pytest.mark.parametrize(
    ("name", "native"),
    [
        ("libedgetpu.so.1", True),
        ("/opt/vendor/libdelegate.so", True),
        ("delegate.dylib", True),
        ("delegate.dll", True),
        ("my_delegate.py", False),
        ("package.module", False),
        ("litert", False),
    ],
)
def test_native_libraries_are_known_by_their_file_name(name: str, native: bool) -> None:
    """.so (with or without a version suffix), .dylib and .dll are native libraries."""
    from offload._plugins import is_native_library

    assert is_native_library(name) is native


def test_load_delegate_routes_a_library_to_the_delegate_that_runs_them(
    installed: dict[str, type[Delegate]],
) -> None:
    """load_delegate('x.so', options): the library and its own options reach the runner."""
    installed.update(plain=_Plain, runner=_Runner)
    delegate = offload.load_delegate("/tmp/libvendor.so", {"cache": "/tmp/c", "level": 2})
    assert isinstance(delegate, _Runner)
    assert delegate.library == ("/tmp/libvendor.so", {"cache": "/tmp/c", "level": 2})


def test_without_a_runner_the_error_says_what_to_install(
    installed: dict[str, type[Delegate]],
) -> None:
    """No delegate runs C libraries: a PluginError naming offload-litert, not an import of the
    .so as if it were Python."""
    installed.update(plain=_Plain)
    with pytest.raises(PluginError, match=r"C delegate library.*pip install offload-litert"):
        offload.load_delegate("libvendor.so")


def test_an_unavailable_runner_is_reported_with_its_reason(
    installed: dict[str, type[Delegate]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner is installed but cannot run here: DelegateUnavailableError with why."""
    installed.update(runner=_Runner)
    monkeypatch.setattr(_Runner, "available", False)
    with pytest.raises(DelegateUnavailableError, match="no engine here"):
        offload.load_delegate("libvendor.so")


def test_library_options_must_be_a_mapping(installed: dict[str, type[Delegate]]) -> None:
    """A library's options are its own names and values, not a delegate's Options object."""
    installed.update(runner=_Runner)
    with pytest.raises(DelegateOptionsError, match="library's own"):
        offload.load_delegate("libvendor.so", offload.DelegateOptions())


def test_external_delegate_path_flag_routes_a_library(
    installed: dict[str, type[Delegate]],
) -> None:
    """--external_delegate_path x.so --external_delegate_options 'k:v' reaches the runner."""
    installed.update(runner=_Runner)
    parser = argparse.ArgumentParser()
    add_delegate_args(parser)
    args = parser.parse_args(
        ["--external_delegate_path", "libvendor.so", "--external_delegate_options", "a:1;b:x"]
    )
    (choice,) = build_delegates(requested_delegates(args))
    assert choice.name == "runner"
    assert choice.delegate.library == ("libvendor.so", {"a": 1, "b": "x"})


def test_a_delegate_written_for_0_1_still_runs_libraries_with_a_warning(
    installed: dict[str, type[Delegate]],
) -> None:
    """A delegate class that sets runs_native_delegates and implements for_native_library
    (offload 0.1's way) is warned once where it is defined, and still gets the library."""
    with pytest.warns(
        DeprecationWarning,
        match=r"runs_native_delegates.*removed in offload "
        r"0\.3\.0.*offload_native_library_delegate",
    ) as caught:

        class _OldRunner(Delegate):
            name = "old_runner"
            CAPABILITIES = CAPS
            runs_native_delegates = True

            @classmethod
            def for_native_library(
                cls, path: str, options: Mapping[str, Any] | None = None
            ) -> _OldRunner:
                made = cls()
                made.library = (path, dict(options or {}))
                return made

    assert caught[0].filename == __file__
    installed.update(plain=_Plain, old_runner=_OldRunner)
    delegate = offload.load_delegate("libvendor.so", {"level": 2})
    assert isinstance(delegate, _OldRunner)
    assert delegate.library == ("libvendor.so", {"level": 2})


def test_the_hook_wins_over_a_deprecated_runner(installed: dict[str, type[Delegate]]) -> None:
    """Where a plugin's hook answers, a class still declaring runs_native_delegates is not
    asked."""
    with pytest.warns(DeprecationWarning):

        class _OldRunner(Delegate):
            name = "aa_old_runner"
            CAPABILITIES = CAPS
            runs_native_delegates = True

            @classmethod
            def for_native_library(cls, path: str, options: Any = None) -> Delegate:
                raise AssertionError("the hook answered first")

    installed.update(aa_old_runner=_OldRunner, runner=_Runner)
    assert isinstance(offload.load_delegate("libvendor.so"), _Runner)
