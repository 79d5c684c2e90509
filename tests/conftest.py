"""Suite-wide fixtures.

Decisions that ``delegates="auto"`` (and the default) remember go to a directory of this test
session, never to the user's ``~/.cache/offload/auto``: a decision a benchmark stored there
would otherwise change which delegates a test's default interpreter runs. Every delegate's
cache (``offload.cache.default_location``: OpenVINO's compiled models, Core ML's packages,
LiteRT's op table, the roofline's peak) goes to this session's directory too: the suite wrote
1.2 GB of OpenVINO blobs into the user's home before, and a warm home cache made a run on a
developer's machine faster than the same run on a fresh CI machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def _session_auto_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    patch = pytest.MonkeyPatch()
    patch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(tmp_path_factory.mktemp("auto-cache")))
    patch.setenv("OFFLOAD_CACHE_DIR", str(tmp_path_factory.mktemp("delegate-caches")))
    yield
    patch.undo()


@pytest.fixture
def auto_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A decision cache of this test's own."""
    path = tmp_path / "auto-cache"
    monkeypatch.setenv("OFFLOAD_AUTO_CACHE_DIR", str(path))
    return path


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # make test runs two workers, each taking whole files in this order (pytest-xdist's
    # loadfile, not reordered): a file of minutes started last runs on one core while the
    # other has finished. Its order among the rest is kept.
    items.sort(key=lambda item: item.get_closest_marker("starts_run") is None)
