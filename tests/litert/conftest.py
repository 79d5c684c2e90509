"""Tests that need LiteRT (ai-edge-litert) and the litert delegate (offload-litert).

Every test here is marked ``litert`` and skips, with the reason, when either is missing or
the delegate is unavailable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")
plugin = pytest.importorskip("offload_litert", reason="offload-litert is not installed")

_REASON = plugin.LiteRTDelegate.availability().reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.litert)
            if _REASON:
                item.add_marker(
                    pytest.mark.skip(reason=f"the litert delegate is unavailable: {_REASON}")
                )
