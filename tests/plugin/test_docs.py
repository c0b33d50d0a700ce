"""The docs' snippets are tested: recipe files run in a fresh project, workflows match their files.

A fenced block with ``title="path"`` is a file: in ``docs/recipes.md`` the recipe and its test
(written into a pytester directory and run there), in ``docs/ci.md`` the workflows (compared
with the repository's files). Every other ``python`` block must at least compile.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def blocks(doc: str) -> list[tuple[str, str | None, str]]:
    """(language, title or None, text) of each fenced block of ``docs/<doc>``."""
    text = (REPO / "docs" / doc).read_text()
    return [(m.group(1), m.group(2), m.group(3)) for m in FENCE.finditer(text)]


def write_recipe_files(pytester: pytest.Pytester) -> list[str]:
    titled = [(title, text) for lang, title, text in blocks("recipes.md") if title]
    for title, text in titled:
        path = pytester.path / title
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return [title for title, _ in titled]


def test_every_python_block_compiles() -> None:
    python = [(title, text) for doc in ("recipes.md", "ci.md")
              for lang, title, text in blocks(doc) if lang == "python"]
    assert len(python) >= 2
    for title, text in python:
        compile(text, title or "<docs block>", "exec")


def test_recipe_doc_files_resolve_their_fixtures(pytester: pytest.Pytester) -> None:
    files = write_recipe_files(pytester)
    assert files == ["my_recipe.py", "tests/test_my_recipe.py"]
    result = pytester.runpytest_subprocess(
        "tests", "--strict-markers", "--setup-plan", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*SETUP    F recipe_run*"])
    result.stdout.no_fnmatch_line("*ERROR*")


@pytest.mark.cpu
@pytest.mark.chaos
@pytest.mark.slow
def test_recipe_doc_files_pass_as_written(pytester: pytest.Pytester) -> None:
    write_recipe_files(pytester)
    result = pytester.runpytest_subprocess("tests", "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    "workflow",
    [
        ".github/workflows/cpu.yml",
        ".github/workflows/gpu.yml",
        ".github/workflows/nightly-explore.yml",
        ".github/workflows/nightly-deep.yml",
        ".github/workflows/release.yml",
    ],
)
def test_ci_doc_shows_each_workflow_as_it_is(workflow: str) -> None:
    shown = {title: text for lang, title, text in blocks("ci.md") if lang == "yaml"}
    assert workflow in shown, f"docs/ci.md does not show {workflow}"
    assert shown[workflow] == (REPO / workflow).read_text(), (
        f"docs/ci.md shows another {workflow} than the file: copy the file into the doc"
    )


def test_the_gpu_workflow_names_its_runner_and_passes_device_settings() -> None:
    text = (REPO / ".github/workflows/gpu.yml").read_text()
    assert "runs-on: [self-hosted, linux, gpu]" in text
    assert "tox -e gpu" in text
    tox = (REPO / "tox.ini").read_text()
    gpu_env = tox[tox.index("[testenv:gpu]"):]
    gpu_env = gpu_env[: gpu_env.index("\n[", 1)] if "\n[" in gpu_env[1:] else gpu_env
    for name in ("CUDA_VISIBLE_DEVICES", "NCCL_*"):
        assert f"\n    {name}\n" in gpu_env, f"the gpu env does not pass {name} through"
    assert "sitepackages = true" in gpu_env and "\ndeps =\n" in gpu_env
