"""What ``bench aggregation`` writes: CSV (summary and every sample), a table, PNG plots."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from zephon_chaos.bench.aggregation import CellResult, median, percentile
from zephon_chaos.bench.chunked import ChunkedSample
from zephon_chaos.bench.grid import GridResult
from zephon_chaos.extras import PLOTS_INSTEAD, Extra, require

SUMMARY_CSV = "aggregation.csv"
SAMPLES_CSV = "aggregation_samples.csv"
CHUNKED_CSV = "chunked.csv"
PLOT_PNG = "aggregation.png"
CHUNKED_PNG = "chunked.png"
NOTE = (
    "ranks are threads of one process (one Zephon pipeline each, explicit world_size/"
    "global_rank): this measures the aggregation protocol, not process start-up"
)

SUMMARY_FIELDS = [
    "mode", "world", "latency_ms", "latency_via", "reps", "median_s", "p95_s",
    "round_trips", "writes", "bytes_out", "bytes_in", "wire_bytes", "state_bytes", "error",
]


def summary_rows(cells: list[CellResult]) -> list[dict[str, object]]:
    rows = []
    for r in cells:
        s = r.samples
        wire = [x.wire_bytes for x in s if x.wire_bytes is not None]
        store = r.cell.mode == "store"
        rows.append(
            {
                "mode": "torch://" if store else "aggregate_dir",
                "world": r.cell.world,
                "latency_ms": r.cell.latency_ms,
                "latency_via": r.via,
                "reps": len(s),
                "median_s": _round(median(r.times())),
                "p95_s": _round(percentile(r.times(), 95)),
                "round_trips": _med([x.counts.ops for x in s]) if store else "",
                "writes": _med([x.counts.writes for x in s]) if store else "",
                "bytes_out": _med([x.counts.bytes_out for x in s]) if store else "",
                "bytes_in": _med([x.counts.bytes_in for x in s]) if store else "",
                "wire_bytes": _med(wire) if wire else "",
                "state_bytes": _med([x.state_bytes for x in s]),
                "error": r.error or "",
            }
        )
    return rows


def _med(values: list[int]) -> object:
    return "" if not values else int(median([float(v) for v in values]))


def _round(x: float) -> object:
    return "" if math.isnan(x) else round(x, 5)


def write_csv(result: GridResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / SUMMARY_CSV, out / SAMPLES_CSV, out / CHUNKED_CSV]
    with open(paths[0], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SUMMARY_FIELDS)
        w.writeheader()
        w.writerows(summary_rows(result.cells))
    with open(paths[1], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "world", "latency_ms", "latency_via", "rep", "wall_s", "round_trips",
                    "writes", "bytes_out", "bytes_in", "wire_bytes", "state_bytes"])
        for r in result.cells:
            for s in r.samples:
                c = s.counts
                w.writerow([r.cell.mode, r.cell.world, r.cell.latency_ms, r.via, s.rep,
                            round(s.wall_s, 6), c.ops, c.writes, c.bytes_out, c.bytes_in,
                            "" if s.wire_bytes is None else s.wire_bytes, s.state_bytes])
    with open(paths[2], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "size_bytes", "latency_ms", "latency_via", "rep", "wall_s",
                    "round_trips", "writes", "chunk_writes", "bytes_out", "bytes_in",
                    "wire_bytes"])
        for s in result.chunked:
            c = s.counts
            w.writerow([s.kind, s.size_bytes, s.latency_ms, s.via, s.rep, round(s.wall_s, 6),
                        c.ops, c.writes, c.chunk_writes, c.bytes_out, c.bytes_in,
                        "" if s.wire_bytes is None else s.wire_bytes])
    return paths


def table(result: GridResult) -> str:
    """A short table a person reads in a terminal."""
    lines = [f"{'backend':14s} {'W':>3s} {'+lat':>5s} {'median':>9s} {'p95':>9s} "
             f"{'trips':>6s} {'writes':>6s} {'KiB out':>8s} {'KiB in':>8s}"]
    for row in summary_rows(result.cells):
        if row["error"]:
            lines.append(f"{row['mode']!s:14s} {row['world']!s:>3s} failed: {row['error']}")
            continue
        lines.append(
            f"{row['mode']!s:14s} {row['world']!s:>3} {row['latency_ms']!s:>3}ms "
            f"{_ms(row['median_s'])} {_ms(row['p95_s'])} {row['round_trips']!s:>6} "
            f"{row['writes']!s:>6} {_kib(row['bytes_out'])} {_kib(row['bytes_in'])}"
        )
    for kind in ("kvstore-write", "kvstore-read", "pipeline"):
        group: dict[tuple[int, int], list[ChunkedSample]] = {}
        for s in result.chunked:
            if s.kind == kind:
                group.setdefault((s.size_bytes, s.latency_ms), []).append(s)
        for (size, lat), samples in sorted(group.items()):
            lines.append(
                f"{kind:14s} {size / 2**20:6.1f} MiB +{lat}ms: "
                f"median {_ms(median([x.wall_s for x in samples])).strip()}, "
                f"{samples[0].counts.ops} round trips, "
                f"{samples[0].counts.chunk_writes} chunk writes"
            )
    return "\n".join(lines)


def _ms(x: object) -> str:
    return f"{float(x) * 1000:7.1f}ms" if x != "" else f"{'-':>9s}"  # type: ignore[arg-type]


def _kib(x: object) -> str:
    return f"{int(x) / 1024:8.1f}" if x != "" else f"{'-':>8s}"  # type: ignore[call-overload]


def plot(result: GridResult, out: Path) -> list[Path]:
    """Checkpoint time and round trips against world size; chunked values against size."""
    require(Extra.MATPLOTLIB, "bench plots", PLOTS_INSTEAD)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows = [r for r in summary_rows(result.cells) if not r["error"]]
    fig, (ax_t, ax_n) = plt.subplots(1, 2, figsize=(11, 4.2))
    series: dict[str, list[tuple[int, float, float]]] = {}
    for row in rows:
        name = ("aggregate_dir" if row["mode"] == "aggregate_dir"
                else f"torch:// +{row['latency_ms']} ms one-way")
        series.setdefault(name, []).append(
            (int(row["world"]), float(row["median_s"]), float(row["p95_s"]))  # type: ignore[arg-type]
        )
    for name, points in sorted(series.items(), key=lambda kv: _series_order(kv[0])):
        points.sort()
        xs = [p[0] for p in points]
        style = "s--" if name == "aggregate_dir" else "o-"
        line = ax_t.plot(xs, [p[1] * 1000 for p in points], style, label=name)[0]
        ax_t.fill_between(xs, [p[1] * 1000 for p in points], [p[2] * 1000 for p in points],
                          color=line.get_color(), alpha=0.15)
    ax_t.set(xscale="log", yscale="log", xlabel="ranks (world size)",
             ylabel="time per checkpoint, ms (median; band to p95)",
             title="Checkpoint aggregation time")
    ax_t.set_xticks(sorted({int(r["world"]) for r in rows}))  # type: ignore[call-overload]
    ax_t.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax_t.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=8)
    store0 = sorted((int(r["world"]), r) for r in rows  # type: ignore[call-overload]
                    if r["mode"] == "torch://" and r["latency_ms"] == 0)
    if store0:
        xs = [w for w, _ in store0]
        ax_n.plot(xs, [int(r["round_trips"] or 0) for _, r in store0], "o-",  # type: ignore[call-overload]
                  label="round trips (all ranks)")
        ax_n.plot(xs, [int(r["writes"] or 0) for _, r in store0], "s-",  # type: ignore[call-overload]
                  label="writes (all ranks)")
        ax_b = ax_n.twinx()
        total = [(int(r["bytes_out"] or 0) + int(r["bytes_in"] or 0)) / 1024  # type: ignore[call-overload]
                 for _, r in store0]
        ax_b.plot(xs, total, "^:", color="gray", label="KiB moved (right)")
        ax_b.set_ylabel("KiB per checkpoint")
        ax_n.set_xticks(xs)
        ax_n.legend(loc="upper left", fontsize=8)
        ax_b.legend(loc="lower right", fontsize=8)
    ax_n.set(xlabel="ranks (world size)", ylabel="store operations per checkpoint",
             title="torch:// store traffic per checkpoint")
    ax_n.grid(True, alpha=0.3)
    fig.text(0.5, 0.005, NOTE, ha="center", fontsize=7, color="dimgray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    paths = [out / PLOT_PNG]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)
    if result.chunked:
        paths.append(_plot_chunked(result.chunked, out / CHUNKED_PNG, plt))
    return paths


def _series_order(name: str) -> tuple[int, int]:
    if name == "aggregate_dir":
        return (1, 0)
    return (0, int(name.split("+")[1].split()[0]))


def _plot_chunked(samples: list[ChunkedSample], path: Path, plt: object) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))  # type: ignore[attr-defined]
    for kind in ("kvstore-write", "kvstore-read"):
        by: dict[tuple[int, int], list[float]] = {}
        for s in samples:
            if s.kind == kind:
                by.setdefault((s.latency_ms, s.size_bytes), []).append(s.wall_s)
        for lat in sorted({k[0] for k in by}):
            pts = sorted((size, median(v)) for (la, size), v in by.items() if la == lat)
            ax.plot([p[0] / 2**20 for p in pts], [p[1] * 1000 for p in pts], "o-",
                    label=f"{kind} +{lat} ms")
    for s in samples:
        if s.kind == "pipeline":
            ax.plot([s.size_bytes / 2**20], [s.wall_s * 1000], "k*", markersize=12,
                    label=f"pipeline checkpoint, W=2 ({s.counts.chunk_writes} chunk writes)")
    ax.axvline(4, color="gray", linestyle=":", label="4 MiB write limit")
    ax.set(xlabel="value size, MiB", ylabel="ms (log)", yscale="log",
           title="Values past 4 MiB (chunked)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)  # type: ignore[attr-defined]
    return path
