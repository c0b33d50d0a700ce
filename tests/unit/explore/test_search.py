"""The search's rounds: what a round catches of what Hypothesis raises, and what it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.explore.test_shards import _judged_explorer
from zephon_chaos.explore.shard import Shard
from zephon_chaos.explore.steer import RoundSteering
from zephon_chaos.scenario import Scenario


def test_an_error_of_the_explorers_own_ends_the_run_after_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round takes Hypothesis's report of a failure it holds for granted, and nothing else:
    a bug of the explorer's own raised inside the property is not swallowed as one."""

    def broken(self: RoundSteering, scenario: Scenario) -> None:
        raise LookupError("a bug of the explorer's own")

    monkeypatch.setattr(RoundSteering, "observe", broken)
    explorer, ran = _judged_explorer(tmp_path, Shard(1, 1), "none", 30, stop=False)
    with pytest.raises(LookupError, match="a bug of the explorer's own"):
        explorer.run()
    assert ran.ran, "no scenario ran: the property was never called"
    assert (tmp_path / "report-1" / "summary.md").is_file()
