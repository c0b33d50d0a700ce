"""A PNG timeline of one scenario: a row per rank of each launch, checkpoints, faults, restores.

The x axis is the global step of the whole run: launch ``i + 1`` starts where the checkpoint
it restores was taken (fractional when mid-window). Drawn with matplotlib's object API on
the Agg canvas, so no display and no pyplot global state are involved.
"""

from __future__ import annotations

from pathlib import Path

from zephon_chaos.lanes import lanes_of
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario

_COLORS = ("#4C72B0", "#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD")
_DISPLAY_STEPS = 8
"""A phase that runs until its data is dry is drawn this long when no records say more."""


def _per_step(scenario: Scenario, i: int, rank: int) -> int:
    ph = scenario.phases[i]
    c = scenario.canonical_replicas(i)
    if ph.world_size > c:
        return 1
    return max(1, len(lanes_of(rank, ph.world_size, c, scenario.pipeline.mapping)))


def _drawn_steps(scenario: Scenario, i: int, outcome: ScenarioOutcome | None) -> float:
    ph = scenario.phases[i]
    run = None if outcome is None else next((r for r in outcome.phases if r.index == i), None)
    if run is not None and run.records:
        consumed = [len(rec.batches) / _per_step(scenario, i, rec.rank) for rec in run.records]
        if ph.steps > _DISPLAY_STEPS * 4:
            return max(consumed, default=0.0)
    steps = float(min(ph.steps, _DISPLAY_STEPS))
    if ph.rank_faults:
        steps = min(steps, float(min(f.at_step for f in ph.rank_faults)))
    return steps


def _position(scenario: Scenario, i: int, index: int) -> float:
    """Global-step offset, within phase ``i``, of its checkpoint number ``index``."""
    ph = scenario.phases[i]
    ordered = sorted({(c.step, c.extra) for c in ph.checkpoints})
    step, extra = ordered[index]
    per = max(_per_step(scenario, i, r) for r in range(ph.world_size))
    return step + min(extra, per) / per


def plot_timeline(
    scenario: Scenario,
    path: Path,
    outcome: ScenarioOutcome | None = None,
    title: str | None = None,
) -> Path | None:
    """Draw ``scenario`` to ``path``; None if matplotlib (the ``explore`` extra) is not
    installed: the explorer says so once (``extras``), not per picture."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    rows = sum(min(ph.world_size, 16) for ph in scenario.phases)
    fig = Figure(figsize=(10, 1.2 + 0.32 * rows + 0.2 * len(scenario.phases)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    y = 0.0
    start = 0.0
    ticks: list[float] = []
    labels: list[str] = []
    for i, ph in enumerate(scenario.phases):
        color = _COLORS[i % len(_COLORS)]
        c = scenario.canonical_replicas(i)
        refused = ph.expect_failure or ph.world_size > c
        width = _drawn_steps(scenario, i, outcome)
        for rank in range(min(ph.world_size, 16)):
            lanes = [] if refused else lanes_of(rank, ph.world_size, c, scenario.pipeline.mapping)
            if refused:
                ax.barh(
                    y, 0.6, left=start, height=0.6, color="#DDDDDD", hatch="//", edgecolor="#888888"
                )
            else:
                ax.barh(y, max(width, 0.05), left=start, height=0.6, color=color, alpha=0.75)
                per = max(1, len(lanes))
                for cp in ph.checkpoints:
                    x = start + cp.step + min(cp.extra, per) / per
                    mid = 0 < min(cp.extra, per) < per
                    ax.plot(
                        x,
                        y,
                        marker="D" if mid else "|",
                        markersize=9 if mid else 16,
                        color="black",
                        markerfacecolor="white" if mid else "black",
                    )
                marks = [(f.rank, f.at_step, f.action) for f in ph.rank_faults]
                marks += [(f.rank, f.at_step, f"kill {f.target}") for f in ph.child_faults]
                for fault_rank, at_step, what in marks:
                    if fault_rank == rank:
                        ax.plot(start + at_step, y, marker="X", markersize=12, color="#D62728")
                        ax.annotate(
                            what,
                            (start + at_step, y),
                            xytext=(4, 6),
                            textcoords="offset points",
                            fontsize=7,
                            color="#D62728",
                        )
            ticks.append(y)
            text = f"L{i} r{rank}"
            labels.append(text + (f" {lanes}" if lanes and len(lanes) <= 6 else ""))
            y += 1
        if refused:
            ax.annotate(
                f"refused: G={ph.world_size} > C={c}",
                (start + 0.7, y - 1),
                fontsize=8,
                color="#555555",
                va="center",
            )
        if ph.world_size > 16:
            ax.annotate(f"... {ph.world_size - 16} more ranks", (start, y - 0.5), fontsize=7)
        restore = scenario.restore_index(i)
        if restore is not None and i < len(scenario.phases) - 1:
            start += _position(scenario, i, restore)
            ax.axvline(start, color=color, linestyle="--", linewidth=0.8)
        y += 0.6
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("global step (launch L restores where the dashed line of L-1 is)")
    ax.set_title(title or scenario.summary(), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    legend = [
        ("|", "checkpoint on a window boundary"),
        ("D", "checkpoint mid-window"),
        ("X", "rank fault"),
    ]
    for marker, text in legend:
        ax.plot([], [], marker=marker, linestyle="", color="black", label=text)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
