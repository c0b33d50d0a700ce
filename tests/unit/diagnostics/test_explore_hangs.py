"""A launch of ``explore``, ``run`` or ``replay`` that passes its deadline keeps its stacks:
they are a hang's only evidence once the working files are gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephon_chaos.explore.tiers import close_runner, make_runner
from zephon_chaos.launch import LaunchSpec

pytestmark = pytest.mark.cpu


@pytest.mark.parametrize("launch", ["cli", "warm"])
def test_a_timed_out_launch_of_the_explorer_carries_its_ranks_stacks(
    chaos_tmp_root: Path, hang_script: Path, tmp_path: Path, launch: str
) -> None:
    runner = make_runner("torchrun", chaos_tmp_root / launch, launch=launch)
    try:
        spec = LaunchSpec(
            entry=hang_script,
            env={"HANG_HOW": "busy_loop", "HANG_READY_DIR": str(tmp_path)},
            deadline_s=10,
            name=f"explore-hang-{launch}",
        )
        result = runner.launcher(spec)
    finally:
        close_runner(runner)
    assert result.timed_out
    pids = {o.rank: o.pid for o in result.ranks}
    assert {f"rank 0 (pid {pids[0]})", f"rank 1 (pid {pids[1]})"} <= set(result.stacks)
    assert "passed its deadline; stacks captured" in result.summary()
