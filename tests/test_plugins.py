"""The plugin loading policy, tested with fake entry points and once with a real install."""

from __future__ import annotations

import builtins
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import (
    Availability,
    Capabilities,
    Delegate,
    DelegateKernel,
    ModelTypeSupport,
    OpCapability,
)
from offload._cli import main as cli_main
from offload._plugins import PluginRecord, _entry_points, plugin_manager
from offload.errors import (
    CapabilityDeclarationError,
    DelegateUnavailableError,
    PluginError,
    PluginHookError,
    PluginImportError,
)
from offload.model.builder import ModelBuilder

ROOT = Path(__file__).resolve().parents[1]
YES = ModelTypeSupport(support="yes")
CAPS = Capabilities(
    ops=(OpCapability(op="ADD"),),
    model_types={t: YES for t in ("float32", "float16", "dynamic_range", "int8", "qat")},
)


class _Kernel(DelegateKernel):
    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.partition = partition

    def invoke(self, inputs):  # noqa: ANN001, ANN201
        return [np.add(*inputs)]


def _plugin_module(
    name: str, delegate_cls: type | None = None, raises: bool = False
) -> types.ModuleType:
    module = types.ModuleType(name)
    if delegate_cls is not None:
        module.offload_register_delegates = offload.hookimpl(lambda: [delegate_cls])  # type: ignore[attr-defined]
    if raises:
        module.__getattr__ = lambda attr: (_ for _ in ()).throw(RuntimeError("boom"))  # type: ignore[method-assign]
    return module


def _delegate(name: str, available: bool = True) -> type[Delegate]:
    class Fake(Delegate):
        CAPABILITIES = CAPS

        @classmethod
        def availability(cls) -> Availability:
            return Availability(available, "" if available else "no such hardware here")

        def create_kernel(self) -> DelegateKernel:
            return _Kernel()

    Fake.name = name
    return Fake


