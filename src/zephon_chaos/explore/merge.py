"""Joining the reports of one exploration split across runners (``zephon-chaos report merge``).

Each input is a report folder; only its ``summary.json`` and the scenario files it names are
read (never the markdown). Findings are deduplicated by signature: the smallest scenario
(``findings.size_key``) is kept with its files, sightings are summed, the first sighting is
the earliest (seconds into its own run), and the label is the strongest evidence any run
has (:func:`merged_label`), each run's own label listed beside it. Each tier's statistics and
each cell's count of the declared space are summed. Runs' example databases
(``REPORT/example-db``) are joined too, so the merged folder can be shared as one.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, fields, replace
from pathlib import Path

from zephon_chaos.dimensions.cells import Cell, Dim, Why
from zephon_chaos.errors import InvalidInput
from zephon_chaos.explore.budget import format_duration
from zephon_chaos.explore.database import LOCAL_COPY
from zephon_chaos.explore.findings import Finding, FindingLabel, Section, size_key
from zephon_chaos.explore.shard import Shard
from zephon_chaos.explore.space import Declared, Space
from zephon_chaos.explore.summary import Coverage, TierStats, section_head, setting_lines
from zephon_chaos.explore.summary_json import (
    SUMMARY_JSON,
    CellFacts,
    CoverageFacts,
    FindingFacts,
    RunFacts,
    SummaryError,
    SummaryFacts,
    TierFacts,
    read_summary_json,
    write_facts,
)
from zephon_chaos.explore.tiers import replay_command
from zephon_chaos.scenario import Scenario, ScenarioError

FINDINGS = "findings"
LABEL_STRENGTH: tuple[FindingLabel, ...] = (
    FindingLabel.REPRODUCIBLE,
    FindingLabel.FLAKY,
    FindingLabel.OUT_OF_TIME,
    FindingLabel.UNCONFIRMED,
)
"""Strongest first: a signature every rerun reproduced on some run is reproducible, even if a
rerun elsewhere did not (each run's label stays listed)."""


class MergeError(InvalidInput, ValueError):
    """An input that cannot be merged; the message names the file and the way out."""


@dataclass(frozen=True)
class Report:
    """One input: its folder and its summary.json's facts."""

    folder: Path
    facts: SummaryFacts

    @property
    def name(self) -> str:
        """How the merged report names this run: its shard, else its folder."""
        return self.facts.shard or str(self.folder)

    def runs(self) -> list[RunFacts]:
        f = self.facts
        if f.runs:  # itself a merge: its runs
            return list(f.runs)
        return [RunFacts(str(self.folder), f.shard, f.seed, f.budget_s, f.elapsed_s, f.interrupted)]


@dataclass(frozen=True)
class Candidate:
    """One run's finding of a signature, with its scenario (None: no scenario file)."""

    report: Report
    facts: FindingFacts
    scenario: Scenario | None

    def rank(self) -> tuple[object, ...]:
        """Smaller first: a scenario before none, then ``size_key``, then the earliest."""
        if self.scenario is None:
            return (1, (), self.facts.first_seen_s)
        return (0, size_key(self.scenario), self.facts.first_seen_s)


@dataclass(frozen=True)
class Merged:
    reports: list[Report]
    summary: SummaryFacts
    kept: dict[str, Candidate]
    """Per signature: the run and scenario kept."""
    missing_shards: list[str]


def read_reports(folders: list[Path]) -> list[Report]:
    """Each folder's summary.json; :class:`MergeError` naming a missing or corrupt one."""
    if not folders:
        raise MergeError("no report folder given: name each shard's report folder")
    reports = []
    for folder in folders:
        path = folder / SUMMARY_JSON
        if not folder.is_dir():
            raise MergeError(f"{folder}: no such report folder")
        if not path.is_file():
            raise MergeError(
                f"{path}: missing: {folder} is not an explore report (or its run wrote no "
                "summary); leave it out or rerun that shard"
            )
        try:
            reports.append(Report(folder, read_summary_json(path)))
        except SummaryError as exc:
            raise MergeError(str(exc)) from None
    _check_compatible(reports)
    return reports


def _check_compatible(reports: list[Report]) -> None:
    first = reports[0]
    seen: dict[tuple[int, str], Path] = {}  # a shard is one of its seed's run
    for r in reports:
        if r.facts.plant != first.facts.plant:
            raise MergeError(
                f"{r.folder / SUMMARY_JSON}: plant {r.facts.plant!r}, but "
                f"{first.folder / SUMMARY_JSON} has {first.facts.plant!r}: a self-test's "
                "findings are the plant's; merge runs of one kind"
            )
        for run in r.runs():
            if run.shard is None:
                continue
            key = (run.seed, run.shard)
            if key in seen:
                raise MergeError(
                    f"{r.folder / SUMMARY_JSON}: shard {run.shard} again (seed {run.seed}, also in "
                    f"{seen[key] / SUMMARY_JSON}): name each shard's folder once"
                )
            seen[key] = r.folder


def merge(reports: list[Report]) -> Merged:
    """The merged facts of ``reports`` (not yet written)."""
    runs = [run for r in reports for run in r.runs()]
    kept: dict[str, Candidate] = {}
    labels: dict[str, dict[str, str]] = {}
    merged_facts: dict[str, FindingFacts] = {}
    for r in reports:
        for f in r.facts.findings:
            candidate = Candidate(r, f, _scenario(r, f))
            run_labels = f.labels or {r.name: f.label}
            labels.setdefault(f.signature, {}).update(run_labels)
            prior = merged_facts.get(f.signature)
            if prior is None or candidate.rank() < kept[f.signature].rank():
                kept[f.signature] = candidate
            merged_facts[f.signature] = _join(prior, f)
    findings = []
    for sig, joined in merged_facts.items():
        c = kept[sig]
        findings.append(
            replace(
                joined,
                label=str(merged_label(sig, labels[sig], c.report.folder)),
                tier=c.facts.tier,
                shrunk_s=c.facts.shrunk_s,
                shrunk_on=c.facts.shrunk_on,
                scenario_file=(
                    None
                    if c.facts.scenario_file is None
                    else f"{FINDINGS}/{Path(c.facts.scenario_file).name}"
                ),
                shard=c.facts.shard or c.report.name,
                labels=labels[sig],
            )
        )
    findings.sort(key=lambda f: (f.known, f.first_seen_s))
    tier_names = sorted({r.facts.tier for r in reports})
    databases = {r.facts.database for r in reports}
    summary = SummaryFacts(
        budget_s=round(sum(run.budget_s for run in runs), 3),
        elapsed_s=round(sum(run.elapsed_s for run in runs), 3),
        interrupted=any(run.interrupted for run in runs),
        tier="+".join(tier_names),
        seed=runs[0].seed,
        plant=reports[0].facts.plant,
        tiers=_tiers(reports),
        findings=findings,
        database=databases.pop() if len(databases) == 1 else None,
        coverage=_coverage(reports),
        runs=runs,
    )
    return Merged(reports, summary, kept, _missing(runs))


def merged_label(sig: str, labels: dict[str, str], where: Path) -> FindingLabel:
    """The strongest label any run gave ``sig`` (``LABEL_STRENGTH``); a harness problem stays
    one."""
    try:
        given = {FindingLabel(v) for v in labels.values()}
    except ValueError as exc:
        raise MergeError(f"{where / SUMMARY_JSON}: finding {sig}: {exc}") from None
    if FindingLabel.HARNESS in given:
        return FindingLabel.HARNESS
    return next((label for label in LABEL_STRENGTH if label in given), FindingLabel.UNCONFIRMED)


def _join(prior: FindingFacts | None, f: FindingFacts) -> FindingFacts:
    if prior is None:
        return f
    return replace(
        prior, seen=prior.seen + f.seen, first_seen_s=min(prior.first_seen_s, f.first_seen_s)
    )


def _scenario(r: Report, f: FindingFacts) -> Scenario | None:
    if f.scenario_file is None:
        return None
    path = r.folder / f.scenario_file
    if not path.is_file():
        raise MergeError(
            f"{r.folder / SUMMARY_JSON}: finding {f.signature}: its scenario {path} is "
            "missing; the report folder is incomplete (copy it whole)"
        )
    try:
        return Scenario.load(path)
    except ScenarioError as exc:
        raise MergeError(f"{r.folder / SUMMARY_JSON}: finding {f.signature}: {exc}") from None


def _tiers(reports: list[Report]) -> dict[str, TierFacts]:
    out: dict[str, TierFacts] = {}
    for r in reports:
        for name, t in r.facts.tiers.items():
            prior = out.get(name)
            if prior is None:
                out[name] = t
                continue
            summed = {
                fl.name: round(getattr(prior, fl.name) + getattr(t, fl.name), 3)
                if isinstance(getattr(t, fl.name), float)
                else getattr(prior, fl.name) + getattr(t, fl.name)
                for fl in fields(TierFacts)
                if fl.name != "tier"
            }
            out[name] = TierFacts(tier=name, **summed)
    return out


def _coverage(reports: list[Report]) -> dict[str, CoverageFacts]:
    """Per tier: the union of the runs' cells, each count summed; a cell any run's space
    reaches is reachable."""
    out: dict[str, CoverageFacts] = {}
    for r in reports:
        for tier, cov in r.facts.coverage.items():
            for c in cov.cells:
                _check_cell(r, tier, c)
            prior = out.get(tier)
            if prior is None:
                out[tier] = replace(cov, cells=list(cov.cells))
                continue
            index = {(c.dim, tuple(c.value)): i for i, c in enumerate(prior.cells)}
            cells = list(prior.cells)
            for c in cov.cells:
                i = index.get((c.dim, tuple(c.value)))
                if i is None:
                    index[(c.dim, tuple(c.value))] = len(cells)
                    cells.append(c)
                    continue
                old = cells[i]
                cells[i] = replace(
                    old,
                    count=old.count + c.count,
                    offered=old.offered + c.offered,
                    why_not=old.why_not if c.why_not is not None else None,
                    declared=old.declared or c.declared,
                )
            out[tier] = CoverageFacts(
                max_world=max(prior.max_world, cov.max_world),
                max_phases=max(prior.max_phases, cov.max_phases),
                faults=prior.faults or cov.faults,
                store_faults=prior.store_faults or cov.store_faults,
                cells=cells,
            )
    return out


def _check_cell(r: Report, tier: str, c: CellFacts) -> None:
    if c.dim not in Dim.__members__ or (c.why_not is not None and c.why_not not in Why.__members__):
        raise MergeError(
            f"{r.folder / SUMMARY_JSON}: coverage of {tier}: cell {c.dim} {c.value} "
            f"(why not: {c.why_not}) is unknown to this version; merge with the zephon-chaos "
            "that wrote it"
        )


def _missing(runs: list[RunFacts]) -> list[str]:
    """Shards of the split (all ``i/n`` with one ``n``) that no input holds."""
    shards = [Shard.parse(run.shard) for run in runs if run.shard is not None]
    counts = {s.count for s in shards}
    if len(counts) != 1:
        return []
    (n,) = counts
    present = {s.index for s in shards}
    return [str(Shard(i, n)) for i in range(1, n + 1) if i not in present]


# ---- writing ---------------------------------------------------------------------------


def write_merged(merged: Merged, out: Path, join_databases: bool = True) -> Path:
    """Write ``out/summary.json``, ``out/summary.md``, the kept findings' files and (unless
    ``join_databases`` is off: ``out/example-db`` is the database the runs shared, already
    whole) the joined example database; return the markdown's path."""
    out.mkdir(parents=True, exist_ok=True)
    for name in (FINDINGS, LOCAL_COPY) if join_databases else (FINDINGS,):
        if (out / name).is_dir():
            shutil.rmtree(out / name)  # a previous merge's: replaced whole
    for c in merged.kept.values():
        if c.facts.scenario_file is None:
            continue
        src = c.report.folder / c.facts.scenario_file
        (out / FINDINGS).mkdir(exist_ok=True)
        for sibling in src.parent.glob(f"{src.stem}.*"):
            shutil.copy2(sibling, out / FINDINGS / sibling.name)
    for r in merged.reports if join_databases else ():
        db = r.folder / LOCAL_COPY
        if db.is_dir():  # a directory database: one file per example, named by its hash
            shutil.copytree(db, out / LOCAL_COPY, dirs_exist_ok=True)
    write_facts(merged.summary, out)
    path = out / "summary.md"
    path.write_text("\n".join(markdown(merged, out)) + "\n")
    return path


def together_line(reports: list[Report], tier: str) -> list[str]:
    """The runs' pace together: each run's own rate summed. The summed time above counts each
    run's seconds, so its rate is one run's; runs made at once (``explore --jobs``, or CI
    shards) find per minute of wall time what their rates add up to."""
    rates = [
        60.0 * t.scenarios / t.seconds
        for r in reports
        if (t := r.facts.tiers.get(tier)) is not None and t.seconds > 0
    ]
    if len(rates) < 2:
        return []
    return [f"- {tier}: {len(rates)} runs at once: {sum(rates):.1f}/min together"]


def markdown(merged: Merged, out: Path) -> list[str]:
    """The merged summary.md: the runs, each tier's summed time, the findings, the coverage."""
    s = merged.summary
    lines = [
        f"# zephon-chaos explore: {len(s.runs)} runs merged",
        "",
        f"- tier: {s.tier}; {format_duration(s.elapsed_s)} of exploring in all "
        f"(budgets {format_duration(s.budget_s)})"
        + ("; some run was interrupted" if s.interrupted else ""),
    ]
    for run in s.runs:
        lines.append(
            f"- run `{run.source}`"
            + (f", shard {run.shard}" if run.shard else "")
            + f": seed {run.seed}, budget {format_duration(run.budget_s)}, used "
            f"{format_duration(run.elapsed_s)}" + (" (interrupted)" if run.interrupted else "")
        )
    if merged.missing_shards:
        lines.append(f"- shards missing (no report given): {', '.join(merged.missing_shards)}")
    lines += setting_lines(s.plant, s.database, shared="by the runs")
    for t in s.tiers.values():
        stats = TierStats(**{fl.name: getattr(t, fl.name) for fl in fields(TierFacts)})
        lines += stats.summary_lines()
        lines += together_line(merged.reports, t.tier)
    if not s.findings:
        lines += ["", "## Findings (0)", "", "None: every scenario run met the oracles."]
    for section in Section:
        lines += _section(merged, out, section)
    lines += _coverage_section(s)
    return lines


def _section(merged: Merged, out: Path, section: Section) -> list[str]:
    found = [f for f in merged.summary.findings if _section_of(f) is section]
    if not found:
        return []
    columns = ("signature", "label (each run's)", "tier", "seen", "first seen", "minimal scenario")
    lines = section_head(section, len(found), columns)
    for f in found:
        runs = ", ".join(f"{name}: {label}" for name, label in f.labels.items())
        scenario = merged.kept[f.signature].scenario
        lines.append(
            f"| `{f.signature}` | {f.label} ({runs}) | {f.tier} | {f.seen} | "
            f"{f.first_seen_s:.0f}s | {scenario.summary() if scenario else 'no scenario file'} |"
        )
    for f in found:
        lines += ["", f"### `{f.signature}`", ""]
        if f.scenario_file is not None:
            lines.append(f"- scenario: [{f.scenario_file}]({f.scenario_file}), from {f.shard}")
            lines.append(f"- replay: `{replay_command(out / f.scenario_file, f.tier)}`")
            text = (out / f.scenario_file).with_suffix(".txt")
            if text.is_file():
                lines += ["", "```", text.read_text().rstrip(), "```"]
    return lines


def _section_of(f: FindingFacts) -> Section:
    """As ``Finding.section``: from the signature and the merged label."""
    probe = Finding(f.signature, f.tier, Scenario(), "", f.first_seen_s)
    if not probe.harness:
        probe.label = FindingLabel(f.label)
    return probe.section


def _coverage_section(s: SummaryFacts) -> list[str]:
    """The tiers' holes, then each tier's declared cells with their summed counts, as a run's
    own summary shows them."""
    lines = ["", "## Coverage"]
    if not s.coverage:
        return [*lines, "", "No per-cell counts in the inputs (written before version 2)."]
    coverage = Coverage()
    max_world = max(cov.max_world for cov in s.coverage.values())
    for tier, cov in s.coverage.items():
        declared = tuple(
            Declared(_cell(c), None if c.why_not is None else Why[c.why_not])
            for c in cov.cells
            if c.declared
        )
        coverage.declare(
            Space(tier, cov.max_world, cov.max_phases, cov.faults, cov.store_faults, declared)
        )
        coverage.counts[tier] = Counter({_cell(c): c.count for c in cov.cells})
        coverage.offered[tier] = Counter({_cell(c): c.offered for c in cov.cells})
    if len(s.coverage) > 1:
        lines += coverage.holes_section(max_world)
    for tier, cov in s.coverage.items():
        lines += coverage.tier_section(tier, cov.max_world)
    return lines


def _cell(c: CellFacts) -> Cell:
    return Cell(Dim[c.dim], tuple(c.value))
