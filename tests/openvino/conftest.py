"""Tests that need OpenVINO (openvino) and the openvino delegate (offload-openvino).

Every test here is marked ``openvino`` and skips, with the reason, when either is missing or
the delegate is unavailable. Compiled models go to a per-session temporary cache, never the
user's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openvino", reason="openvino is not installed (pip install offload-openvino)")
plugin = pytest.importorskip("offload_openvino", reason="offload-openvino is not installed")

_REASON = plugin.OpenVINODelegate.availability()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.openvino)
            if not _REASON.available:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"the openvino delegate is unavailable: {_REASON.reason}"
                    )
                )


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """The default cache location under a temporary XDG_CACHE_HOME, shared by the session."""
    root = tmp_path_factory.getbasetemp() / "xdg-cache"
    root.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(root))
    yield
