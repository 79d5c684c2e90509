"""The conformance kit for delegate authors (see docs/conformance-kit.md).

The same single-op cases that offload's CPU reference passes, runnable against any delegate,
with a verdict on every op the delegate declares::

    python -m offload.testing dummy --strict   # a line per case and per declared op

or from pytest (``pip install "offload[testing]"``), in a delegate's own test suite::

    from offload.testing import conformance_test
    test_conformance = conformance_test("my_delegate", exclusions={"case": "why"})

``--exact`` (``exact=True``) holds integer and bool outputs to the reference bit for bit, for
integer delegates that claim LiteRT's arithmetic. A delegate package adds its own cases
through the ``offload.conformance_cases`` entry-point group (:func:`delegate_cases`).

A case the delegate takes is compared with the CPU reference. A declared op that no case
exercises, or that the delegate refuses on every case, fails under strict (the pytest default):
a declaration the kit cannot check must not pass as a green run.
"""

from __future__ import annotations

from typing import Any

from offload.testing._cases import CASES, KIT_GAPS, OpCase, Runtime, build_case
from offload.testing._extra import CASES_ENTRY_POINT_GROUP, delegate_cases, load_cases
from offload.testing._report import format_report, print_report
from offload.testing._runner import (
    CaseResult,
    ConformanceReport,
    OpReport,
    run_case,
    run_conformance,
    summarize,
)

__all__ = [
    "CASES",
    "CASES_ENTRY_POINT_GROUP",
    "KIT_GAPS",
    "CaseResult",
    "ConformanceReport",
    "OpCase",
    "OpReport",
    "Runtime",
    "build_case",
    "conformance_test",
    "delegate_cases",
    "format_report",
    "load_cases",
    "print_report",
    "run_case",
    "run_conformance",
    "summarize",
]

INSTALL_HINT = 'pip install "offload[testing]"'


def __getattr__(name: str) -> Any:
    # Imported on first use so that the kit's own runner (python -m offload.testing) works
    # without pytest, which only conformance_test needs.
    if name == "conformance_test":
        try:
            from offload.testing._pytest_plugin import conformance_test
        except ModuleNotFoundError as exc:
            if exc.name != "pytest":
                raise
            raise ModuleNotFoundError(
                f"offload.testing.conformance_test needs pytest, which is not installed; "
                f"install it with: {INSTALL_HINT} (python -m offload.testing DELEGATE runs "
                "the same cases without pytest)",
                name="pytest",
            ) from exc
        return conformance_test
    raise AttributeError(f"module 'offload.testing' has no attribute {name!r}")
