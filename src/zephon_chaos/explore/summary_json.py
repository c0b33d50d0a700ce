"""``summary.json``: what an exploration found and where its time went, for programs.

It sits beside ``summary.md`` and holds the same facts as values: each finding's signature,
label, tier, when it was first seen and how often, and each tier's seconds searching,
shrinking and confirming. ``benchmarks/time_to_find.py`` reads it (never the markdown).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zephon_chaos.explore.report import ExploreResult
from zephon_chaos.workload.atomic import replacing

SUMMARY_JSON = "summary.json"
SUMMARY_VERSION = 1


class SummaryError(ValueError):
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
    )


def write_summary_json(result: ExploreResult) -> Path:
    path = result.report_dir / SUMMARY_JSON
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(asdict(facts(result)), indent=2, sort_keys=True) + "\n"
    with replacing(path) as f:
        f.write(text.encode())
    return path


def read_summary_json(path: Path | str) -> SummaryFacts:
    """The facts of a ``summary.json``; :class:`SummaryError` naming what is wrong."""
    path = Path(path)
    try:
        doc: Any = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SummaryError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") != SUMMARY_VERSION:
        found = doc.get("version") if isinstance(doc, dict) else None
        raise SummaryError(
            f"{path}: version {found!r}, this reader knows {SUMMARY_VERSION}; rerun explore "
            "with this version"
        )
    try:
        return SummaryFacts(
            **{
                **doc,
                "tiers": {k: TierFacts(**v) for k, v in doc["tiers"].items()},
                "findings": [FindingFacts(**f) for f in doc["findings"]],
            }
        )
    except (KeyError, TypeError) as exc:
        raise SummaryError(f"{path}: a field is missing or unknown ({exc})") from None
