"""With no delegate named, offload applies its default delegates, as LiteRT applies XNNPACK:
the remembered auto choice, else litert; delegates=[] and LiteRT's resolver choices without
default delegates give the CPU reference alone; $OFFLOAD_DELEGATES sets the default."""

from __future__ import annotations

import numpy as np
import pytest

import offload
from offload.interpreter import OpResolverType
from tests._auto_fakes import FAST, INITS, LITERT, SLOW, chain_model, install, slow_reference


@pytest.fixture
def fakes(monkeypatch, auto_cache):  # type: ignore[no-untyped-def]
    install(monkeypatch, FAST, SLOW, LITERT)
    slow_reference(monkeypatch)
    return monkeypatch


def _default(**kwargs) -> dict:  # type: ignore[no-untyped-def]
    interp = offload.Interpreter(model_content=chain_model(), **kwargs)
    interp.allocate_tensors()
    return interp.delegation_report()["default"]


def test_nothing_named_applies_litert_without_timing(fakes):
    """Nothing stored: the default is litert, chosen without measuring anything."""
    INITS.clear()
    report = _default()
    assert report["mode"] == "default" and report["applied"] == ["litert"]
    assert report["source"] == "litert"
    assert "no decision stored" in report["reason"]
    assert INITS == {"FakeKernel": 1}  # litert's own partition, nothing else prepared


def test_nothing_named_applies_the_remembered_choice(fakes):
    """Once "auto" has measured this model here, the default takes its choice."""
    auto = offload.Interpreter(model_content=chain_model(), delegates="auto")
    auto.allocate_tensors()
    chosen = auto.auto_selection["chosen"]
    report = _default()
    assert report["source"] == "cache" and report["applied"] == chosen
    assert "fastest" in report["reason"]


def test_the_default_budget_is_part_of_the_key(fakes):
    """A choice measured with another budget is not the default's."""
    offload.Interpreter(model_content=chain_model(), delegates="auto", auto_budget_s=0.5).plan()
    assert _default()["source"] == "litert"
    assert _default(auto_budget_s=0.5)["source"] == "cache"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delegates": []},
        {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES},
        {"experimental_op_resolver_type": OpResolverType.BUILTIN_REF},
    ],
    ids=["empty-list", "without-default-delegates", "builtin-ref"],
)
def test_the_cpu_reference_alone_when_asked(fakes, kwargs):
    """delegates=[] and LiteRT's resolvers without default delegates: the reference alone,
    bit-identical to the reference."""
    interp = offload.Interpreter(model_content=chain_model(), **kwargs)
    interp.allocate_tensors()
    assert interp.delegates == [] and interp.plan().partitions == []
    report = interp.delegation_report()["default"]
    assert report["mode"] == "reference" and report["applied"] == ["cpu"]
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    ref = offload.Interpreter(model_content=chain_model(), delegates=[])
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], x)
    ref.invoke()
    np.testing.assert_array_equal(got, ref.get_tensor(ref.get_output_details()[0]["index"]))


def test_the_litert_resolver_enum_is_accepted_by_name(fakes):
    """LiteRT's own OpResolverType works too (matched by name)."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    kind = litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    assert _default(experimental_op_resolver_type=kind)["mode"] == "reference"
    assert _default(experimental_op_resolver_type=litert.OpResolverType.AUTO)["mode"] == "default"


def test_named_delegates_replace_the_default(fakes):
    """Naming a delegate, by either argument, replaces the default: the rest is the CPU's."""
    report = _default(delegates=["fast"])
    assert report["mode"] == "explicit" and report["applied"] == ["fast"]


@pytest.mark.parametrize(
    ("value", "mode", "applied"),
    [
        ("cpu", "reference", ["cpu"]),
        ("none", "reference", ["cpu"]),
        ("auto", "auto", None),
        ("fast, slow", "explicit", ["fast", "slow"]),
        ("default", "default", ["litert"]),
    ],
)
def test_the_environment_sets_the_default(fakes, value, mode, applied):
    """$OFFLOAD_DELEGATES sets what runs when the program names nothing."""
    fakes.setenv("OFFLOAD_DELEGATES", value)
    report = _default()
    assert report["mode"] == mode
    if applied is not None:
        assert report["applied"] == applied
    if value not in ("default",):
        assert report["source"] == "environment"


def test_the_program_wins_over_the_environment(fakes):
    """An explicit argument is not overridden by $OFFLOAD_DELEGATES."""
    fakes.setenv("OFFLOAD_DELEGATES", "slow")
    assert _default(delegates=[])["mode"] == "reference"
    assert _default(delegates=["fast"])["applied"] == ["fast"]


def test_without_litert_the_default_is_the_static_rule(monkeypatch, auto_cache):
    """No litert installed: the static rule decides (and says so)."""
    install(monkeypatch, FAST)
    interp = offload.Interpreter(model_content=chain_model())
    interp.allocate_tensors()
    report = interp.delegation_report()
    assert report["default"]["source"] == "static rule"
    assert "litert is not installed" in report["auto"]["reason"]


def test_the_interpreter_thread_count_reaches_the_default_engine(fakes):
    """num_threads goes to the delegates offload builds itself, where they take it."""
    interp = offload.Interpreter(model_content=chain_model(), num_threads=3)
    assert interp.delegates[0].options.num_threads == 3


def test_num_threads_none_keeps_the_engine_default(fakes):
    """num_threads=None (LiteRT's default) leaves the engine's own default (1)."""
    assert offload.Interpreter(model_content=chain_model()).delegates[0].options.num_threads == 1
