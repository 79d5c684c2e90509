"""Which way imports point: the library never imports the command line, and no plugin's
modules import each other in a cycle."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = sorted(p for p in (ROOT / "plugins").glob("*/offload_*") if (p / "__init__.py").is_file())


def test_import_offload_imports_no_command_line_module():
    """``import offload`` loads no ``offload.tools`` module: the command line sits on the
    library, never under it."""
    code = "import json, sys, offload; print(json.dumps(sorted(sys.modules)))"
    # A clean interpreter: this process has long since imported the command line for others.
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert "offload._interpreter" in loaded  # the probe saw the package load
    assert [m for m in loaded if m == "offload.tools" or m.startswith("offload.tools.")] == []


# Library modules that still import the command line, at call time only, each with why. The
# entry point (offload._cli) is the command line itself; SweepReport.write_html's partition
# maps are offload check's pages, drawn by the command line's graph module.
CALL_TIME_COMMAND_IMPORTS = {
    "offload._cli": None,  # any: it is the command line's entry point
    "offload._sweep_report": {"offload.tools._common", "offload.tools._graph_draw"},
}


def test_library_imports_the_command_line_only_where_listed():
    """No module outside ``offload.tools`` imports it, even inside a function, except those
    listed in CALL_TIME_COMMAND_IMPORTS; and those never at load time (the test above)."""
    graph = import_graph(ROOT / "core" / "offload")
    upward = {
        module: {e for e in edges if e == "offload.tools" or e.startswith("offload.tools.")}
        for module, edges in graph.items()
        if not module.startswith("offload.tools")
    }
    unlisted = {
        module: sorted(found - (CALL_TIME_COMMAND_IMPORTS.get(module) or set()))
        for module, found in upward.items()
        if found and CALL_TIME_COMMAND_IMPORTS.get(module, set()) is not None
    }
    assert {m: f for m, f in unlisted.items() if f} == {}


def _module_name(path: Path, package: Path) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``tree`` imports where it can execute the import: at
    module level or in a function body alike (an import deferred into a function still runs,
    and a cycle it closes is one load order away from failing), but not under
    ``if TYPE_CHECKING:``.

    Only explicit imports count: importing ``pkg.a`` also runs ``pkg/__init__.py``, but that
    implicit edge would make every package that re-exports its modules cyclic.
    """
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:  # relative: resolved against this module's package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                # ``from pkg import name``: the submodule pkg.name where there is one, else
                # pkg, the module the name is read from.
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else source)
        pending.extend(ast.iter_child_nodes(node))
    return (found & modules) - {module}


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports at run time."""
    files = {
        _module_name(path, package): path
        for path in sorted(package.rglob("*.py"))
        if "build" not in path.relative_to(package).parts
    }
    return {
        module: _run_time_imports(
            ast.parse(path.read_text(encoding="utf-8"), str(path)),
            module,
            path.name == "__init__.py",
            set(files),
        )
        for module, path in files.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan's algorithm), each
    sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("package", PLUGINS, ids=lambda p: p.name)
def test_plugin_modules_import_each_other_without_cycles(package: Path):
    """No module of a plugin package imports, at run time, one that leads back to it."""
    graph = import_graph(package)
    assert package.name in graph
    assert cycles(graph) == []


def test_cycle_check_sees_deferred_imports_and_skips_type_checking(tmp_path: Path):
    """A cycle closed by an import inside a function counts; one closed only under
    ``if TYPE_CHECKING:`` does not; relative imports and ``from pkg import module`` are
    followed."""
    pkg = tmp_path / "offload_fake"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from offload_fake._delegate import Delegate\n")
    (pkg / "_delegate.py").write_text(
        "from offload_fake import _engine\n\nclass Delegate:\n    pass\n"
    )
    (pkg / "_engine.py").write_text("def load():\n    from ._kernel import run\n")
    (pkg / "_kernel.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from offload_fake._delegate import Delegate\n"
    )
    assert cycles(import_graph(pkg)) == []
    (pkg / "_kernel.py").write_text(
        "def run():\n    from offload_fake._delegate import Delegate\n    return Delegate\n"
    )
    graph = import_graph(pkg)
    assert graph["offload_fake._engine"] == {"offload_fake._kernel"}
    assert cycles(graph) == [
        ["offload_fake._delegate", "offload_fake._engine", "offload_fake._kernel"]
    ]


# Modules that are tables, not logic, may be longer: a reader looks a row up, never reads
# them through.
DECLARATIVE_TABLES = {
    "core/offload/testing/_cases.py": "the conformance kit's op case tables",
}
# A module a reader can hold in mind: beyond this, it is doing several jobs that want modules
# of their own (issue 38 set ~600 lines; the margin keeps a small fix from failing the suite).
MAX_MODULE_LINES = 620


def test_no_module_is_over_the_size_a_reader_can_hold():
    """Every Python module of the core and the plugins, tables apart, is under
    MAX_MODULE_LINES lines: a module that outgrows it is split by what its parts do."""
    sources = [
        *(ROOT / "core" / "offload").rglob("*.py"),
        *(ROOT / "plugins").glob("*/offload_*/**/*.py"),
    ]
    too_long = {
        rel: lines
        for path in sources
        if (rel := path.relative_to(ROOT).as_posix()) not in DECLARATIVE_TABLES
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}