@pytest.fixture
def fake_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Replace the entry-point group with fake ones: name -> module path (or a broken one)."""
    registry: dict[str, str] = {}

    def fake_entry_points() -> list[importlib.metadata.EntryPoint]:
        return [
            importlib.metadata.EntryPoint(n, v, "offload.delegates")
            for n, v in sorted(registry.items())
        ]

    monkeypatch.setattr("offload._plugins._entry_points", fake_entry_points)
    monkeypatch.delenv("OFFLOAD_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("OFFLOAD_PLUGINS", raising=False)
    offload.reload_plugins()
    yield registry
    offload.reload_plugins()


def _install(
    monkeypatch: pytest.MonkeyPatch,
    registry: dict[str, str],
    name: str,
    module: types.ModuleType | None,
) -> None:
    modname = f"fake_offload_plugin_{name}"
    if module is not None:
        monkeypatch.setitem(sys.modules, modname, module)
    registry[name] = modname


def _add_model() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    y = b.add_input("y", shape=(2, 3))
    z = b.add_tensor("z", shape=(2, 3))
    b.add_operator("ADD", inputs=[x, y], outputs=[z])
    b.add_output(z)
    return b.build()


def test_entry_point_group_is_offload_delegates() -> None:
    """Discovery reads exactly the offload.delegates entry-point group."""
    assert all(ep.group == "offload.delegates" for ep in _entry_points())


def test_plugin_import_error_is_reported_and_host_survives(fake_plugins, monkeypatch) -> None:
    """A plugin that fails to import is reported by name; the others and the CPU still work."""
    _install(monkeypatch, fake_plugins, "good", _plugin_module("good", _delegate("good")))
    _install(monkeypatch, fake_plugins, "broken", None)  # module does not exist: ImportError
    with pytest.warns(UserWarning, match='Error importing offload plugin "broken"'):
        records = {r.name: r for r in offload.list_plugins()}
    assert records["broken"].status == "import-error"
    assert "ModuleNotFoundError" in records["broken"].error
    assert [d.name for d in offload.list_delegates()] == ["good"]
    with pytest.raises(PluginImportError, match="broken"):
        offload.load_delegate("broken")
    interp = offload.Interpreter(model_content=_add_model(), delegates=["good"])
    interp.allocate_tensors()
    interp.set_tensor(0, np.ones((2, 3), np.float32))
    interp.set_tensor(1, np.ones((2, 3), np.float32))
    interp.invoke()
    assert np.array_equal(interp.get_tensor(2), np.full((2, 3), 2, np.float32))


def test_unavailable_delegate_is_listed_and_raised_only_on_request(
    fake_plugins, monkeypatch
) -> None:
    """An unavailable delegate shows its reason in listings and raises only when asked for."""
    _install(
        monkeypatch, fake_plugins, "absent", _plugin_module("absent", _delegate("absent", False))
    )
    (record,) = offload.list_delegates()
    assert not record.availability.available and "no such hardware" in record.availability.reason
    interp = offload.Interpreter(model_content=_add_model(), delegates="auto")
    assert interp.delegates == []
    with pytest.raises(DelegateUnavailableError, match="no such hardware here"):
        offload.load_delegate("absent")


def test_autoload_can_be_disabled(fake_plugins, monkeypatch) -> None:
    """OFFLOAD_DISABLE_PLUGIN_AUTOLOAD=1 loads nothing; the CPU reference still runs."""
    _install(monkeypatch, fake_plugins, "good", _plugin_module("good", _delegate("good")))
    monkeypatch.setenv("OFFLOAD_DISABLE_PLUGIN_AUTOLOAD", "1")
    offload.reload_plugins()
    assert offload.list_delegates() == []
    assert offload.capability_matrix()["delegates"].keys() == {"cpu"}


def test_named_plugins_load_even_with_autoload_off(fake_plugins, monkeypatch) -> None:
    """OFFLOAD_PLUGINS=a,b loads only the named plugins."""
    _install(monkeypatch, fake_plugins, "a", _plugin_module("a", _delegate("a")))
    _install(monkeypatch, fake_plugins, "b", _plugin_module("b", _delegate("b")))
    monkeypatch.setenv("OFFLOAD_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("OFFLOAD_PLUGINS", "b")
    offload.reload_plugins()
    assert [d.name for d in offload.list_delegates()] == ["b"]
    with pytest.raises(PluginError, match="not named in OFFLOAD_PLUGINS"):
        offload.load_delegate("a")


def test_malformed_capabilities_fail_with_plugin_name(fake_plugins, monkeypatch) -> None:
    """A delegate declaring capabilities that do not validate makes its plugin invalid, by name."""
    bad = _delegate("bad")
    bad.CAPABILITIES = {"ops": [{"op": "NOT_AN_OP"}], "model_types": {}}  # type: ignore[assignment]
    _install(monkeypatch, fake_plugins, "badplugin", _plugin_module("badplugin", bad))
    with pytest.warns(UserWarning, match='plugin "badplugin" is invalid'):
        (record,) = offload.list_plugins()
    assert record.status == "invalid" and "NOT_AN_OP" in record.error


def test_external_delegate_loads_from_a_file(tmp_path: Path) -> None:
    """load_delegate('path/to/file.py') loads a delegate that is not installed."""
    source = tmp_path / "my_delegate.py"
    source.write_text(
        textwrap.dedent("""
        import numpy as np
        from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability

        class Kernel(DelegateKernel):
            def invoke(self, inputs):
                return [np.add(*inputs)]

        class MyDelegate(Delegate):
            name = "mine"
            CAPABILITIES = Capabilities(
                ops=(OpCapability(op="ADD"),),
                model_types={t: ModelTypeSupport(support="yes")
                             for t in ("float32", "float16", "dynamic_range", "int8", "qat")})

            def create_kernel(self):
                return Kernel()
    """)
    )
    delegate = offload.load_delegate(str(source), {"min_nodes_per_partition": 1})
    assert delegate.name == "mine"
    interp = offload.Interpreter(model_content=_add_model(), experimental_delegates=[delegate])
    assert interp.plan().nodes_of("mine") == [0]


def test_external_delegate_import_error_is_typed(tmp_path: Path) -> None:
    """An external delegate file that raises on import gives PluginImportError with its path."""
    source = tmp_path / "broken_delegate.py"
    source.write_text("raise RuntimeError('cannot start')\n")
    with pytest.raises(PluginImportError, match="broken_delegate.py.*cannot start"):
        offload.load_delegate(str(source))


# -- hostile plugins: no exception from plugin code may end the host -------------------------
# SystemExit and GeneratorExit are BaseExceptions, so a plain ``except Exception`` lets them
# through; KeyboardInterrupt is the user asking to stop, and must still stop everything.

# The exception type a plugin raises -> its argument.
FAILURES: dict[str, object] = {
    "SystemExit": 3,
    "GeneratorExit": "closing",
    "RuntimeError": "plugin is broken",
}
FAILURE_KINDS = sorted(FAILURES)


def _failure(kind: str) -> BaseException:
    return getattr(builtins, kind)(FAILURES[kind])


def _failure_source(kind: str) -> str:
    return f"raise {kind}({FAILURES[kind]!r})"


def _module_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> str:
    """Write ``body`` as an importable module under tmp_path; return its module name."""
    modname = f"fake_offload_plugin_file_{name}"
    (tmp_path / f"{modname}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    return modname


def _hook_raising(name: str, exc: BaseException) -> types.ModuleType:
    """A plugin module whose offload_register_delegates hook raises ``exc``."""

    @offload.hookimpl
    def offload_register_delegates() -> list[type[Delegate]]:
        raise exc

    module = types.ModuleType(name)
    module.offload_register_delegates = offload_register_delegates  # type: ignore[attr-defined]
    return module


def _raising_availability(exc: BaseException) -> classmethod:
    def availability(cls: type[Delegate]) -> Availability:
        raise exc

    return classmethod(availability)


def _host_survives(capsys: pytest.CaptureFixture[str], failed: str) -> None:
    """The good plugin, delegates="auto" and ``offload delegates`` all still work."""
    assert [d.name for d in offload.list_delegates()] == ["good"]
    interp = offload.Interpreter(model_content=_add_model(), delegates="auto")
    interp.allocate_tensors()
    capsys.readouterr()
    assert cli_main(["delegates", "--json"]) == 0
    failed_plugins = json.loads(capsys.readouterr().out)["failed_plugins"]
    assert failed in {p["name"] for p in failed_plugins}


@pytest.mark.parametrize("kind", FAILURE_KINDS)
def test_plugin_failing_on_import_is_contained(
    fake_plugins, monkeypatch, tmp_path, capsys, kind: str
) -> None:
    """Any exception at import, SystemExit included, is that plugin's import error, with its
    name; the traceback is kept on the record and as __cause__ of the error raised on request."""
    _install(monkeypatch, fake_plugins, "good", _plugin_module("good", _delegate("good")))
    fake_plugins["exiting"] = _module_file(
        tmp_path, monkeypatch, f"import_{kind}", _failure_source(kind) + "\n"
    )
    with pytest.warns(UserWarning, match=f'Error importing offload plugin "exiting".*{kind}'):
        records = {r.name: r for r in offload.list_plugins()}
    record = records["exiting"]
    assert record.status == "import-error" and record.error.startswith(kind)
    assert type(record.exception).__name__ == kind
    assert _failure_source(kind) in record.traceback  # the plugin's own line, from its file
    with pytest.raises(PluginImportError, match=f'"exiting" failed to load: {kind}') as info:
        offload.load_delegate("exiting")
    assert info.value.__cause__ is record.exception
    _host_survives(capsys, "exiting")


@pytest.mark.parametrize("kind", FAILURE_KINDS)
def test_plugin_failing_in_a_hook_is_contained(fake_plugins, monkeypatch, capsys, kind) -> None:
    """Any exception from a hook, SystemExit included, makes that plugin invalid, by name."""
    _install(monkeypatch, fake_plugins, "good", _plugin_module("good", _delegate("good")))
    _install(monkeypatch, fake_plugins, "hooked", _hook_raising("hooked", _failure(kind)))
    with pytest.warns(UserWarning, match=f'plugin "hooked" is invalid: {kind}'):
        records = {r.name: r for r in offload.list_plugins()}
    record = records["hooked"]
    assert record.status == "invalid" and type(record.exception).__name__ == kind
    assert record.error.endswith("(raised by hook offload_register_delegates)")
    assert "offload_register_delegates" in record.traceback
    assert plugin_manager().pm.get_plugin("hooked") is None  # unregistered again
    with pytest.raises(PluginImportError, match='"hooked" failed to load') as info:
        offload.load_delegate("hooked")
    assert info.value.__cause__ is record.exception
    _host_survives(capsys, "hooked")


@pytest.mark.parametrize("kind", FAILURE_KINDS)
def test_availability_probe_that_raises_means_unavailable(fake_plugins, monkeypatch, kind) -> None:
    """An availability() that raises anything but KeyboardInterrupt reads as unavailable."""
    probe = _delegate("probe")
    probe.availability = _raising_availability(_failure(kind))  # type: ignore[method-assign]
    _install(monkeypatch, fake_plugins, "probe", _plugin_module("probe", probe))
    (record,) = offload.list_delegates()
    assert not record.availability.available
    assert f"availability check raised {kind}" in record.availability.reason
    interp = offload.Interpreter(model_content=_add_model(), delegates="auto")
    assert interp.delegates == []
    with pytest.raises(DelegateUnavailableError, match=kind):
        offload.load_delegate("probe")


def test_keyboard_interrupt_from_a_plugin_still_stops_the_host(
    fake_plugins, monkeypatch, tmp_path
) -> None:
    """Ctrl-C during a plugin's import, hook or availability probe is not swallowed."""
    fake_plugins["ctrl_c"] = _module_file(
        tmp_path, monkeypatch, "ctrl_c", "raise KeyboardInterrupt\n"
    )
    with pytest.raises(KeyboardInterrupt):
        offload.list_plugins()
    del fake_plugins["ctrl_c"]
    _install(monkeypatch, fake_plugins, "hook", _hook_raising("hook", KeyboardInterrupt()))
    offload.reload_plugins()
    with pytest.raises(KeyboardInterrupt):
        offload.list_plugins()
    del fake_plugins["hook"]
    probe = _delegate("probe")
    probe.availability = _raising_availability(KeyboardInterrupt())  # type: ignore[method-assign]
    _install(monkeypatch, fake_plugins, "probe", _plugin_module("probe", probe))
    offload.reload_plugins()
    with pytest.raises(KeyboardInterrupt):
        offload.list_plugins()


