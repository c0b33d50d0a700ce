"""The timeline picture: what each case draws, read from the figure's artists, and its PNG."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.image import imread
from matplotlib.text import Text

from tests.unit.explore import synthetic
from zephon_chaos.explore.happened import happened
from zephon_chaos.explore.picture import BAD, draw, plot_timeline
from zephon_chaos.runner import ScenarioOutcome

CASES: dict[str, tuple[Callable[[Path], ScenarioOutcome], set[str], set[str]]] = {
    "failed-checkpoint": (
        synthetic.failed_checkpoint,
        {
            "attempt:L0:r0:c0.1:completed",
            "attempt:L0:r0:c1.1:failed",
            "bound:L0:r0:c1.1",
            "liveness:L0:r1:c1.1",
            "exit:L0:r0:error",
        },
        {
            "ckpt 1: RuntimeError [1] 5.20s",
            "ckpt 1: RuntimeError [1] 20.00s > liveness bound",
            "T=5s",
            "RuntimeError [2], 0 batches",
            "liveness 18s",
            f"[1] {synthetic.TIMED_OUT}",
            "[2] RuntimeError: checkpoint 1 failed",
            "problem liveness.unbounded-wait L0 ckpt 1 r1",
        },
    ),
    "sigkill": (
        synthetic.sigkill,
        {"exit:L0:r1:signal", "exit:L0:r0:stopped", "fault:L0:r1:rank:sigkill"},
        {"SIGKILL (scheduled), 0 batches", "sigkill @ step 2", "stopped, 1 batch"},
    ),
    "hung": (synthetic.hung, {"exit:L0:r0:deadline"}, {"hung: deadline, 1 batch"}),
    "retried": (
        synthetic.retried,
        {"attempt:L0:r0:c0.1:discarded", "attempt:L0:r0:c0.2:completed"},
        {
            "ckpt 0: discarded (failed elsewhere) 0.50s, try 2: completed 0.50s",
            "ckpt 0: skipped [1] 0.50s",
        },
    ),
    "batch-violation": (
        synthetic.batch_violation,
        {"divergence:L1:r0", "batches"},
        {
            "first divergent step 2 (lane 0)",
            "batches: missing (identical global batches): first divergent global step 2, "
            "lane 0; lost: lane 0: 1; repeated: lane 0: 1",
            "3 batches (2 kept)",
        },
    ),
}


def gids(fig: Figure) -> set[str]:
    return {a.get_gid() for a in fig.findobj(Artist) if a.get_gid()}


def texts(fig: Figure) -> set[str]:
    return {t.get_text() for t in fig.findobj(Text)}


@pytest.mark.parametrize("case", CASES)
def test_the_picture_shows_what_happened(case: str, tmp_path: Path) -> None:
    build, drawn, said = CASES[case]
    outcome = build(tmp_path)
    fig = draw(happened(outcome), case)
    assert drawn <= gids(fig), sorted(gids(fig))
    assert said <= texts(fig), sorted(texts(fig))
    png = plot_timeline(outcome.scenario, tmp_path / f"{case}.png", outcome, title=case)
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = imread(png).shape
    assert width == 990 and height > 200


def test_the_ranks_the_failure_names_are_marked(tmp_path: Path) -> None:
    fig = draw(happened(synthetic.batch_violation(tmp_path)), "t")
    second = fig.axes[1]
    marked = {t.get_text() for t in second.get_yticklabels() if t.get_color() == BAD}
    assert marked == {"r0 [0]"}
    assert "restores L0 ckpt 0" in second.get_title(loc="left")


def test_a_planned_fault_that_never_fired_is_named_in_its_launch_s_title(tmp_path: Path) -> None:
    fig = draw(happened(synthetic.sigkill(tmp_path)), "t")
    assert "never fired: r0 kill workers @ step 3" in fig.axes[0].get_title(loc="left")


def test_without_an_outcome_the_planned_scenario_is_drawn(tmp_path: Path) -> None:
    scenario = synthetic.sigkill(tmp_path).scenario
    png = plot_timeline(scenario, tmp_path / "planned.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
