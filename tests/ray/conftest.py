"""Tests that need Ray Data (``pip install 'offload[ray]'``; ``make test`` installs it).

Every test here is marked ``ray`` and skips, saying so, where Ray is not installed. One local
Ray (``ray.init(num_cpus=2)``) serves the whole session: starting one takes seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'offload[ray]')")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A local Ray of two CPUs for the session, shut down at its end."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()