def test_external_delegate_that_exits_is_a_typed_error(tmp_path: Path) -> None:
    """load_delegate('file.py') turns sys.exit() at import into PluginImportError."""
    source = tmp_path / "exiting_delegate.py"
    source.write_text("import sys\nsys.exit(4)\n")
    with pytest.raises(PluginImportError, match="exiting_delegate.py.*SystemExit: 4") as info:
        offload.load_delegate(str(source))
    assert isinstance(info.value.__cause__, SystemExit)


@pytest.mark.skipif(
    os.environ.get("OFFLOAD_SKIP_VENV_TEST") == "1", reason="OFFLOAD_SKIP_VENV_TEST=1"
)
def test_real_install_and_uninstall_of_dummy(tmp_path: Path) -> None:
    """In a fresh venv, core alone lists only the CPU; installing plugins/dummy adds it;
    uninstalling removes it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(ROOT)], check=True)
    probe = [py, "-c", "import offload; print(sorted(offload.capability_matrix()['delegates']))"]

    def listed() -> str:
        return subprocess.run(probe, check=True, capture_output=True, text=True).stdout.strip()

    assert listed() == "['cpu']"
    subprocess.run([*pip, "--no-deps", str(ROOT / "plugins" / "dummy")], check=True)
    assert listed() == "['cpu', 'dummy']"
    subprocess.run([py, "-m", "pip", "uninstall", "-q", "-y", "offload-dummy"], check=True)
    assert listed() == "['cpu']"


# -- hooks are checked against the hookspecs and called through pluggy ------------------------


def _module_with(name: str, **functions: object) -> types.ModuleType:
    module = types.ModuleType(name)
    for attr, value in functions.items():
        setattr(module, attr, value)
    return module


def _invalid_record(name: str) -> PluginRecord:
    with pytest.warns(UserWarning, match=f'plugin "{name}" is invalid'):
        records = {r.name: r for r in offload.list_plugins()}
    return records[name]


def test_hook_without_hookimpl_marker_makes_the_plugin_invalid(fake_plugins, monkeypatch) -> None:
    """An offload_* function lacking @offload.hookimpl is an error, not a silent empty plugin."""
    plain = _module_with("plain", offload_register_delegates=lambda: [_delegate("plain")])
    _install(monkeypatch, fake_plugins, "plain", plain)
    record = _invalid_record("plain")
    assert isinstance(record.exception, PluginHookError)
    assert "offload_register_delegates not marked with @offload.hookimpl" in record.error
    assert offload.list_delegates() == []


def test_misspelt_hook_is_reported_with_a_suggestion(fake_plugins, monkeypatch) -> None:
    """A hook name no spec has fails check_pending; the error suggests the close spec name."""
    typo = offload.hookimpl(lambda: [_delegate("typo")])
    _install(monkeypatch, fake_plugins, "typo", _module_with("t", offload_register_delegate=typo))
    record = _invalid_record("typo")
    assert "unknown hook 'offload_register_delegate'" in record.error
    assert "did you mean 'offload_register_delegates'" in record.error
    assert plugin_manager().pm.get_plugin("typo") is None


def test_hook_argument_the_spec_lacks_names_plugin_hook_and_argument(
    fake_plugins, monkeypatch
) -> None:
    """pluggy's signature check runs at registration; the error names plugin, hook, argument."""

    @offload.hookimpl
    def offload_register_delegates(device):  # noqa: ANN001, ANN202
        return []

    module = _module_with("arg", offload_register_delegates=offload_register_delegates)
    _install(monkeypatch, fake_plugins, "arg", module)
    error = _invalid_record("arg").error
    assert "'arg'" in error and "offload_register_delegates" in error and "device" in error
    assert plugin_manager().pm.get_plugin("arg") is None


