"""pytest integration of the conformance kit (registered through the ``pytest11`` entry point).

``pytest --offload-delegate NAME`` sets the delegate for :func:`conformance_test` tests that
do not name one. This module is the only part of the kit that needs pytest
(``pip install "offload[testing]"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from offload.testing._cases import CASES, OpCase

_OPTION = "--offload-delegate"
_DECLARATION = "declaration"
# (delegate name, options as JSON) -> (delegate, {case name: result}); one session's runs.
_RUNS: dict[tuple[str, str], tuple[Any, dict[str, Any]]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        _OPTION, default=None, help="offload delegate to run conformance_test() cases against"
    )


def conformance_test(
    delegate: str | None = None,
    options: Mapping[str, Any] | None = None,
    exclusions: Mapping[str, str] | None = None,
    *,
    strict: bool = True,
    cases: Iterable[OpCase] = CASES,
    exact: bool = False,
) -> Callable[..., None]:
    """A parametrized pytest test: one item per case, and one named ``declaration``.

    A case fails when the delegate takes it and gets it wrong (or raises); a refused or
    undeclared case is skipped with its reason. The ``declaration`` item fails, when
    ``strict``, for every declared op that no case exercises or that every case refused.
    ``exclusions`` maps case names or op names to the reason they are left out. ``exact``
    holds integer and bool outputs to the reference bit for bit.
    """
    cases = tuple(cases)
    exclusions = dict(exclusions or {})

    def run(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any]]:
        from offload._plugins import load_delegate

        name = delegate or request.config.getoption(_OPTION)
        if not name:
            pytest.skip(f"no delegate named: pass {_OPTION} NAME")
        key = (name, json.dumps(dict(options or {}), sort_keys=True, default=str))
        if key not in _RUNS:
            _RUNS[key] = (load_delegate(name, options), {})
        return _RUNS[key]

    def result(case: OpCase, loaded: Any, done: dict[str, Any]) -> Any:
        from offload.testing._runner import run_case

        if case.name not in done:
            done[case.name] = run_case(case, loaded, exclusions, exact=exact)
        return done[case.name]

    @pytest.mark.parametrize("case", [*cases, None], ids=[*(c.name for c in cases), _DECLARATION])
    def test(case: OpCase | None, request: pytest.FixtureRequest) -> None:
        from offload.testing._runner import summarize

        loaded, done = run(request)
        if case is None:
            report = summarize(loaded, [result(c, loaded, done) for c in cases], exclusions)
            problems = [f"{o.op}: {o.verdict}: {o.detail}" for o in report.ops if o.fails(strict)]
            assert not problems, f"{loaded.name}'s declaration is not borne out:\n" + "\n".join(
                problems
            )
            return
        r = result(case, loaded, done)
        if r.status in ("refused", "not-claimed", "excluded"):
            pytest.skip(f"{r.status}: {r.detail}")
        assert r.status == "pass", f"{case.name} ({case.op} {case.dtype}): {r.status}: {r.detail}"

    return test
