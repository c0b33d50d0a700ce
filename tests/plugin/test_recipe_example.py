"""The example recipe's tests need nothing but the installed plugin: no private import.

They are copied into a fresh directory (no conftest, no configuration of this repository)
and run there, as a recipe's own repository would run them.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "recipe"
PUBLIC_MODULES = {"zephon_chaos.recipe", "zephon_chaos.contract"}
"""What a recipe may import: the script's contract and the config contract kit."""


def zephon_chaos_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] == "zephon_chaos"}


def is_public(name: str) -> bool:
    """A public module, or a name imported from one."""
    return name in PUBLIC_MODULES or name.rpartition(".")[0] in PUBLIC_MODULES


def test_example_sources_import_only_public_modules() -> None:
    sources = sorted(EXAMPLE.rglob("*.py"))
    assert EXAMPLE / "train.py" in sources
    used: dict[str, set[str]] = {}
    for path in sources:
        names = zephon_chaos_imports(path)
        if names:
            used[str(path.relative_to(EXAMPLE))] = names
    for where, names in used.items():
        private = sorted(n for n in names if not is_public(n))
        assert not private, f"{where} imports private zephon_chaos names: {private}"
    assert not any(where.startswith("tests/") for where in used), (
        f"the example's tests import zephon_chaos: {used}; they should use fixtures only"
    )
    assert used.get("train.py") == {"zephon_chaos.recipe", "zephon_chaos.recipe.RecipeRun"}


def downstream_copy(pytester: pytest.Pytester) -> Path:
    """The recipe, its config and its tests, alone in a directory of their own."""
    root = pytester.path / "recipe"
    root.mkdir()
    for name in ("train.py", "config.py"):
        shutil.copy(EXAMPLE / name, root / name)
    shutil.copytree(EXAMPLE / "tests", root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_example_tests_resolve_through_the_entry_point(pytester: pytest.Pytester) -> None:
    root = downstream_copy(pytester)
    result = pytester.runpytest_subprocess(
        str(root / "tests"), "--strict-markers", "--setup-plan", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*SETUP    F recipe_run*", "*test_a_killed_rank_resumes*"])
    result.stdout.no_fnmatch_line("*ERROR*")


@pytest.mark.cpu
@pytest.mark.chaos
@pytest.mark.slow
def test_example_tests_pass_outside_this_repository(pytester: pytest.Pytester) -> None:
    root = downstream_copy(pytester)
    result = pytester.runpytest_subprocess(
        str(root / "tests"), "--strict-markers", "-m", "not slow", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, deselected=3)