def test_each_plugin_s_results_are_attributed_to_it(fake_plugins, monkeypatch) -> None:
    """Hooks are called per plugin: every delegate records the plugin that returned it."""
    _install(monkeypatch, fake_plugins, "one", _plugin_module("one", _delegate("d1")))
    _install(monkeypatch, fake_plugins, "two", _plugin_module("two", _delegate("d2")))
    assert {d.name: d.plugin for d in offload.list_delegates()} == {"d1": "one", "d2": "two"}


def test_provider_flag_for_a_missing_option_makes_the_plugin_invalid(
    fake_plugins, monkeypatch
) -> None:
    """A provider's flag must set an option the delegate's Options has."""
    provider = offload.DelegateProvider(
        delegate="flagged",
        enable_flag="--use_flagged",
        flags=(offload.DelegateFlag(flag="--flagged_speed", option="speed"),),
    )
    module = _plugin_module("flagged", _delegate("flagged"))
    module.offload_delegate_providers = offload.hookimpl(lambda: [provider])  # type: ignore[attr-defined]
    _install(monkeypatch, fake_plugins, "flagged", module)
    error = _invalid_record("flagged").error
    assert "--flagged_speed sets option 'speed'" in error and "min_nodes_per_partition" in error


def test_external_delegate_hooks_are_checked_the_same_way(tmp_path: Path) -> None:
    """load_delegate('file.py') refuses an unmarked offload_* function like an installed plugin."""
    source = tmp_path / "unmarked_delegate.py"
    source.write_text("def offload_register_delegates():\n    return []\n")
    with pytest.raises(PluginHookError, match="not marked with @offload.hookimpl"):
        offload.load_delegate(str(source))


def test_plugin_without_any_hook_is_invalid_and_names_its_module(fake_plugins, monkeypatch) -> None:
    """An entry point that resolves to a module with no hook is invalid, naming that module."""
    _install(monkeypatch, fake_plugins, "empty", _module_with("shadowing_folder"))
    record = _invalid_record("empty")
    assert isinstance(record.exception, PluginHookError)
    assert "'shadowing_folder'" in record.error and "implements no offload hook" in record.error


def test_invalid_plugin_asked_for_by_name_raises_its_own_error_class(
    fake_plugins, monkeypatch
) -> None:
    """A plugin that imported but declares nonsense raises what it got, not an import error."""
    bad = _delegate("bad")
    bad.CAPABILITIES = {"ops": [{"op": "NOT_AN_OP"}], "model_types": {}}  # type: ignore[assignment]
    _install(monkeypatch, fake_plugins, "badplugin", _plugin_module("badplugin", bad))
    with pytest.warns(UserWarning, match='plugin "badplugin" is invalid'):
        offload.list_plugins()
    with pytest.raises(CapabilityDeclarationError, match='"badplugin" is invalid: .*NOT_AN_OP'):
        offload.load_delegate("badplugin")
