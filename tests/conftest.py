"""Suite-wide fixtures.

Decisions that ``delegates="auto"`` (and the default) remember go to a directory of this test
session, never to the user's ``~/.cache/offload/auto``: a decision a benchmark stored there
would otherwise change which delegates a test's default interpreter runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def _session_auto_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    patch = pytest.MonkeyPatch()
    patch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(tmp_path_factory.mktemp("auto-cache")))
    yield
    patch.undo()


@pytest.fixture
def auto_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A decision cache of this test's own."""
    path = tmp_path / "auto-cache"
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(path))
    return path
