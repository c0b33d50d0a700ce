"""A failing group test shows the group's report: statuses in words, the failing rank's log."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

RANK_SCRIPT = """\
import os
import sys

if os.environ["RANK"] == "1":
    print("rank 1 gives up on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
"""

GROUP_TEST = """\
from pathlib import Path

import pytest


@pytest.mark.cpu
def test_group_that_fails(torchrun_group):
    script = Path(__file__).with_name("rank.py")
    result = torchrun_group(script, nproc=2, deadline_s=90)
    assert result.ok, "the group failed"
"""


@pytest.mark.cpu
def test_a_failing_group_test_reports_the_group(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rank=RANK_SCRIPT, test_group=GROUP_TEST)
    artifacts = pytester.path / "artifacts"
    result = pytester.runpytest_subprocess(
        "--strict-markers", "-p", "no:cacheprovider", "--chaos-artifacts", str(artifacts)
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: the group failed*",
            "*- zephon-chaos group g0 -*",
            "group 'g0': failed (agents: exited 1)",
            # Rank 0 exits 0, or is stopped by its agent if rank 1 fails first: not the point.
            "  rank 0 (pid *): *",
            "  rank 1 (pid *): exited 3",
            "*rank 1 gives up on purpose*",
            "*- zephon-chaos artifacts -*",
        ]
    )
    reports = list(Path(artifacts).glob("*/report.txt"))
    assert len(reports) == 1 and "rank 1 (pid" in reports[0].read_text()
