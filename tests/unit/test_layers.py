"""The import contracts (pyproject.toml, docs/architecture.md) catch an import against the stack."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over ``tree`` (a copy of the package and its pyproject.toml)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    pytest.importorskip("importlinter")
    shutil.copytree(
        ROOT / "src" / "zephon_chaos",
        tmp_path / "src" / "zephon_chaos",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_an_import_up_the_stack_breaks_the_contracts(tree: Path) -> None:
    clean = _lint(tree)
    assert clean.returncode == 0, clean.stdout + clean.stderr  # the copy keeps them
    errors = tree / "src" / "zephon_chaos" / "errors.py"
    errors.write_text(errors.read_text() + "\nimport zephon_chaos.cli  # up the stack\n")
    broken = _lint(tree)
    assert broken.returncode != 0
    assert "zephon_chaos.errors -> zephon_chaos.cli" in broken.stdout, broken.stdout


def _packages(module: str, depth: int) -> str:
    return ".".join(module.split(".")[:depth])


def _cycle(edges: dict[str, set[str]]) -> list[str]:
    """A cycle of ``edges`` (its nodes, the first again at the end); empty: none."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return []


@pytest.mark.parametrize("depth", [2, 3])
def test_no_package_imports_one_that_imports_it_back(depth: int) -> None:
    """Every package sits in one layer (no ``exhaustive_ignores``), so no chain of imports
    leads from a package back to itself, counting imports inside functions (type-only ones
    never run). ``depth`` 3 looks inside the packages too (``faults.proxy``)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph(
        "zephon_chaos", include_external_packages=False, exclude_type_checking_imports=True
    )
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _packages(module, depth), _packages(imported, depth)
            if a != b and not b.startswith(a + ".") and not a.startswith(b + "."):
                edges.setdefault(a, set()).add(b)
    assert _cycle(edges) == []


def test_a_cycle_between_packages_is_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) == []
