"""Old public forms keep working for a minor version with a DeprecationWarning that names the
new form and the removal version; enum options declared by number load again."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import OpCapability
from offload._deprecation import DEPRECATIONS, deprecation, renamed_parameter, warn_deprecated
from offload.model.builder import ModelBuilder

PLUGIN = '''
"""A third-party delegate written against offload 0.1.0's docs: enum options by number."""
import numpy as np

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability

_YES = ModelTypeSupport(support="yes")


class Kernel(DelegateKernel):
    def init(self, subgraph, partition):
        self.weights = subgraph.tensors[subgraph.nodes[partition.nodes[0]].inputs[1]]
        self.w = self.weights.constant_value()

    def invoke(self, inputs):
        return [inputs[0] @ self.w.T]


class OldFC(Delegate):
    name = "old_fc"
    CAPABILITIES = Capabilities(
        ops=(
            OpCapability(op="FULLY_CONNECTED", options={"weights_format": 0}, constant_inputs=(1,)),
        ),
        model_types={t: _YES for t in ("float32", "float16", "dynamic_range", "int8", "qat")},
    )

    def create_kernel(self):
        return Kernel()


@offload.hookimpl
def offload_register_delegates():
    return [OldFC]
'''


@pytest.fixture
def old_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin above, installed as an entry point of a fake distribution."""
    path = tmp_path / "old_fc_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "old_fc_plugin", raising=False)
    point = importlib.metadata.EntryPoint("old_fc", "old_fc_plugin", "offload.delegates")
    monkeypatch.setattr("offload._plugins._entry_points", lambda: [point])
    monkeypatch.delenv("OFFLOAD_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("OFFLOAD_PLUGINS", raising=False)
    offload.reload_plugins()
    yield path
    offload.reload_plugins()


WEIGHTS = np.arange(12, dtype=np.float32).reshape(3, 4) / 10


def _fc_model() -> bytes:
    b = ModelBuilder()
    x, y = b.add_input("x", (1, 4)), b.add_tensor("y", (1, 3))
    w = b.add_constant("w", WEIGHTS)
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y])
    b.add_output(y)
    return b.build()


def test_plugin_declaring_an_enum_number_loads_with_one_warning(old_plugin: Path):
    """options={"weights_format": 0} loads as 'DEFAULT', with one DeprecationWarning that points
    at the plugin's line and names the new spelling and the removal version; it still runs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (record,) = offload.list_delegates()
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in caught]
    message = str(deprecations[0].message)
    assert "'weights_format': 'DEFAULT'" in message and "removed in offload 0.3.0" in message
    assert "weights_format: 0 -> 'DEFAULT'" in message
    assert Path(deprecations[0].filename) == old_plugin
    cap = record.cls.CAPABILITIES.op("FULLY_CONNECTED")
    assert cap.options == {"weights_format": "DEFAULT"}
    it = offload.Interpreter(model_content=_fc_model(), delegates=["old_fc"])
    it.allocate_tensors()
    x = np.ones((1, 4), np.float32)
    it.set_tensor(0, x)
    it.invoke()
    assert it.plan().nodes_of("old_fc") == [0]
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), x @ WEIGHTS.T)


def test_enum_numbers_in_a_mapping_declaration_and_in_sets():
    """Numbers map to names in every spelling of allowed values; unknown numbers still fail."""
    with pytest.warns(DeprecationWarning, match=r"0 -> 'DEFAULT', 1 -> 'SHUFFLED4x16INT8'"):
        cap = OpCapability.model_validate(
            {"op": "FULLY_CONNECTED", "options": {"weights_format": [0, 1]}}
        )
    assert cap.options == {"weights_format": ("DEFAULT", "SHUFFLED4x16INT8")}
    with pytest.warns(DeprecationWarning), pytest.raises(offload.errors.CapabilityDeclarationError):
        OpCapability(op="FULLY_CONNECTED", options={"weights_format": {0, 9}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # names, bools and non-enum fields: no warning
        OpCapability(op="FULLY_CONNECTED", options={"weights_format": "DEFAULT"})
        OpCapability(op="FULLY_CONNECTED", options={"keep_num_dims": False})


def test_warning_names_old_new_and_removal():
    """The helper's message: what is deprecated, since when, the removal version, the new form."""
    entry = DEPRECATIONS["load_delegate-name"]
    with pytest.warns(DeprecationWarning) as caught:
        warn_deprecated(entry)
    text = str(caught[0].message)
    assert text.startswith("load_delegate(name=...) is deprecated since offload 0.2.0")
    assert "will be removed in offload 0.3.0; use load_delegate(library=...)" in text
    assert caught[0].filename == __file__


def test_renamed_parameter_keeps_the_new_signature_and_refuses_both():
    """A renamed parameter: the old keyword works with a warning, both at once is a TypeError."""
    entry = DEPRECATIONS["load_delegate-name"]

    @renamed_parameter(entry, "old", "new")
    def f(new: int) -> int:
        return new

    import inspect

    assert list(inspect.signature(f).parameters) == ["new"]
    with pytest.warns(DeprecationWarning):
        assert f(old=3) == 3
    with pytest.raises(TypeError, match="both 'new' and its deprecated name 'old'"):
        f(new=1, old=2)


def test_deprecations_are_removed_by_their_removal_version():
    """No deprecated form outlives its removal version: once offload reaches it, remove the
    old form (and this fails until then)."""
    from offload._deprecation import _version_tuple

    current = _version_tuple(offload.__version__)
    overdue = [d.key for d in DEPRECATIONS.values() if current >= _version_tuple(d.removal)]
    assert overdue == []
    assert {"capability-enum-numbers", "load_delegate-name"} <= set(DEPRECATIONS)


def test_a_removal_before_a_minor_version_is_refused():
    """A deprecation must leave at least the next version before removal."""
    with pytest.raises(ValueError, match="removal version after 0.2.0"):
        deprecation("x", old="a", new="b", since="0.2.0", removal="0.2.0")


def test_changelog_lists_every_deprecation():
    """CHANGELOG.md's Deprecated section has each deprecation's old form and removal version."""
    changelog = (Path(__file__).resolve().parents[1] / "CHANGELOG.md").read_text()
    deprecated = changelog.split("### Deprecated", 1)[1].split("\n## ", 1)[0].lower()
    for entry in DEPRECATIONS.values():
        assert entry.old.lower() in deprecated, entry.old
        assert entry.removal in deprecated, entry.key


# -- public surface that was public by accident (issue 38, item 6) -----------------------------


def _yes_caps(*ops: OpCapability) -> offload.Capabilities:
    yes = offload.ModelTypeSupport(support="yes")
    return offload.Capabilities(
        ops=ops,
        model_types={t: yes for t in ("float32", "float16", "dynamic_range", "int8", "qat")},
    )


@pytest.mark.parametrize(
    ("module", "name", "new"),
    [
        ("offload.cache", "MAGIC", "CacheDir and EntryStore"),
        ("offload.cache", "KEY_FILE", "CacheDir and EntryStore"),
        ("offload.cache", "MANIFEST_FILE", "CacheDir and EntryStore"),
        ("offload.ops", "strided_slice_ranges", "offload.geometry.strided_slice_ranges"),
    ],
)
def test_module_names_left_public_by_accident_still_resolve_with_a_warning(
    module: str, name: str, new: str
):
    """The old module attributes give the same value, with one warning at the caller's line
    naming the replacement and 0.3.0; they are out of __all__, so `import *` does not warn."""
    import importlib

    mod = importlib.import_module(module)
    assert name not in mod.__all__
    with pytest.warns(DeprecationWarning, match=f"{name} is deprecated.*0.3.0; use {new}") as w:
        value = getattr(mod, name)
    assert len(w) == 1 and w[0].filename == __file__
    if name == "strided_slice_ranges":
        assert value is offload.geometry.strided_slice_ranges
    else:
        assert value == vars(mod)[f"_{name}"]
    with pytest.raises(AttributeError):
        mod.NO_SUCH_NAME  # noqa: B018  # the attribute access is the test


def test_from_import_of_a_deprecated_name_warns_once():
    """`from offload.ops import strided_slice_ranges` warns once, not for importlib's probe."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from offload.ops import strided_slice_ranges  # noqa: F401
    assert [w.filename for w in caught if issubclass(w.category, DeprecationWarning)] == [__file__]


def test_an_identity_override_still_keys_auto_with_a_warning_where_it_is_defined():
    """A delegate written for 0.1 overrides identity(): warned once at its class, and
    device_identity() (what auto's cache key reads) answers with it; a new delegate overrides
    device_identity(), and calling the old identity() on it warns and answers the same."""
    with pytest.warns(DeprecationWarning, match=r"Delegate.identity\(\).*device_identity") as w:

        class Old(offload.Delegate):
            name = "old_identity"
            CAPABILITIES = _yes_caps()

            def identity(self):
                return {"device": "old", **super().identity()}

    assert w[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Old().device_identity() == {"device": "old"}

    class New(offload.Delegate):
        name = "new_identity"
        CAPABILITIES = _yes_caps()

        def device_identity(self):
            return {"device": "new"}

    with pytest.warns(DeprecationWarning, match=r"Delegate.identity\(\) is deprecated"):
        assert New().identity() == {"device": "new"}
    assert offload.Delegate.device_identity(New()) == {}


def test_an_is_node_supported_override_still_answers_with_a_warning():
    """Overriding is_node_supported is warned at the class and still decides the plan;
    check_node is the hook, called only for what the declaration takes."""
    with pytest.warns(DeprecationWarning, match=r"overriding Delegate.is_node_supported\(\)"):

        class Picky(offload.Delegate):
            name = "picky"
            CAPABILITIES = _yes_caps(OpCapability(op="FULLY_CONNECTED", constant_inputs=(1,)))

            def is_node_supported(self, node, subgraph):
                return "never" if node.op == "FULLY_CONNECTED" else None

    model = offload.load_model(model_content=_fc_model())
    assert Picky().is_node_supported(model.main.nodes[0], model.main) == "never"

    class Checked(offload.Delegate):
        name = "checked"
        CAPABILITIES = _yes_caps(
            OpCapability(op="FULLY_CONNECTED", constant_inputs=(1,)),
        ).model_copy(update={"unsupported_ops": {"LSTM": "no LSTM here"}})
        calls: list[str] = []

        def check_node(self, node, subgraph):
            self.calls.append(node.op)
            return "weights too small"

    checked = Checked()
    assert checked.is_node_supported(model.main.nodes[0], model.main) == "weights too small"
    assert checked.calls == ["FULLY_CONNECTED"]
