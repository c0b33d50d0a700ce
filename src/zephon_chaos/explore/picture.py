"""A PNG of what happened in one scenario: per launch, a row per rank on the launch's clock.

Each row shows the rank's batches, its checkpoint attempts coloured by outcome with their
duration against ``aggregate_timeout_s`` (and the liveness bound where the verdict has one),
the faults where they fired, and how the rank ended. A batch violation is marked at the
first divergent step, with the lanes that lost or repeated samples. The model is
:mod:`.happened`; this module only draws it, with matplotlib's object API on the Agg canvas
(no display, no pyplot global state). Artists carry a ``gid`` naming what they show.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zephon_chaos.explore.happened import (
    Attempt,
    BatchViolation,
    ExitKind,
    Fault,
    FaultSource,
    Happened,
    LaunchHappened,
    Outcome,
    RankLane,
    happened,
    interposer_events,
    planned,
)
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import ProxyFault, Scenario, StoreFault
from zephon_chaos.workload.spec import ChildFault, RankFault

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

OUTCOME_COLORS = {
    Outcome.COMPLETED: "#55A868",
    Outcome.FAILED: "#C44E52",
    Outcome.DISCARDED: "#DD8452",
    Outcome.SKIPPED: "#CCB974",
}
EXIT_STYLE: dict[ExitKind, tuple[str, str]] = {
    ExitKind.CLEAN: ("o", "#55A868"),
    ExitKind.ERROR: ("s", "#C44E52"),
    ExitKind.SIGNAL: ("*", "#8172B2"),
    ExitKind.STOPPED: ("s", "#999999"),
    ExitKind.DEADLINE: (">", "#E08214"),
    ExitKind.CUT_SHORT: (">", "#E08214"),
    ExitKind.UNKNOWN: ("d", "#999999"),
}
FAULT, BAD, INK, BATCH = "#D62728", "#B2182B", "#333333", "#4C72B0"
ROW_IN, GAP_IN, LINE_IN, LEGEND_IN, WIDTH_IN = 0.5, 0.62, 0.16, 0.6, 11.0
"""Inches: a rank's row, the room between launches (title, ticks), a footer line, the legend,
the width."""
_CAUSES = 6
"""Distinct failure causes footnoted in full; more are counted."""


def plot_timeline(
    scenario: Scenario,
    path: Path,
    outcome: ScenarioOutcome | None = None,
    title: str | None = None,
) -> Path | None:
    """Draw what ``outcome`` did (what ``scenario`` planned, without one) to ``path``; None if
    matplotlib (the ``explore`` extra) is not installed: the explorer says so once
    (``extras``), not per picture."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    model = planned(scenario) if outcome is None else happened(outcome, interposer_events)
    fig = draw(model, title or scenario.summary(), scenario.summary() if title else "")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path


