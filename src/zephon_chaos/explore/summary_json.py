"""``summary.json``: what an exploration found and where its time went, for programs.

It sits beside ``summary.md`` and holds the same facts as values: each finding's signature,
label, tier, when it was first seen and how often, each tier's seconds searching, shrinking
and confirming, the shard of a run split across runners, and each tier's declared cells with
how many scenarios reached each (version 2). ``benchmarks/time_to_find.py`` and
``zephon-chaos report merge`` read it (never the markdown); version 1 files stay readable.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zephon_chaos.errors import InvalidInput
from zephon_chaos.explore.summary import ExploreResult
from zephon_chaos.workload.atomic import replacing

SUMMARY_JSON = "summary.json"
SUMMARY_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""Version 1 lacks the shard, the runs merged and the per-cell counts (their defaults)."""


class SummaryError(InvalidInput, ValueError):
    """A summary.json this version cannot read; the message names the file and the field."""


@dataclass(frozen=True)
class FindingFacts:
    signature: str
    label: str
    tier: str
    first_seen_s: float
    seen: int
    known: bool
    shrunk_s: float | None = None
    shrunk_on: str | None = None
    scenario_file: str | None = None
    """The minimal scenario's file, relative to the report folder."""
    shard: str | None = None
    """Merged: the shard whose scenario is kept (the smallest); a shard's own: its shard."""
    labels: dict[str, str] = field(default_factory=dict)
    """Merged: each shard's label for it (shard ``i/n``, or the input folder unsharded)."""


@dataclass(frozen=True)
class TierFacts:
    tier: str
    scenarios: int
    new_scenarios: int
    seconds: float
    search_s: float
    shrink_s: float
    confirm_s: float
    in_process_runs: int
    shrunk_in_process: int
    aimed_s: float = 0.0
    """Of ``search_s``: rounds aimed at fault cells no tier had reached (``explore.steer``)."""
    aimed_rounds: int = 0


@dataclass(frozen=True)
class CellFacts:
    """A cell of the space and how many scenarios reached it (each counts once per cell)."""

    dim: str
    """``cells.Dim``'s member name."""
    value: list[str]
    count: int
    why_not: str | None = None
    """``cells.Why``'s member name where the strategies cannot reach it."""
    declared: bool = True
    """False: reached, yet outside the declared space (the space lags the strategies)."""
    offered: int = 0
    """Aimed rounds whose aims held it (``explore.unreached`` says why a hole stayed one)."""


@dataclass(frozen=True)
class CoverageFacts:
    """One tier's declared space (its options) and every cell's count."""

    max_world: int
    max_phases: int
    faults: bool
    store_faults: bool
    cells: list[CellFacts] = field(default_factory=list)


@dataclass(frozen=True)
class RunFacts:
    """One exploration run among those a merged summary joins."""

    source: str
    """The report folder it was read from."""
    shard: str | None
    seed: int
    budget_s: float
    elapsed_s: float
    interrupted: bool


@dataclass(frozen=True)
class SummaryFacts:
    budget_s: float
    elapsed_s: float
    interrupted: bool
    tier: str
    seed: int
    plant: str | None
    tiers: dict[str, TierFacts] = field(default_factory=dict)
    findings: list[FindingFacts] = field(default_factory=list)
    version: int = SUMMARY_VERSION
    shard: str | None = None
    database: str | None = None
    coverage: dict[str, CoverageFacts] = field(default_factory=dict)
    runs: list[RunFacts] = field(default_factory=list)
    """Merged: the runs joined (empty for one run's own summary)."""


def facts(result: ExploreResult) -> SummaryFacts:
    findings = []
    for f in result.findings:
        json_path = next((p for p in f.files if p.suffix == ".json"), None)
        findings.append(
            FindingFacts(
                signature=f.signature,
                label=str(f.label),
                tier=f.tier,
                first_seen_s=round(f.first_seen_s, 3),
                seen=f.seen,
                known=f.known,
                shrunk_s=None if f.shrunk_s is None else round(f.shrunk_s, 3),
                shrunk_on=f.shrunk_on,
                scenario_file=(
                    None if json_path is None else str(json_path.relative_to(result.report_dir))
                ),
                shard=result.shard,
            )
        )
    tiers = {
        name: TierFacts(
            tier=t.tier,
            scenarios=t.scenarios,
            new_scenarios=t.new_scenarios,
            seconds=round(t.seconds, 3),
            search_s=round(t.search_s, 3),
            shrink_s=round(t.shrink_s, 3),
            confirm_s=round(t.confirm_s, 3),
            in_process_runs=t.in_process_runs,
            shrunk_in_process=t.shrunk_in_process,
            aimed_s=round(t.aimed_s, 3),
            aimed_rounds=t.aimed_rounds,
        )
        for name, t in result.tiers.items()
    }
    return SummaryFacts(
        budget_s=result.budget_s,
        elapsed_s=round(result.elapsed_s, 3),
        interrupted=result.interrupted,
        tier=result.tier,
        seed=result.seed,
        plant=result.plant,
        tiers=tiers,
        findings=findings,
        shard=result.shard,
        database=result.database,
        coverage={tier: coverage_facts(result, tier) for tier in result.coverage.counts},
    )


def coverage_facts(result: ExploreResult, tier: str) -> CoverageFacts:
    """``tier``'s declared cells with their counts, then the cells reached outside them."""
    coverage = result.coverage
    space = coverage.space(tier, result.max_world)
    offered = coverage.offered.get(tier, Counter())
    cells = [
        CellFacts(
            dim=d.cell.dim.name,
            value=list(d.cell.value),
            count=n,
            why_not=None if d.why_not is None else d.why_not.name,
            offered=offered[d.cell],
        )
        for d, n in coverage.table(tier, result.max_world)
    ]
    cells += [
        CellFacts(dim=c.dim.name, value=list(c.value), count=n, declared=False)
        for c, n in coverage.outside(tier, result.max_world)
    ]
    return CoverageFacts(
        max_world=space.max_world,
        max_phases=space.max_phases,
        faults=space.faults,
        store_faults=space.store_faults,
        cells=cells,
    )


def write_summary_json(result: ExploreResult) -> Path:
    return write_facts(facts(result), result.report_dir)


def read_summary_json(path: Path | str) -> SummaryFacts:
    """The facts of a ``summary.json``; :class:`SummaryError` naming what is wrong."""
    path = Path(path)
    try:
        doc: Any = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SummaryError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") not in READABLE_VERSIONS:
        found = doc.get("version") if isinstance(doc, dict) else None
        raise SummaryError(
            f"{path}: version {found!r}, this reader knows "
            f"{', '.join(map(str, READABLE_VERSIONS))}; rerun explore with this version"
        )
    try:
        return SummaryFacts(
            **{
                **doc,
                "tiers": {k: TierFacts(**v) for k, v in doc["tiers"].items()},
                "findings": [FindingFacts(**f) for f in doc["findings"]],
                "coverage": {
                    k: CoverageFacts(**{**v, "cells": [CellFacts(**c) for c in v["cells"]]})
                    for k, v in doc.get("coverage", {}).items()
                },
                "runs": [RunFacts(**r) for r in doc.get("runs", [])],
            }
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise SummaryError(f"{path}: a field is missing or unknown ({exc})") from None


def write_facts(summary: SummaryFacts, report_dir: Path) -> Path:
    """Write ``summary`` as ``report_dir/summary.json`` (a merged summary, say)."""
    path = report_dir / SUMMARY_JSON
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(asdict(summary), indent=2, sort_keys=True) + "\n"
    with replacing(path) as f:
        f.write(text.encode())
    return path
