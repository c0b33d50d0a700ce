"""The CI workflows parse, and what their steps run exists: scripts, tox envs, extras, and
``zephon-chaos`` command lines the real parser accepts (one per matrix row)."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zephon_chaos.cli import COMMANDS, build_parser
from zephon_chaos.commands.explore import TIERS as EXPLORE_TIERS
from zephon_chaos.explore.shard import Shard
from zephon_chaos.strategies import PROFILES

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
REPO_PATH = re.compile(r"(?<![\w/.-])((?:\.ci|scripts|constraints)/[\w./-]+)")


def load(path: Path) -> dict[Any, Any]:
    yaml = pytest.importorskip("yaml", reason="PyYAML (the dev extra) reads the workflows")
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path.name}: not a mapping"
    return doc


def rows(job: dict[str, Any]) -> list[dict[str, str]]:
    """Each matrix row's values (``include`` rows, or the product of one-list axes)."""
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    if "include" in matrix:
        return [{k: str(v) for k, v in row.items()} for row in matrix["include"]]
    made: list[dict[str, str]] = [{}]
    for axis, values in matrix.items():
        made = [{**row, axis: str(v)} for row in made for v in values]
    return made


def scripts(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, str], str]]:
    """(job, the step's env with the job's and the workflow's, its ``run`` text once per
    matrix row, with ``matrix.*`` filled in and other expressions set to 1)."""
    for name, job in doc["jobs"].items():
        for row in rows(job):

            def fill(text: str, row: dict[str, str] = row) -> str:
                return EXPRESSION.sub(
                    lambda m: row.get(m.group(1).removeprefix("matrix."), "1"), text
                )

            for step in job["steps"]:
                if "run" in step:
                    env = {**doc.get("env", {}), **job.get("env", {}), **step.get("env", {})}
                    filled = {k: fill(str(v)) for k, v in env.items()}
                    yield name, filled, fill(step["run"])


OPERATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", "$("})


def commands(text: str) -> Iterator[list[str]]:
    """The simple commands of a shell text, as shlex reads its words: lines joined at a
    trailing backslash, cut at pipes, lists and subshells (comments dropped)."""
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for token in lexer:
            if token in OPERATORS:
                if words:
                    yield words
                words = []
            else:
                words.append(token)
        if words:
            yield words


def tox_envs() -> set[str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    return {s.removeprefix("testenv:") for s in tox.sections() if s.startswith("testenv:")}


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRAS = set(PROJECT["optional-dependencies"])


@pytest.fixture(params=WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def workflow(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_there_are_workflows() -> None:
    names = {p.name for p in WORKFLOWS}
    assert {"cpu.yml", "gpu.yml", "nightly-explore.yml", "nightly-deep.yml", "release.yml"} <= names


def test_a_workflow_parses_and_every_step_uses_or_runs_something(workflow: Path) -> None:
    doc = load(workflow)
    assert {"name", "jobs"} <= set(doc) and (True in doc or "on" in doc), workflow.name
    for name, job in doc["jobs"].items():
        assert job.get("runs-on") and job.get("timeout-minutes"), f"{workflow.name}: {name}"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), f"{workflow.name}: {name}: {step}"


def test_what_a_step_runs_exists(workflow: Path) -> None:
    for job, env, text in scripts(load(workflow)):
        where = f"{workflow.name}: {job}"
        for path in REPO_PATH.findall(text):
            assert (REPO / path).exists(), f"{where}: {path} does not exist"
        for words in commands(text):
            if REPO_PATH.fullmatch(words[0]):
                assert os.access(REPO / words[0], os.X_OK), f"{where}: {words[0]} not executable"
            if "tox" in words and "-e" in words:
                tox_env = words[words.index("-e") + 1]
                assert tox_env in tox_envs(), f"{where}: tox has no env {tox_env}"
            for extra in re.findall(r"\.\[([\w,-]+)\]", " ".join(words)):
                assert set(extra.split(",")) <= EXTRAS, f"{where}: no extra {extra}"
        if "CI_TOX_ENV" in env:
            assert env["CI_TOX_ENV"] in tox_envs(), f"{where}: CI_TOX_ENV {env['CI_TOX_ENV']}"


def test_every_zephon_chaos_command_line_parses(workflow: Path) -> None:
    parser = build_parser()
    for job, _env, text in scripts(load(workflow)):
        for words in commands(text):
            if words[0] != "zephon-chaos":
                continue
            assert words[1] in COMMANDS, f"{workflow.name}: {job}: {words}"
            try:
                args = parser.parse_args(words[1:])
            except SystemExit:  # argparse said why on stderr
                pytest.fail(f"{workflow.name}: {job}: zephon-chaos refuses {shlex.join(words)}")
            if args.command == "explore":  # what explore checks only once it runs
                assert args.tier in EXPLORE_TIERS, f"{workflow.name}: {job}: {args.tier}"
                assert args.profile in PROFILES, f"{workflow.name}: {job}: {args.profile}"
                if args.shard is not None:
                    Shard.parse(args.shard)


def test_the_script_the_gpu_runs_share_fails_exactly_when_every_gpu_test_skipped(
    tmp_path: Path,
) -> None:
    script = REPO / "scripts" / "gpu-all-skipped.sh"
    logs = {
        "skipped": "GPU tests skipped: torch 2.13.0+cpu is a CPU-only build (no CUDA) (8 tests)",
        "ran": "GPU tests: 6 ran, 2 skipped\n  skipped: needs 2 CUDA devices, 1 visible (2 tests)",
    }
    for name, text in logs.items():
        (tmp_path / f"{name}.log").write_text(f"===== summary =====\n{text}\n")

    def status(*names: str) -> tuple[int, str]:
        done = subprocess.run(
            [str(script), *(str(tmp_path / n) for n in names)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return done.returncode, done.stdout + done.stderr

    assert status("ran.log")[0] == 0
    code, out = status("ran.log", "skipped.log")
    assert code == 1 and "CPU-only build" in out and "nothing was checked on a GPU" in out
    assert status("missing.log")[0] == 2