def draw(model: Happened, title: str, subtitle: str = "") -> Figure:
    """The figure of ``model`` on an Agg canvas, not saved: a header, a panel per launch, a
    footer (problems, the causes of failed attempts) and the legend."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    causes = _causes(model.launches)
    footer = _footer(model, causes)
    panels = [ROW_IN * max(1, len(ln.ranks)) for ln in model.launches]
    lines = [(title, {"weight": "bold", "size": 9})]
    lines += [(text, {"size": 7.5, "color": INK}) for text in textwrap.wrap(subtitle, 190)[:2]]
    if model.batches is not None:
        text = _batch_line(model.batches)
        lines.append((text, {"size": 8.5, "color": BAD, "weight": "bold", "gid": "batches"}))
    head = 0.15 + 0.2 * len(lines)
    foot = LEGEND_IN + LINE_IN * len(footer) + 0.4
    height = head + sum(p + GAP_IN for p in panels) + foot
    fig = Figure(figsize=(WIDTH_IN, height))
    FigureCanvasAgg(fig)
    for k, (text, style) in enumerate(lines):
        fig.text(0.01, 1 - (0.1 + 0.2 * k) / height, text, va="top", **style)
    top = height - head
    for launch, panel in zip(model.launches, panels, strict=True):
        top -= GAP_IN - 0.22
        ax = fig.add_axes((0.12, (top - panel) / height, 0.865, panel / height))
        _launch(ax, launch, model, causes)
        top -= panel + 0.22
    if fig.axes:
        text = "seconds since the launch's first record (each launch on its own axis)"
        fig.axes[-1].set_xlabel(text, size=8)
    for k, text in enumerate(footer):
        color = BAD if text.startswith("problem") else INK
        y = (LEGEND_IN + LINE_IN * (len(footer) - 1 - k)) / height
        fig.text(0.01, y, text, fontsize=7.5, family="monospace", color=color)
    _legend(fig, height)
    return fig


def _launch(ax: Axes, launch: LaunchHappened, model: Happened, causes: dict[str, int]) -> None:
    here = [p for p in model.problems if p.phase == launch.index]
    b = model.batches
    right = _right_edge(launch)
    for y, lane in enumerate(launch.ranks if launch.ran else ()):
        flagged = {p.checkpoint: p.kind for p in here if p.rank in (None, lane.rank)}
        _rank(ax, launch, y, lane, causes, flagged, right)
    ax.set_yticks(range(len(launch.ranks)))
    ax.set_yticklabels([_rank_label(r) for r in launch.ranks], fontsize=7)
    for tick, lane in zip(ax.get_yticklabels(), launch.ranks, strict=True):
        lost = b is not None and lane.kept and b.lanes & set(lane.lanes)
        if lost or any(p.rank == lane.rank for p in here) or lane.rank == launch.first_failure:
            tick.set_color(BAD)
            tick.set_fontweight("bold")
    if launch.refused:
        ax.axvspan(0, right, color="#EEEEEE", hatch="//", zorder=0, gid=f"refused:L{launch.index}")
        text = f"refused (expected): G={launch.world_size} > C={launch.canonical_replicas}"
        ax.text(right * 0.02, (len(launch.ranks) - 1) / 2, text, size=8, color=INK, va="center")
    if b is not None and b.at is not None and b.at[0] == launch.index:
        _divergence(ax, launch, b, right)
    ax.set_xlim(-right * 0.01, right)
    ax.set_ylim(len(launch.ranks) - 0.45, -0.75)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=7)
    color = INK if launch.ok or launch.refused or not launch.ran else BAD
    ax.set_title(_launch_title(launch), fontsize=8, loc="left", color=color)


def _rank_label(lane: RankLane) -> str:
    lanes = list(lane.lanes) if len(lane.lanes) <= 4 else f"{len(lane.lanes)} lanes"
    return f"r{lane.rank} {lanes}" if lane.lanes else f"r{lane.rank}"


def _rank(
    ax: Axes,
    launch: LaunchHappened,
    y: int,
    lane: RankLane,
    causes: dict[str, int],
    flagged: dict[int | None, str],
    right: float,
) -> None:
    where = f"L{launch.index}:r{lane.rank}"
    end = launch.end_s if lane.exit.at_s is None else lane.exit.at_s
    ax.plot([0, end], [y, y], color="#CCCCCC", linewidth=1, zorder=1)
    kept, rest = lane.batches[: lane.kept], lane.batches[lane.kept :]
    ax.vlines(
        kept, y - 0.15, y + 0.15, color=BATCH, linewidth=0.9, zorder=2, gid=f"batches:{where}"
    )
    ax.vlines(rest, y - 0.15, y + 0.15, color="#A0A0A0", linewidth=0.9, zorder=2)
    if lane.restore is not None:
        start, seconds = lane.restore
        ax.barh(y, max(seconds, right * 0.004), left=start, height=0.3, color="#8DA0CB", zorder=2)
    for start, until, toxic in lane.link:
        stop = end if until is None else until
        ax.barh(
            y,
            max(stop - start, right * 0.004),
            left=start,
            height=0.7,
            color="none",
            edgecolor=FAULT,
            hatch="////",
            alpha=0.35,
            linewidth=0,
            zorder=1,
            gid=f"link:{where}:{toxic}",
        )
        if until is None:
            ax.annotate(
                f"link {toxic} from the start",
                (0, y),
                xytext=(2, 5),
                textcoords="offset points",
                size=6.5,
                color=FAULT,
            )
    for index in dict.fromkeys(a.index for a in lane.attempts):
        attempts = [a for a in lane.attempts if a.index == index]
        _checkpoint(ax, where, y, attempts, causes, flagged.get(index), right)
    for fault in lane.faults:
        _fault(ax, where, y, fault)
    _exit(ax, where, y, lane, end, causes)


def _checkpoint(
    ax: Axes,
    where: str,
    y: int,
    attempts: list[Attempt],
    causes: dict[str, int],
    problem: str | None,
    right: float,
) -> None:
    """One checkpoint's calls on one rank: a bar each (outlined where an oracle flagged the
    checkpoint: ``problem`` is the kind it found, or the liveness verdict the call), a failed
    or slow one with its bounds, and one label for them all when any failed, was slow or was
    flagged."""
    for a in attempts:
        marked = a.over_liveness or problem is not None
        ax.barh(
            y,
            max(a.seconds, right * 0.006),
            left=a.start_s,
            height=0.36,
            color=OUTCOME_COLORS[a.outcome],
            edgecolor=BAD if marked else "black",
            linewidth=1.8 if marked else 0.4,
            zorder=3,
            gid=f"attempt:{where}:c{a.index}.{a.attempt}:{a.outcome.name.lower()}",
        )
        if a.outcome is not Outcome.COMPLETED or _slow(a):
            gid = f"bound:{where}:c{a.index}.{a.attempt}"
            _bound(ax, y + 0.27, a.start_s, a.bound_s, "--", f"T={a.bound_s:g}s", gid)
        if _past_t(a):
            assert a.liveness_bound_s is not None
            text, gid = (
                f"liveness {a.liveness_bound_s:g}s",
                f"liveness:{where}:c{a.index}.{a.attempt}",
            )
            _bound(ax, y + 0.38, a.start_s, a.liveness_bound_s, ":", text, gid)
    told = [a for a in attempts if a.outcome is not Outcome.COMPLETED or _slow(a)]
    if not told and problem is None:
        return
    parts, said = [], None
    for a in attempts:
        kind = a.cause_type or "failed"
        cause = f"[{causes[a.cause]}] " if a.cause in causes else ""
        what = {
            Outcome.COMPLETED: "completed ",
            Outcome.FAILED: ("" if kind == said else f"{kind} ") + cause,
            Outcome.DISCARDED: "discarded (failed elsewhere) ",
            Outcome.SKIPPED: f"skipped {cause}",
        }[a.outcome]
        said = kind if a.outcome is Outcome.FAILED else said
        try_ = f"try {a.attempt}: " if a.attempt > 1 else ""
        over = " > liveness bound" if a.over_liveness else ""
        parts.append(f"{try_}{what}{a.seconds:.2f}s{over}")
    text = f"ckpt {attempts[0].index}: " + ", ".join(parts)
    text += f" ({problem})" if problem is not None and not told else ""
    ax.annotate(
        text,
        (attempts[0].start_s, y),
        xytext=(0, 7),
        textcoords="offset points",
        size=6.5,
        color=BAD if told or problem is not None else INK,
        zorder=5,
    )


def _slow(a: Attempt) -> bool:
    return a.over_liveness or a.seconds >= 0.5 * a.bound_s


def _past_t(a: Attempt) -> bool:
    """Draw the liveness bound: the verdict found the call over it, or it ran well past T."""
    return a.liveness_bound_s is not None and (a.over_liveness or a.seconds > 1.1 * a.bound_s)


def _bound(
    ax: Axes, y: float, start: float, length: float, style: str, text: str, gid: str
) -> None:
    end = start + length
    ax.plot([start, end], [y, y], linestyle=style, color=INK, linewidth=0.8, zorder=4, gid=gid)
    ax.plot([end], [y], marker="|", markersize=6, color=INK, zorder=4)
    ax.annotate(text, (end, y), xytext=(2, 0), textcoords="offset points", size=6, va="center")


def _fault(ax: Axes, where: str, y: int, f: Fault) -> None:
    gid = f"fault:{where}:{f.source.value}:{f.action}"
    if f.until_s is not None:
        ax.barh(y, f.until_s - f.at_s, left=f.at_s, height=0.6, color=FAULT, alpha=0.18, zorder=1)
    ax.plot(
        f.at_s,
        y,
        marker="X",
        markersize=9,
        color=FAULT,
        markeredgecolor="white",
        markeredgewidth=0.5,
        zorder=6,
        gid=gid,
    )
    ax.annotate(
        _fault_text(f),
        (f.at_s, y),
        xytext=(4, 15),
        textcoords="offset points",
        size=6.5,
        color=FAULT,
        zorder=6,
    )


def _fault_text(f: Fault) -> str:
    if f.source is FaultSource.LAG:
        return f"lag (waits for r{f.peer})"
    what = f"kill {f.action}" if f.source is FaultSource.CHILDREN else f.action
    if f.point is not None:
        return f"{what} @ {f.point[0]}#{f.point[1]}"
    return what + (f" @ step {f.step}" if f.step is not None else "")


def _exit(ax: Axes, where: str, y: int, lane: RankLane, at: float, causes: dict[str, int]) -> None:
    e = lane.exit
    marker, color = EXIT_STYLE[e.kind]
    ax.plot(
        at,
        y,
        marker=marker,
        markersize=12 if e.kind is ExitKind.SIGNAL else 6,
        color=color,
        markeredgecolor="black",
        markeredgewidth=0.4,
        zorder=7,
        gid=f"exit:{where}:{e.kind.name.lower()}",
    )
    what = {
        ExitKind.CLEAN: "",
        ExitKind.ERROR: (e.error_type or "error")
        + (f" [{causes[e.error]}]" if e.error in causes else ""),
        ExitKind.SIGNAL: f"{e.signal}" + (" (scheduled)" if e.scheduled else ""),
        ExitKind.STOPPED: "stopped",
        ExitKind.DEADLINE: "hung: deadline",
        ExitKind.CUT_SHORT: "hung: cut short",
        ExitKind.UNKNOWN: "exit unknown",
    }[e.kind]
    n = len(lane.batches)
    count = f"{n} batch{'es' * (n != 1)}" + (f" ({lane.kept} kept)" if lane.kept != n else "")
    text = ", ".join(t for t in (what, count) if t)
    loud = e.kind in (ExitKind.ERROR, ExitKind.SIGNAL, ExitKind.DEADLINE, ExitKind.CUT_SHORT)
    ax.annotate(
        text,
        (at, y),
        xytext=(6, 0),
        textcoords="offset points",
        size=7,
        va="center",
        color=color if loud else "#666666",
        weight="bold" if loud else "normal",
        zorder=7,
    )


def _divergence(ax: Axes, launch: LaunchHappened, b: BatchViolation, right: float) -> None:
    assert b.at is not None
    _, rank, at = b.at
    y = next(n for n, lane in enumerate(launch.ranks) if lane.rank == rank)
    ax.plot(
        at,
        y,
        marker="o",
        markersize=14,
        markerfacecolor="none",
        markeredgecolor=BAD,
        markeredgewidth=2,
        zorder=8,
        gid=f"divergence:L{launch.index}:r{rank}",
    )
    text = f"first divergent step {b.step} (lane {b.lane})"
    late = at > 0.6 * right  # the label goes left of a mark near the axis' end
    ax.annotate(
        text,
        (at, y),
        xytext=(-9 if late else 9, 6),
        ha="right" if late else "left",
        textcoords="offset points",
        size=7.5,
        color=BAD,
        weight="bold",
        zorder=8,
    )


def _right_edge(launch: LaunchHappened) -> float:
    """The axis' end: the launch's end and every drawn bound, with about two inches to their
    right for the labels there (an exit's, a bound's)."""
    ends = [launch.end_s]
    for lane in launch.ranks:
        for a in lane.attempts:
            ends.append(a.start_s + max(a.seconds, a.bound_s if _slow(a) else 0.0))
            if a.outcome is not Outcome.COMPLETED:
                ends.append(a.start_s + a.bound_s)
            if _past_t(a):
                ends.append(a.start_s + (a.liveness_bound_s or 0.0))
    return max(max(ends) * 1.28, 0.05)


def _launch_title(launch: LaunchHappened) -> str:
    parts = [f"L{launch.index}  G={launch.world_size} C={launch.canonical_replicas}"]
    if launch.restored is not None:
        parts.append(f"restores L{launch.restored[0]} ckpt {launch.restored[1]}")
    if launch.retry != "none":
        parts.append(f"retry {launch.retry}")
    if not launch.ran:
        parts.append("not run")
    elif launch.refused:
        parts.append("refused")
    elif launch.cut_short is not None:
        parts.append(launch.cut_short.describe())
    elif launch.timed_out:
        parts.append("passed its deadline")
    else:
        parts.append("completed" if launch.ok else "failed")
    if launch.first_failure is not None and not launch.refused:
        parts.append(f"first failure r{launch.first_failure}")
    if launch.world_size > len(launch.ranks):
        parts.append(f"({launch.world_size - len(launch.ranks)} more ranks not drawn)")
    if launch.unfired:
        parts.append("never fired: " + ", ".join(_planned_text(f) for f in launch.unfired))
    return "   ".join(parts)


def _planned_text(fault: object) -> str:
    """A planned fault that left no record of firing, in a few words."""
    if isinstance(fault, RankFault):
        at = f"step {fault.at_step}" if not fault.at_round else fault.at
        return f"r{fault.rank} {fault.action} @ {at}"
    if isinstance(fault, ChildFault):
        return f"r{fault.rank} kill {fault.target} @ step {fault.at_step}"
    if isinstance(fault, ProxyFault):
        healed = f" until {fault.until}" if fault.heals else ""
        return f"r{fault.rank} {fault.toxic} @ {fault.at}{healed}"
    if isinstance(fault, StoreFault):
        return f"store {fault.action} @ {fault.at}"
    return type(fault).__name__


def _causes(launches: tuple[LaunchHappened, ...]) -> dict[str, int]:
    """Each distinct error a failed or skipped call, or a rank's exit, recorded, numbered in
    order of appearance: the footer says them in full."""
    out: dict[str, int] = {}
    for lane in (lane for launch in launches for lane in launch.ranks):
        told = [a.cause for a in lane.attempts if a.outcome in (Outcome.FAILED, Outcome.SKIPPED)]
        for cause in (*told, lane.exit.error if lane.exit.kind is ExitKind.ERROR else None):
            if cause and cause not in out:
                out[cause] = len(out) + 1
    return out


def _batch_line(b: BatchViolation) -> str:
    line = f"batches: {b.kind} ({b.contract})"
    if b.step is not None:
        line += f": first divergent global step {b.step}, lane {b.lane}"
    for name, counts in (("lost", b.lost), ("repeated", b.repeated)):
        if counts:
            line += f"; {name}: " + ", ".join(f"lane {k}: {n}" for k, n in sorted(counts.items()))
    return line


def _footer(model: Happened, causes: dict[str, int]) -> list[str]:
    lines = []
    for p in model.problems[:8]:
        at = (("L", p.phase), ("ckpt ", p.checkpoint), ("r", p.rank))
        lines.append(
            f"problem {p.area.value}.{p.kind}"
            + "".join(f" {label}{v}" for label, v in at if v is not None)
        )
    if len(model.problems) > 8:
        lines.append(f"... {len(model.problems) - 8} more problems")
    lines += [f"harness problem: {gap.value}" for gap in model.harness]
    for cause, n in list(causes.items())[:_CAUSES]:
        lines.append(f"[{n}] " + (cause if len(cause) <= 140 else cause[:139] + "…"))
    if len(causes) > _CAUSES:
        lines.append(f"... {len(causes) - _CAUSES} more causes")
    return lines


def _legend(fig: Figure, height: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    def mark(marker: str, color: str, label: str, **style: Any) -> Line2D:
        return Line2D([], [], marker=marker, color=color, linestyle="", label=label, **style)

    handles: list[Any] = [Patch(color=OUTCOME_COLORS[o], label=f"ckpt {o.value}") for o in Outcome]
    handles += [
        Line2D([], [], linestyle="--", color=INK, label="aggregate_timeout_s (T)"),
        Line2D([], [], linestyle=":", color=INK, label="liveness bound"),
        mark("|", BATCH, "batch (grey: not kept)"),
        mark("X", FAULT, "fault fired"),
    ]
    exits = (ExitKind.CLEAN, ExitKind.ERROR, ExitKind.SIGNAL, ExitKind.STOPPED, ExitKind.DEADLINE)
    handles += [
        mark(*EXIT_STYLE[k], f"exit: {k.value}", markeredgecolor="black", markeredgewidth=0.4)
        for k in exits
    ]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncol=5,
        fontsize=6.5,
        frameon=False,
        bbox_to_anchor=(0.5, 0.02 / height),
    )
