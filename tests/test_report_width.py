"""Text reports fit 100 columns: long reasons and lists wrap under their indent, tables stay
tables (a too-wide one moves its first column to a legend)."""

from __future__ import annotations

from pathlib import Path

import pytest

import offload
from offload._cli import main
from offload._formatting import TEXT_WIDTH, fit_table
from offload._report_text import render_auto

FIXTURE = Path(__file__).parent / "fixtures" / "small_cnn_float32.tflite"
AUTO = ["check", str(FIXTURE), "--delegate", "auto", "--auto_budget_s", "0.2"]


def _too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > TEXT_WIDTH]


def test_check_auto_fits_100_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """`offload check --delegate auto` on a fixture model: no line over 100 characters, with
    nothing stored, and with a decision stored by a program that used other options."""
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(tmp_path / "empty"))
    assert main(AUTO) == 0
    out = capsys.readouterr().out
    assert "Auto choice:" in out and "decision cache: miss" in out
    assert _too_wide(out) == []
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(tmp_path / "other"))
    other = offload.Interpreter(
        model_path=str(FIXTURE),
        delegates="auto",
        auto_precision_loss_allowed=True,
        auto_budget_s=0.2,
    )
    other.allocate_tensors()
    assert main(AUTO) == 0
    out = capsys.readouterr().out
    assert "decision cache: changed" in out
    assert "options.accuracy.precision_loss_allowed: true -> false" in out
    assert _too_wide(out) == []


def test_check_fallback_reasons_fit_100_columns(capsys: pytest.CaptureFixture[str]):
    """A delegate that leaves most nodes on the CPU: its reasons wrap, each under its op."""
    pytest.importorskip("offload_dummy")
    assert main(["check", str(FIXTURE), "--delegate", "dummy"]) == 0
    out = capsys.readouterr().out
    assert "Left on the CPU" in out
    assert _too_wide(out) == []


def test_auto_report_wraps_long_reasons_and_labels():
    """Long reasons, a long plan label and many changed settings: every line fits, and the
    label is still printed whole (in the table's legend)."""
    label = "gpu_opencl(precision_loss_allowed=True)+litert(accelerator=gpu, kernels=builtin)"
    reason = "a reason given at length, " * 12
    candidate = {
        "label": label,
        "partitions": 3,
        "delegated_nodes": 120,
        "cpu_nodes": 4,
        "static_cost": 40.5,
        "prepare_ms": 12.5,
        "median_ms": 1.25,
        "min_ms": 1.0,
        "max_ms": 2.0,
        "runs": 15,
        "error": {"relative": 1e-6, "steps": 1, "top1_changes": 2},
        "status": "inaccurate",
        "reason": reason,
    }
    differences = [
        {"key": f"devices.opencl_icds.vendor{i}.icd", "stored": "x" * 40, "now": "absent"}
        for i in range(15)
    ]
    auto = {
        "chosen": ["litert"],
        "mode": "measured",
        "reason": reason,
        "cache": {
            "status": "changed",
            "changed": ["devices"],
            "differences": differences,
            "detail": "; ".join(f"{d['key']}: {d['stored']} -> {d['now']}" for d in differences),
            "path": "/a/cache/directory/of/some/length/offload/auto",
        },
        "budget_s": 2.0,
        "choosing_s": 0.5,
        "gate": {"inputs": [f"uniform(-{i},{i})" for i in range(1, 20)]},
        "candidates": [candidate, {**candidate, "label": "cpu", "status": "measured"}],
        "skipped": [{"delegate": "coreml", "reason": reason}],
    }
    out = render_auto(auto)
    assert _too_wide(out) == []
    assert f"[1] {label}" in out
    assert "and 3 more (--json lists them all)" in out


def test_a_table_too_wide_keeps_its_rows_and_names_them_in_a_legend():
    """fit_table: a table that fits is format_table's; one that does not keys its rows."""
    narrow = fit_table(["plan", "ms"], [["cpu", 1.5]], "  ")
    assert narrow.splitlines()[2].split() == ["cpu", "1.5"]
    wide = fit_table(["plan", "ms"], [["x" * 120, 1.5], ["cpu", 2.5]], "  ")
    lines = wide.splitlines()
    assert lines[2].split() == ["[1]", "1.5"] and lines[3].split() == ["[2]", "2.5"]
    assert lines[4:] == ["  [1]", "      " + "x" * 120, "  [2] cpu"]  # a word is never split
