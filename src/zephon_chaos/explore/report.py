"""What an exploration covered, and the markdown summary of its findings."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from zephon_chaos.explore.budget import format_duration
from zephon_chaos.explore.findings import Finding, Section
from zephon_chaos.explore.liveness_table import LivenessTally
from zephon_chaos.explore.tiers import replay_command
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario


@dataclass
class Coverage:
    """How many scenarios exercised each feature (a scenario counts once per feature)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, scenario: Scenario, outcome: ScenarioOutcome | None) -> None:
        self.counts.update(set(features(scenario, outcome)))

    def table(self) -> list[tuple[str, int]]:
        return sorted(self.counts.items(), key=lambda kv: (kv[0].split(":")[0], kv[0]))


def features(scenario: Scenario, outcome: ScenarioOutcome | None) -> list[str]:
    p = scenario.pipeline
    out = [
        f"phases: {len(scenario.phases)}",
        f"aggregation: {p.aggregation}",
        f"persistence: {scenario.persist_format}",
        f"runner: {p.runner}" + (" + mtp_mode" if p.mtp_mode else ""),
        f"mapping: {p.mapping}",
        f"run_id: {scenario.run_id_policy}",
    ]
    out += [f"data: {src.kind}, {src.exhausted}" for src in scenario.data.sources]
    previous = None
    for i, ph in enumerate(scenario.phases):
        c = scenario.canonical_replicas(i)
        out.append(f"world size: {ph.world_size}")
        out.append(f"launch path: {ph.launch}")
        if ph.world_size > c:
            out.append("trajectory: G > C (refusal expected)")
            continue
        if c % ph.world_size:
            out.append("trajectory: G does not divide C")
        if previous is not None:
            out.append(
                "trajectory: "
                + (
                    "same size"
                    if ph.world_size == previous
                    else "growth"
                    if ph.world_size > previous
                    else "shrink"
                )
            )
        previous = ph.world_size
        for cp in ph.checkpoints:
            if (cp.step, cp.extra) == (0, 0):
                out.append("checkpoint: at step 0, before the first batch")
            elif cp.extra:
                out.append("checkpoint: mid-window (step + extra batches)")
            else:
                out.append("checkpoint: on a step boundary")
        for f in ph.rank_faults:
            out.append(f"fault: rank {f.action}")
        for pf in ph.proxy_faults:
            out.append(f"fault: store link {pf.toxic} at {pf.at.partition('#')[0]}")
            out.append(f"retry after a failed checkpoint: {ph.retry}")
        if ph.rank_faults and i < len(scenario.phases) - 1:
            out.append("crash, then a relaunch")
            if scenario.restore_index(i) is None and i > 0:
                out.append(
                    "crash before any checkpoint: relaunch from the same checkpoint"
                    + (" with the same run_id" if scenario.run_id_policy == "fixed" else "")
                )
    if outcome is not None:
        for r in outcome.resumes:
            out.append(
                "resume: "
                + ("resized" if r.resized else "same size")
                + (", mid-window" if r.mid_window else ", window boundary")
            )
        for run in outcome.phases:
            if run.fault is not None and run.fault.verdict is not None:
                out.append(f"store fault outcome: {run.fault.verdict.outcome}")
            for rec in run.records:
                dry = rec.exhausted_after
                if dry is not None:
                    out.append("data ran out during a launch")
                    if any(ev.after_batches >= dry for ev in rec.checkpoints):
                        out.append("checkpoint: after the data ran out")
        if outcome.verdict is not None:
            out.append(f"oracle: {outcome.verdict.contract}")
    return out


@dataclass
class TierStats:
    tier: str
    scenarios: int = 0
    seconds: float = 0.0
    refused: int = 0

    @property
    def rate(self) -> float:
        return 60.0 * self.scenarios / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ExploreResult:
    report_dir: Path
    budget_s: float
    tier: str
    seed: int
    max_world: int
    plant: str | None
    elapsed_s: float = 0.0
    interrupted: bool = False
    tiers: dict[str, TierStats] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    liveness: LivenessTally = field(default_factory=LivenessTally)
    notes: list[str] = field(default_factory=list)
    timeline: Path | None = None

    @property
    def scenarios(self) -> int:
        return sum(t.scenarios for t in self.tiers.values())

    @property
    def violations(self) -> list[Finding]:
        """Failures of the code under test not refuted by a rerun (not flaky, known, harness)."""
        return self.in_section(Section.VIOLATION)

    def in_section(self, section: Section) -> list[Finding]:
        return [f for f in self.findings if f.section is section]


