"""An integer delegate written from the public API alone (tests/_int8_twin.py, on
offload.quant's rules) is exact on the int8 and QAT fixtures and passes the kit under
``--strict --exact``; every wrong rounding fails ``--exact``; delegate packages add cases
through an entry point; the report prints from a public function."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import io
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import quant
from offload.errors import PluginError
from offload.testing import (
    CASES,
    delegate_cases,
    format_report,
    print_report,
    run_conformance,
)
from offload.testing.__main__ import main

from ._int8_twin import Int8TwinDelegate

_TWIN = str(Path(__file__).with_name("_int8_twin.py"))
_FIXTURES = sorted(
    p
    for p in (Path(__file__).parent / "fixtures").glob("*.tflite")
    if p.stem.endswith(("_int8", "_qat"))
)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    # Single-op cases are "fragmented" plans by design; the warning says nothing here.
    warnings.simplefilter("ignore", offload.errors.PartitionCostWarning)


@pytest.mark.parametrize("path", _FIXTURES, ids=lambda p: p.stem)
def test_the_twin_is_exact_on_the_int8_and_qat_fixtures(path: Path) -> None:
    """Every output of every int8 and QAT fixture equals the CPU reference's bit for bit."""
    rng = np.random.default_rng(7)
    runs = []
    for delegates in ([], [Int8TwinDelegate()]):
        interp = offload.Interpreter(model_path=str(path), delegates=delegates)
        interp.allocate_tensors()
        runs.append(interp)
    for detail in runs[0].get_input_details():
        dtype, shape = detail["dtype"], detail["shape"]
        if np.issubdtype(dtype, np.integer):
            value = rng.integers(-128, 128, shape).astype(dtype)
        else:
            value = rng.standard_normal(shape).astype(dtype)
        for interp in runs:
            interp.set_tensor(detail["index"], value)
    for interp in runs:
        interp.invoke()
    ref, twin = runs
    # Every fixture but the float-only QAT LSTM gives the twin some nodes.
    assert twin.plan().nodes_of("int8_twin") or path.stem == "lstm_qat"
    for want, got in zip(ref.get_output_details(), twin.get_output_details()):
        np.testing.assert_array_equal(twin.get_tensor(got["index"]), ref.get_tensor(want["index"]))


def test_the_twin_passes_strict_exact_with_no_exclusions(capsys: pytest.CaptureFixture) -> None:
    """``python -m offload.testing tests/_int8_twin.py --strict --exact`` exits 0, and every
    declared op passes at least one case."""
    assert main([_TWIN, "--strict", "--exact"]) == 0
    out = capsys.readouterr().out
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MAX_POOL_2D"):
        assert any(line.split()[:2] == [op, "ok"] for line in out.splitlines()), op


def _add_reference_rounding(a, b, params, clamp):  # noqa: ANN001, ANN202
    return quant.add_reference(a, b, params, clamp, np.int8)


def _add_one_multiplier(a, b, params, clamp):  # noqa: ANN001, ANN202
    """The rule extension-api.md used to show: each input rescaled to the output by
    ``quantize_multiplier(s_in / s_out)``, without the common scale and its 20 bits."""
    p = params
    twice = 2.0 ** (p.input1_shift - 31) * p.input1_multiplier  # s1 / (2 max)
    real_out = 2.0 ** (p.output_shift - 31) * p.output_multiplier * (1 << p.left_shift)
    m1, s1 = quant.quantize_multiplier(twice * real_out)
    m2, s2 = quant.quantize_multiplier(
        2.0 ** (p.input2_shift - 31) * p.input2_multiplier * real_out
    )
    xa = quant.multiply_by_quantized_multiplier(a.astype(np.int64) - p.input1_zero_point, m1, s1)
    xb = quant.multiply_by_quantized_multiplier(b.astype(np.int64) - p.input2_zero_point, m2, s2)
    return np.clip(xa + xb + p.output_zero_point, *clamp).astype(np.int8)


