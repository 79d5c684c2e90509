"""The public API does not change by accident: its surface is a committed snapshot, and every
change to it comes with a CHANGELOG.md entry; each distribution's version is written once, and
each plugin says which offload it supports."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

import offload
from offload._cli import main as cli_main
from offload.tools._version import offload_requirement
from tests._api_surface import SNAPSHOT, surface

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))
# Plugins whose packaging is being written elsewhere right now; each adopts the rules below
# when it lands (the reason is printed with the skip).
PENDING: dict[str, str] = {}


def _differences(expected: Any, found: Any, path: str = "") -> list[str]:
    """Readable differences between two JSON documents, one line per changed leaf."""
    if isinstance(expected, dict) and isinstance(found, dict):
        lines = []
        for key in sorted(set(expected) | set(found)):
            where = f"{path}.{key}" if path else key
            if key not in found:
                lines.append(f"removed: {where}")
            elif key not in expected:
                lines.append(f"added:   {where} = {json.dumps(found[key])[:120]}")
            else:
                lines += _differences(expected[key], found[key], where)
        return lines
    if expected != found:
        return [f"changed: {path}: {json.dumps(expected)[:120]} -> {json.dumps(found)[:120]}"]
    return []


def test_public_surface_matches_the_snapshot():
    """offload's public surface is what tests/public_api.json records: a change is deliberate,
    regenerated with `python -m tests._api_surface --write` and written up in CHANGELOG.md."""
    expected = json.loads(SNAPSHOT.read_text())
    found = json.loads(json.dumps(surface(), sort_keys=True))
    problems = _differences(expected, found)
    assert not problems, (
        "the public API changed; if that is deliberate, run "
        "`.venv/bin/python -m tests._api_surface --write` and add a CHANGELOG.md entry:\n"
        + "\n".join(problems)
    )


def test_snapshot_covers_what_the_issue_names():
    """The snapshot holds offload.__all__, the public modules, the delegate contract's fields
    and the hook specs."""
    data = json.loads(SNAPSHOT.read_text())
    for section in ("offload", "offload.quant", "offload.geometry", "offload.cache"):
        assert data[section], section
    assert "offload.testing" in data and "hookspecs" in data
    assert set(data["offload"]) == set(offload.__all__)
    for cls in ("Delegate", "DelegateKernel"):
        assert data["offload"][cls]["members"], cls
    for cls in ("Capabilities", "OpCapability"):
        assert data["offload"][cls]["fields"], cls
    assert "offload_register_delegates" in data["hookspecs"]


def _commits_touching(path: str) -> list[str]:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--format=%H", "--", path],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.split() if done.returncode == 0 else []


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout"
)
def test_every_snapshot_change_came_with_a_changelog_entry():
    """Each commit that changed tests/public_api.json changed CHANGELOG.md too."""
    lonely = []
    for commit in _commits_touching("tests/public_api.json"):
        files = subprocess.run(
            ["git", "-C", str(ROOT), "show", "--name-only", "--format=", commit],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
        if "CHANGELOG.md" not in files:
            lonely.append(commit[:12])
    assert lonely == [], f"commits changing the API snapshot without CHANGELOG.md: {lonely}"


# -- versions ---------------------------------------------------------------------------------


def _project(directory: Path) -> dict[str, Any]:
    return tomllib.loads((directory / "pyproject.toml").read_text())


def _static_version(directory: Path, attr: str) -> str:
    """The string ``module.NAME = "..."`` assigns, read without importing (as setuptools does)."""
    module, _, name = attr.rpartition(".")
    base = directory / "core" if (directory / "core").is_dir() else directory
    path = base / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            assert isinstance(node.value, ast.Constant), f"{path}: {name} is not a literal"
            return str(node.value.value)
    raise AssertionError(f"{path} assigns no {name}")


def _distributions() -> list[tuple[str, Path]]:
    return [("offload", ROOT)] + [(p.name, p) for p in PLUGINS]


@pytest.mark.parametrize("name,directory", _distributions(), ids=lambda v: str(v).split("/")[-1])
def test_one_version_source(name: str, directory: Path):
    """The version is dynamic in pyproject.toml, read from one literal in the package."""
    if name in PENDING:
        pytest.skip(PENDING[name])
    project = _project(directory)
    assert "version" not in project["project"], "the version is written in pyproject.toml"
    assert "version" in project["project"].get("dynamic", [])
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    version = _static_version(directory, attr)
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)*", version), version


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_plugins_declare_the_offload_range_they_support(plugin: Path):
    """Each plugin requires offload>=X,<Y, and the range holds this offload."""
    if plugin.name in PENDING:
        pytest.skip(PENDING[plugin.name])
    from packaging.requirements import Requirement
    from packaging.version import Version

    requirements = [Requirement(r) for r in _project(plugin)["project"]["dependencies"]]
    (core,) = [r for r in requirements if r.name == "offload"]
    operators = {spec.operator for spec in core.specifier}
    assert operators == {">=", "<"}, f"{plugin.name}: {core} is not a >=X,<Y range"
    assert Version(offload.__version__) in core.specifier


def test_installed_metadata_matches_the_source():
    """The installed offload's metadata has the package's version (reinstall after a bump)."""
    assert importlib.metadata.version("offload") == offload.__version__


def test_version_lists_installed_plugins(capsys: pytest.CaptureFixture[str]):
    """`offload --version` prints offload's version and each plugin's, with its offload range."""
    assert cli_main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"offload {offload.__version__} ")
    for record in offload.list_plugins():
        line = next(line for line in out.splitlines() if line.split()[:1] == [record.name])
        assert record.distribution in line and record.version in line
        wanted = offload_requirement(record.distribution)
        if wanted:
            assert f"offload{wanted}" in line