SECTION_MEANING: dict[Section, str] = {
    Section.VIOLATION: "Failures of the code under test that every confirmation rerun "
    "reproduced (or that were not rerun: nothing refuted them). `explore` exits 1.",
    Section.FLAKY: "Failures that a confirmation rerun did not reproduce: reported with their "
    "reruns and the failing run's evidence, not counted as violations (`explore` exits 1 for "
    "them only with `--fail-on-flaky`).",
    Section.HARNESS: "The harness failed: it raised, or a launch failed in a way it could not "
    "describe (no rank known to have failed, a first failure without an error message). Our "
    "bug, never the code under test's: `explore` exits 3 when there is no violation.",
    Section.KNOWN: "Known defects of Zephon, each pinned by a strict xfail in the suite: they "
    "do not fail `explore`.",
}


def _findings_section(result: ExploreResult, section: Section) -> list[str]:
    """One kind of finding: what it means, a table, then each finding's files and evidence."""
    found = result.in_section(section)
    if not found:
        return []
    lines = ["", f"## {section.value} ({len(found)})", "", SECTION_MEANING[section], ""]
    lines += [
        "| signature | label | tier | seen | minimal scenario |",
        "|---|---|---|---|---|",
    ]
    for f in found:
        lines.append(
            f"| `{f.signature}` | {f.label} | {f.tier} | {f.seen} | {f.scenario.summary()} |"
        )
    for f in found:
        json_path = next((p for p in f.files if p.suffix == ".json"), None)
        lines += ["", f"### `{f.signature}`", ""]
        if json_path is not None:
            rel = json_path.relative_to(result.report_dir)
            lines.append(f"- scenario: [{rel}]({rel})")
            lines.append(f"- replay: `{replay_command(json_path, f.tier)}`")
        png = next((p for p in f.files if p.suffix == ".png"), None)
        if png is not None:
            rel = png.relative_to(result.report_dir)
            lines.append(f"- timeline: ![{f.signature}]({rel})")
        lines += ["", "```", f.describe(), "```"]
    return lines


def write_summary(result: ExploreResult) -> Path:
    path = result.report_dir / "summary.md"
    lines = [
        "# zephon-chaos explore",
        "",
        f"- budget {format_duration(result.budget_s)}, used {format_duration(result.elapsed_s)}"
        + (" (interrupted: the report covers what ran until then)" if result.interrupted else ""),
        f"- tier: {result.tier}; seed {result.seed}; world sizes 1..{result.max_world}",
    ]
    if result.plant:
        lines.append(f"- self-test: every scenario carries the planted defect `{result.plant}`")
    for t in result.tiers.values():
        lines.append(
            f"- {t.tier}: {t.scenarios} scenarios in {format_duration(t.seconds)} "
            f"({t.rate:.1f}/min)"
        )
    lines += [f"- note: {n}" for n in result.notes]
    if not result.findings:
        lines += ["", "## Findings (0)", ""]
        lines.append("None: every scenario run met the oracles (see the coverage below).")
    for section in Section:
        lines += _findings_section(result, section)
    lines += ["", "## Coverage", "", "| feature | scenarios |", "|---|---|"]
    lines += [f"| {k} | {n} |" for k, n in result.coverage.table()]
    if result.timeline is not None:
        rel = result.timeline.relative_to(result.report_dir)
        lines += ["", "## Timeline", "", f"![timeline]({rel})"]
    lines += result.liveness.section()
    lines += [
        "",
        "## Signatures",
        "",
        "`<area>.<kind>.<topology>.<window>`: the oracle or step that failed (reference, "
        "launch, refusal, crash, batches-identical, batches-mid-window, checkpoint, "
        "liveness), the kind of problem, whether a restore changed the world size, and "
        "whether a restored checkpoint was mid-window. One finding per signature; its "
        "smallest scenario is kept. "
        "`known.<id>`: only a known defect of Zephon is involved. "
        "`harness.<kind>`: the harness raised (the exception's type) or could not describe a "
        "failure (`unknown-exit-status`, `no-error-message`).",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