_WRONG: dict[str, tuple[str, Callable[..., np.ndarray], str]] = {
    "conv_reference_rounding": ("conv_rule", quant.requantize, "CONV_2D"),
    "fully_connected_reference_rounding": (
        "fully_connected_rule",
        quant.requantize,
        "FULLY_CONNECTED",
    ),
    "depthwise_reference_rounding": ("depthwise_rule", quant.requantize, "DEPTHWISE_CONV_2D"),
    "depthwise_half_up_everywhere": (
        "depthwise_rule",
        quant.requantize_conv,
        "DEPTHWISE_CONV_2D",
    ),
    "add_reference_rounding": ("add_rule", _add_reference_rounding, "ADD"),
    "add_one_multiplier_per_input": ("add_rule", _add_one_multiplier, "ADD"),
}


@pytest.mark.parametrize("wrong", list(_WRONG))
def test_exact_fails_each_wrong_rounding(wrong: str) -> None:
    """The twin with one wrong rule swapped in fails ``--exact`` on that op."""
    attribute, rule, op = _WRONG[wrong]
    twin = type("WrongTwin", (Int8TwinDelegate,), {attribute: staticmethod(rule)})()
    cases = [c for c in CASES if c.op == op and c.dtype == "int8"]
    results = run_conformance(twin, cases=cases, exact=True).results
    assert any(r.status == "fail" for r in results), [(r.case, r.status) for r in results]


def test_exact_is_bit_for_bit_only_for_integer_outputs() -> None:
    """Under ``exact`` an int8 output one step off fails; float cases keep their tolerance."""

    def off_by_one(*args: object) -> np.ndarray:
        out = quant.requantize_conv(*args)  # type: ignore[arg-type]
        return np.where(out < 127, out + 1, out).astype(np.int8)

    twin = type("OffByOne", (Int8TwinDelegate,), {"conv_rule": staticmethod(off_by_one)})()
    case = [c for c in CASES if c.name == "conv_int8_per_channel"]
    assert run_conformance(twin, cases=case).results[0].status == "pass"  # one step allowed
    (result,) = run_conformance(twin, cases=case, exact=True).results
    assert result.status == "fail" and "exact" in result.detail


class _EntryPoint:
    def __init__(self, name: str, value: object) -> None:
        self.name, self.value, self._value = name, "pkg.kit:CASES", value

    def load(self) -> object:
        if isinstance(self._value, Exception):
            raise self._value
        return self._value


def _fake_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: _EntryPoint) -> None:
    real = importlib.metadata.entry_points

    def entry_points(**kw: object):  # noqa: ANN202
        if kw.get("group") == "offload.conformance_cases":
            return list(eps)
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_a_package_adds_cases_for_its_delegate_through_an_entry_point(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Cases registered under the delegate's name run with the kit's own; others do not."""
    (pool,) = (c for c in CASES if c.name == "max_pool_int8_same_batch2")
    mine = dataclasses.replace(pool, name="twin_own_max_pool")
    other = dataclasses.replace(pool, name="someone_elses")
    _fake_entry_points(
        monkeypatch, _EntryPoint("int8_twin", lambda: [mine]), _EntryPoint("other", [other])
    )
    assert delegate_cases("int8_twin") == (mine,)
    assert main([_TWIN, "--exact", "--case", "twin_own_max_pool"]) == 0
    assert "pass         twin_own_max_pool" in capsys.readouterr().out


def test_a_broken_case_entry_point_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A package whose cases fail to load, or are not OpCases, is a PluginError naming it."""
    _fake_entry_points(monkeypatch, _EntryPoint("int8_twin", ImportError("no module kit")))
    with pytest.raises(PluginError, match="pkg.kit:CASES.*no module kit"):
        delegate_cases("int8_twin")
    _fake_entry_points(monkeypatch, _EntryPoint("int8_twin", ["not a case"]))
    with pytest.raises(PluginError, match="expected only OpCase items, found str"):
        delegate_cases("int8_twin")


def test_the_report_prints_from_a_public_function() -> None:
    """format_report gives the CLI's text; print_report writes it to a file."""
    cases = [c for c in CASES if c.name == "max_pool_int8_same_batch2"]
    report = run_conformance(Int8TwinDelegate(), cases=cases, exact=True)
    text = format_report(report, strict=False)
    assert "pass         max_pool_int8_same_batch2" in text
    assert "declared but unchecked: CONV_2D" in text
    buffer = io.StringIO()
    print_report(report, strict=False, file=buffer)
    assert buffer.getvalue() == text + "\n"
