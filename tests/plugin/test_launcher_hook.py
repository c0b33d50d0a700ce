"""The launcher of a test's scenarios comes from a hook (``newhooks``) a downstream may
answer first; without an answer, ``--chaos-launch`` picks the lane."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_a_conftest_supplies_the_launcher_resume_check_uses(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
def cluster_launcher(spec):
    raise RuntimeError("a scheduler would launch it")

def pytest_zephon_chaos_make_launcher(request, groups):
    return cluster_launcher
"""
    )
    pytester.makepyfile(
        """
def test_it(resume_check):
    assert resume_check.runner.launcher.__name__ == "cluster_launcher"
"""
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_without_an_answer_the_lane_option_decides(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
def pytest_zephon_chaos_make_launcher(request, groups):
    return None
"""
    )
    pytester.makepyfile(
        """
def test_it(resume_check, torchrun_group):
    assert resume_check.runner.launcher == torchrun_group.run_spec
"""
    )
    pytester.runpytest_subprocess("--chaos-launch", "cli").assert_outcomes(passed=1)


def test_recipe_run_launches_through_the_same_hook(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
def cluster_launcher(spec):
    raise RuntimeError(f"a scheduler would launch {spec.entry.name} on {spec.nproc} ranks "
                       f"as {spec.name} with records in {spec.env['ZEPHON_CHAOS_RECORDS_DIR']}")

def pytest_zephon_chaos_make_launcher(request, groups):
    return cluster_launcher
"""
    )
    pytester.makepyfile(train="raise SystemExit('never launched here')\n")
    pytester.makepyfile(
        """
import pytest
from pathlib import Path

def test_it(recipe_run):
    train = Path(__file__).with_name("train.py")
    with pytest.raises(RuntimeError, match="launch train.py on 2 ranks as recipe-reference "
                       "with records in .*reference"):
        recipe_run(train, world_sizes=[2, 1])
"""
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
