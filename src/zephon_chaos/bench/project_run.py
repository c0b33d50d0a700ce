"""``bench aggregation --project``: capacity, validation, projection, and their files."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from zephon_chaos.bench.capacity import CapacityConfig, CapacityResult, measure_capacity
from zephon_chaos.bench.projection import (
    CAPACITY_CSV,
    VALIDATION_CSV,
    VALIDATION_MD,
    ProjectionConfig,
    ProjectionRow,
    plot_projection,
    project,
    write_projection,
)
from zephon_chaos.bench.validate import (
    Calibration,
    Comparison,
    ValidationConfig,
    run_validation,
    store_params,
)

TARGET_PCT = 25.0


@dataclass
class ProjectRun:
    capacity: CapacityConfig = field(default_factory=CapacityConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    projection: ProjectionConfig = field(default_factory=ProjectionConfig)
    plots: bool = True


@dataclass
class ProjectResult:
    capacity: CapacityResult
    calibration: Calibration
    comparisons: list[Comparison]
    projection: list[ProjectionRow]
    files: list[Path]


def run_project(cfg: ProjectRun, out: Path, log: Callable[[str], None] = print
                ) -> ProjectResult:
    from zephon_chaos.bench.aggregation import hosted_store
    from zephon_chaos.bench.machine import load_note

    cfg.capacity.validate()
    cfg.validation.validate()
    log(f"TCPStore capacity ({load_note()}):")
    cap = measure_capacity(cfg.capacity, log)
    log(f"  service time {cap.service_s() * 1e6:.0f} us per request, lone round trip "
        f"{cap.base_rtt_s() * 1e6:.0f} us, {cap.bytes_per_s() / 2**20:.0f} MiB/s "
        f"(load before: {cap.load_before}; after: {cap.load_after})")
    log(f"validation: bench aggregation rounds against the model ({load_note()}):")
    with hosted_store() as endpoint:
        cal, comparisons = run_validation(cfg.validation, cap, endpoint, log)
    note = (f"store: {cap.service_s() * 1e6:.0f} us/request, "
            f"{cap.bytes_per_s() / 2**20:.0f} MiB/s, measured on {load_note()}; "
            f"{cal.fixed_bytes:.0f} B + {cal.lane_bytes:.0f} B per lane + {cal.rank_bytes:.0f} B "
            "per rank in the result; one lane per rank; "
            "ranks as processes")
    rows = project(cfg.projection, store_params(cap, cal, 0), cal.cpu, cal.lane_bytes,
                   cal.fixed_bytes, cal.rank_bytes)
    out.mkdir(parents=True, exist_ok=True)
    files = [_capacity_csv(cap, out / CAPACITY_CSV), *_validation_files(comparisons, out)]
    files += write_projection(rows, cfg.projection, out, note)
    if cfg.plots:
        files.append(plot_projection(rows, cfg.projection, out, note))
    return ProjectResult(cap, cal, comparisons, rows, files)


def _capacity_csv(cap: CapacityResult, path: Path) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "connections", "processes", "ops_per_s", "mean_latency_s",
                    "bytes_per_s", "error", "load_before", "load_after"])
        for p in cap.points:
            w.writerow([p.op, p.connections, p.processes, round(p.ops_per_s, 1),
                        _r(p.mean_latency_s), round(p.bytes_per_s), p.error,
                        cap.load_before, cap.load_after])
    return path


def _r(x: float) -> object:
    return "" if math.isnan(x) else round(x, 7)


def _validation_files(rows: list[Comparison], out: Path) -> list[Path]:
    csv_path, md_path = out / VALIDATION_CSV, out / VALIDATION_MD
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["backend", "world", "latency_ms", "measured_s", "predicted_s", "error_pct",
                    "measured_ops", "predicted_ops", "error"])
        for c in rows:
            w.writerow([c.mode, c.world, c.latency_ms, _r(c.measured_s), _r(c.predicted_s),
                        "" if c.error else round(c.error_pct, 1), _r(c.measured_ops),
                        _r(c.predicted_ops), c.error])
    md_path.write_text(validation_markdown(rows))
    return [csv_path, md_path]


def validation_markdown(rows: list[Comparison]) -> str:
    lines = ["| backend | ranks | +one-way | measured | predicted | error | ops measured / model |",
             "| :--- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in rows:
        if c.error:
            lines.append(f"| {c.mode} | {c.world} | {c.latency_ms} ms | failed: {c.error} "
                         "| | | |")
            continue
        mark = "" if abs(c.error_pct) <= TARGET_PCT else " (miss)"
        lines.append(f"| {c.mode} | {c.world} | {c.latency_ms} ms | {c.measured_s * 1000:.0f} ms"
                     f" | {c.predicted_s * 1000:.0f} ms | {c.error_pct:+.0f} %{mark} | "
                     f"{c.measured_ops:.0f} / {c.predicted_ops:.0f} |")
    hits = [c for c in rows if not c.error and abs(c.error_pct) <= TARGET_PCT]
    lines += ["", f"{len(hits)} of {len(rows)} cells within ±{TARGET_PCT:.0f} %."]
    return "\n".join(lines) + "\n"
