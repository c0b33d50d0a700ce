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
