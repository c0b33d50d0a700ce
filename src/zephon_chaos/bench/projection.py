"""The model projected past one host: ``torch://`` against ``aggregate_dir`` at 256-16,384 ranks.

Pure evaluation of :mod:`zephon_chaos.bench.round_model` over a grid, with the store's capacity and
CPU per lane measured here, ranks as processes (their CPU side by side), one lane per rank,
and a shared filesystem whose operation costs one network round trip plus its own service
time. Writes a CSV, a markdown table and a plot; the verdicts are values (:class:`Verdict`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from zephon_chaos.bench.round_model import (
    AGGREGATE_TIMEOUT_S,
    Cpu,
    DirParams,
    Estimate,
    Round,
    StoreParams,
    Verdict,
    dir_round,
    judge,
    store_round,
)
from zephon_chaos.extras import PLOTS_INSTEAD, Extra, require

PROJECTION_CSV = "projection.csv"
PROJECTION_MD = "projection.md"
PROJECTION_PNG = "projection.png"
VALIDATION_CSV = "validation.csv"
VALIDATION_MD = "validation.md"
CAPACITY_CSV = "capacity.csv"


@dataclass
class ProjectionConfig:
    worlds: list[int] = field(default_factory=lambda: [2 ** k for k in range(8, 15)])
    one_way_ms: list[float] = field(default_factory=lambda: [0.1, 1.0, 10.0])
    fs_service_ms: float = 0.2
    """A shared filesystem's own time per operation, on top of the network round trip."""
    fs_ops_per_s: float = 50_000.0
    """Its metadata capacity (an assumption to replace with a measured one)."""
    interval_s: float = 600.0
    """Checkpoint interval the round competes with."""
    fraction: float = 0.05
    """Share of that interval a round may take and still be suitable."""


@dataclass(frozen=True)
class ProjectionRow:
    backend: str
    world: int
    one_way_ms: float
    estimate: Estimate
    verdict: Verdict


def project(config: ProjectionConfig, store: StoreParams, cpu: Cpu, lane_bytes: float,
            fixed_bytes: float = 0.0, rank_bytes: float = 0.0) -> list[ProjectionRow]:
    """Every (backend, world, latency) point of the grid, one lane per rank."""
    rows = []
    # Ranks as processes: their CPU side by side, a request's client CPU inside its round trip.
    cpu = replace(cpu, parallel=True)
    for lat in config.one_way_ms:
        s = replace(store, one_way_s=lat / 1000.0, rtt_s_measured=None)
        fs = DirParams(op_s=2 * lat / 1000.0 + config.fs_service_ms / 1000.0,
                       ops_per_s=config.fs_ops_per_s)
        for w in config.worlds:
            r = Round(world=w, lanes=w, lane_bytes=lane_bytes, cpu=cpu, fixed_bytes=fixed_bytes,
                      rank_bytes=rank_bytes)
            for backend, est in (("torch://", store_round(r, s)),
                                 ("aggregate_dir", dir_round(r, fs))):
                rows.append(ProjectionRow(backend, w, lat, est,
                                          judge(est.total_s, config.interval_s, config.fraction)))
    return rows


def limit(rows: list[ProjectionRow], backend: str, one_way_ms: float) -> int | None:
    """The largest world of the grid still suitable (None: not even the smallest)."""
    ok = [r.world for r in rows
          if r.backend == backend and r.one_way_ms == one_way_ms and r.verdict.suitable]
    return max(ok) if ok else None


def write_projection(rows: list[ProjectionRow], config: ProjectionConfig, out: Path,
                     note: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / PROJECTION_CSV, out / PROJECTION_MD]
    phases = ["join", "discover", "merge", "acks", "cleanup"]
    with open(paths[0], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["backend", "world", "one_way_ms", "round_s", *[f"{p}_s" for p in phases],
                    "leader_round_trips", "requests", "bytes", "suitable", "reason"])
        for r in rows:
            e = r.estimate
            w.writerow([r.backend, r.world, r.one_way_ms, _num(e.total_s),
                        *[_num(e.phases.get(p, math.nan)) for p in phases],
                        _num(e.leader_round_trips), _num(e.requests), _num(e.bytes_moved),
                        r.verdict.suitable, r.verdict.reason])
    paths[1].write_text(projection_markdown(rows, config, note))
    return paths


def projection_markdown(rows: list[ProjectionRow], config: ProjectionConfig, note: str) -> str:
    lats = sorted({r.one_way_ms for r in rows})
    worlds = sorted({r.world for r in rows})
    head = "| ranks | " + " | ".join(
        f"torch:// {x:g} ms | dir {x:g} ms" for x in lats) + " |"
    lines = [f"Predicted time per checkpoint ({note}); **bold** = not suitable "
             f"(over {config.fraction:.0%} of a {config.interval_s:.0f} s interval or over "
             f"aggregate_timeout_s {AGGREGATE_TIMEOUT_S:.0f} s).", "", head,
             "| ---: |" + " ---: | ---: |" * len(lats)]
    by = {(r.backend, r.world, r.one_way_ms): r for r in rows}
    for w in worlds:
        cells = []
        for x in lats:
            for backend in ("torch://", "aggregate_dir"):
                r = by.get((backend, w, x))
                cells.append("-" if r is None else _cell(r))
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    lines.append("")
    for x in lats:
        for backend in ("torch://", "aggregate_dir"):
            top = limit(rows, backend, x)
            lines.append(f"- {backend} at {x:g} ms one-way: suitable up to "
                         f"{'none of the grid' if top is None else f'{top} ranks'}")
    return "\n".join(lines) + "\n"


def _cell(r: ProjectionRow) -> str:
    t = r.estimate.total_s
    text = "saturated" if not math.isfinite(t) else _dur(t)
    return text if r.verdict.suitable else f"**{text}**"


def _dur(t: float) -> str:
    return f"{t * 1000:.0f} ms" if t < 1 else f"{t:.1f} s" if t < 100 else f"{t:.0f} s"


def _num(x: float) -> object:
    return "" if not math.isfinite(x) else round(x, 6)


def plot_projection(rows: list[ProjectionRow], config: ProjectionConfig, out: Path,
                    note: str) -> Path:
    require(Extra.MATPLOTLIB, "bench plots", PLOTS_INSTEAD)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    lats = sorted({r.one_way_ms for r in rows})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, lat in enumerate(lats):
        for backend, style in (("torch://", "o-"), ("aggregate_dir", "s--")):
            pts = sorted((r.world, r.estimate.total_s) for r in rows
                         if r.backend == backend and r.one_way_ms == lat
                         and math.isfinite(r.estimate.total_s))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style,
                        color=colors[i % len(colors)], label=f"{backend} {lat:g} ms one-way")
    ax.axhline(AGGREGATE_TIMEOUT_S, color="red", linestyle=":",
               label=f"aggregate_timeout_s ({AGGREGATE_TIMEOUT_S:.0f} s)")
    ax.axhline(config.fraction * config.interval_s, color="gray", linestyle=":",
               label=f"{config.fraction:.0%} of a {config.interval_s:.0f} s interval")
    ax.set(xscale="log", yscale="log", xlabel="ranks (one lane each)",
           ylabel="predicted time per checkpoint, s",
           title="Checkpoint aggregation past one host (model)")
    ax.set_xticks(sorted({r.world for r in rows}))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.text(0.5, 0.005, note, ha="center", fontsize=6.5, color="dimgray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = out / PROJECTION_PNG
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
