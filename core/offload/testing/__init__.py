"""The conformance kit for delegate authors.

The same single-op cases that offload's CPU reference passes, runnable against any delegate::

    python -m offload.testing dummy            # one line per case: pass / fail / not-claimed

or from pytest, in a delegate's own test suite::

    from offload.testing import conformance_test
    test_conformance = conformance_test("my_delegate", exclusions={"case": "why"})

Cases a delegate does not claim (by its capabilities) are reported as not claimed, not failed.
Declared exclusions are reported with their reason.
"""

from offload.testing._cases import CASES, OpCase, build_case
from offload.testing._pytest_plugin import conformance_test
from offload.testing._runner import CaseResult, run_case, run_conformance

__all__ = [
    "CASES",
    "CaseResult",
    "OpCase",
    "build_case",
    "conformance_test",
    "run_case",
    "run_conformance",
]
