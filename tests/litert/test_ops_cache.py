"""The litert delegate's table of LiteRT's op versions, kept in offload's cache: read back
only when it is the table the probe gives, probed again otherwise, never an error."""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("offload_litert", reason="offload-litert is not installed")

from offload.cache import CacheWarning  # noqa: E402
from offload_litert import _ops  # noqa: E402

# builtin_versions as a fresh process runs it (the module caches its answer per process).
fresh = _ops.builtin_versions.__wrapped__


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLOAD_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_stored_table_is_the_probe_s(cache_root):
    """The first process stores what LiteRT answers; the next reads the same table."""
    probed = _ops.probe_versions()
    assert fresh() == probed
    assert list((cache_root / "litert").glob("*.json"))
    assert fresh() == probed


def test_a_sealed_but_wrong_table_is_probed_again(cache_root):
    """An entry that passes the cache's checks but is not a table of op versions (an op the
    schema lacks, a version out of range) is discarded, and the probe answers."""
    store = _ops._open_store()
    assert store is not None
    for bad in ({"NOT_AN_OP": 1}, {"ADD": 0}, {"ADD": "5"}, [], {"ADD": 10_000}):
        store.store(_ops._CACHE_KEY, _ops._CACHE_KIND, json.dumps(bad).encode())
        with pytest.warns(CacheWarning, match="not a table of op versions"):
            assert fresh() == _ops.probe_versions()


def test_a_cache_that_cannot_be_used_is_no_error(cache_root):
    """A cache location that is a file: the probe answers, and nothing is raised."""
    (cache_root / "litert").write_text("not a directory")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh() == _ops.probe_versions()
