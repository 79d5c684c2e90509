"""pytest integration of the conformance kit (registered through the ``pytest11`` entry point).

``pytest --offload-delegate NAME`` sets the delegate for :func:`conformance_test` tests that
do not name one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from offload.testing._cases import CASES, OpCase

_OPTION = "--offload-delegate"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        _OPTION, default=None, help="offload delegate to run conformance_test() cases against"
    )


def conformance_test(
    delegate: str | None = None,
    options: Mapping[str, Any] | None = None,
    exclusions: Mapping[str, str] | None = None,
) -> Callable[..., None]:
    """A parametrized pytest test running every conformance case on ``delegate``."""

    @pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
    def test(case: OpCase, request: pytest.FixtureRequest) -> None:
        from offload._plugins import load_delegate
        from offload.testing._runner import run_case

        name = delegate or request.config.getoption(_OPTION)
        if not name:
            pytest.skip(f"no delegate named: pass {_OPTION} NAME")
        result = run_case(case, load_delegate(name, options), exclusions)
        if result.status in ("not-claimed", "excluded"):
            pytest.skip(f"{result.status}: {result.detail}")
        assert result.status == "pass", f"{case.name} ({case.op} {case.dtype}): {result.detail}"

    return test
