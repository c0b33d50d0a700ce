"""A cell some tier can reach that none reached is reported with why: out of the aims' reach,
never aimed at, or aimed at in so many rounds without a launch landing in it; and the
rounds that aimed at it survive a summary's round trip and add up when runs merge."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from zephon_chaos.dimensions.cells import Dim, cell
from zephon_chaos.explore.aiming import aim_at, targets
from zephon_chaos.explore.merge import markdown, merge, read_reports
from zephon_chaos.explore.space import declare
from zephon_chaos.explore.steer import RoundSteering
from zephon_chaos.explore.summary import Coverage
from zephon_chaos.explore.summary_json import (
    CellFacts,
    CoverageFacts,
    SummaryFacts,
    write_facts,
)
from zephon_chaos.explore.unreached import Unreached, explain

EXIT_AT_SHARD = cell(Dim.RANK_FAULT_POINT, "exit", "shard", "store", "none")
"""A rank fault only processes take: torchrun alone reaches it."""
FIVE_LAUNCHES = cell(Dim.LAUNCHES, 5)
"""No aim targets a launch count."""


class Options:
    max_world, max_phases, store_faults, profile, aim, left_to = 4, 5, True, "default", True, None


def test_each_hole_says_why_it_stayed_one() -> None:
    assert aim_at(FIVE_LAUNCHES) is None and aim_at(EXIT_AT_SHARD) is not None
    assert explain(FIVE_LAUNCHES, ("inproc",), 0).why is Unreached.PLAIN_ONLY
    assert explain(EXIT_AT_SHARD, ("torchrun",), 0).why is Unreached.NEVER_AIMED
    missed = explain(EXIT_AT_SHARD, ("torchrun",), 3)
    assert missed.why is Unreached.MISSED
    assert "3 aimed round(s)" in missed.reason()


def test_a_rounds_aims_are_counted_as_offered_to_their_cells() -> None:
    cov = Coverage()
    steering = RoundSteering(cov, "torchrun", Options(), round_no=1)
    first = steering.aims()
    assert first
    offered = cov.offered["torchrun"]
    aimed = targets(cov.spaces["torchrun"], cov.combined())
    assert set(offered) == {c for c, _ in aimed}
    assert all(n == 1 for n in offered.values())
    steering.aims()
    assert all(n == 2 for n in offered.values())


def test_the_all_tiers_table_names_who_could_reach_a_hole_and_why_none_did(
    tmp_path: Path,
) -> None:
    cov = Coverage()
    for tier in ("inproc", "torchrun"):
        cov.declare(declare(tier, store_faults=True))
        cov.counts[tier] = Counter()
    cov.offer("torchrun", [EXIT_AT_SHARD])
    cov.offer("torchrun", [EXIT_AT_SHARD])
    holes, reachable = cov.holes()
    by_cell = {h.cell: h for h in holes}
    assert reachable >= len(holes) > 0
    assert by_cell[EXIT_AT_SHARD].tiers == ("torchrun",)
    assert by_cell[EXIT_AT_SHARD].why is Unreached.MISSED
    assert by_cell[EXIT_AT_SHARD].rounds == 2
    assert by_cell[FIVE_LAUNCHES].why is Unreached.PLAIN_ONLY
    text = "\n".join(cov.holes_section(4))
    assert (
        f"| {Dim.RANK_FAULT_POINT.value} | {EXIT_AT_SHARD.label()} | torchrun | "
        f"{by_cell[EXIT_AT_SHARD].reason()} |"
    ) in text


def _run(folder: Path, seed: int, offered: int) -> Path:
    """A run's report folder whose torchrun tier aimed ``offered`` rounds at one hole."""
    tiers = {
        "inproc": [CellFacts("LAUNCHES", ["1"], 4)],
        "torchrun": [
            CellFacts("LAUNCHES", ["1"], 2),
            CellFacts(EXIT_AT_SHARD.dim.name, list(EXIT_AT_SHARD.value), 0, offered=offered),
        ],
    }
    write_facts(
        SummaryFacts(
            budget_s=60,
            elapsed_s=59.0,
            interrupted=False,
            tier="both",
            seed=seed,
            plant=None,
            coverage={t: CoverageFacts(4, 5, True, True, cells) for t, cells in tiers.items()},
        ),
        folder,
    )
    return folder


def test_merged_runs_add_up_the_rounds_that_aimed_at_a_hole(tmp_path: Path) -> None:
    runs = [_run(tmp_path / f"seed{s}", s, offered) for s, offered in ((1, 2), (2, 3))]
    merged = merge(read_reports(runs))
    (hole,) = [
        c for c in merged.summary.coverage["torchrun"].cells if c.dim == EXIT_AT_SHARD.dim.name
    ]
    assert hole.offered == 5
    text = "\n".join(markdown(merged, tmp_path / "merged"))
    assert "### All tiers:" in text
    assert explain(EXIT_AT_SHARD, ("torchrun",), 5).reason() in text
