"""A finding: a minimal failing scenario, rerun to tell reproducible from flaky, then saved.

Files, per finding, under ``DIR/findings/``: ``<signature>.json`` (the scenario, what
``zephon-chaos replay`` reads), ``<signature>.txt`` (evidence, reruns, the replay command)
and ``<signature>.png`` (its timeline).
"""

from __future__ import annotations

import contextlib
import enum
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from zephon_chaos.deployment import CHOICES as DEPLOYMENT_CHOICES
from zephon_chaos.deployment import DOWNSTREAM
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.tiers import replay_command
from zephon_chaos.harness_problem import HARNESS_AREA
from zephon_chaos.launch.launch_spec import DEFAULT_LAUNCH_LANE, LaunchLane
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Found, Scenario
from zephon_chaos.workload.spec import PipelineSpec, stage_count

CONFIRM_RUNS = 2


class FindingLabel(str, enum.Enum):
    """How far a finding was confirmed; the value is what the report prints."""

    UNCONFIRMED = "unconfirmed"
    """Not rerun (yet): the search was interrupted before its confirmations."""
    REPRODUCIBLE = "reproducible"
    """Every confirmation rerun failed with its signature."""
    FLAKY = "flaky"
    """Some confirmation rerun passed or failed otherwise: not a reproducible violation."""
    OUT_OF_TIME = "unconfirmed (out of time)"
    """The budget ended before its confirmation reruns did."""
    HARNESS = "harness problem"
    """The harness failed (raised, or could not describe a failure): not rerun."""

    def __str__(self) -> str:
        return self.value


class Section(enum.Enum):
    """Where a finding is reported, and what it does to ``explore``'s exit status."""

    VIOLATION = "Violations"
    FLAKY = "Flaky findings"
    HARNESS = "Harness problems"
    KNOWN = "Known defects"
    LIMITATION = "Known limitations"


_PLAIN = PipelineSpec()
CODEC_OPTIONS = (
    "aggregate_serializer",
    "aggregate_compressor",
    "prefetch_batches",
    "shutdown_mode",
)
"""Zephon options a finding is simpler without: polishing resets them to Zephon's defaults."""


def size_key(s: Scenario) -> tuple[int, ...]:
    """Smaller is simpler: launches, total ranks, C, world sizes in order (growing before
    shrinking), faults, steps, checkpoints, then plainer data and settings."""
    return (
        len(s.launches),
        sum(ph.world_size for ph in s.launches),
        max(s.canonical_replicas(i) for i in range(len(s.launches))),
        *(ph.world_size for ph in s.launches),
        sum(
            len(ph.rank_faults)
            + len(ph.proxy_faults)
            + len(ph.store_faults)
            + len(ph.lags)
            + len(ph.child_faults)
            for ph in s.launches
        ),
        sum(ph.max_restarts + ph.hosts - 1 + ph.tp - 1 for ph in s.launches),
        sum(min(ph.steps, 100) for ph in s.launches),
        sum(len(ph.checkpoints) for ph in s.launches),
        sum(c.step + c.extra for ph in s.launches for c in ph.checkpoints),
        sum(src.rows() for src in s.data.sources),
        len(s.data.sources),
        s.data.microbatch,
        s.data.seed,
        stage_count(s.data.stages),
        int(s.pipeline.aggregation != "store"),
        int(s.pipeline.runner != "inline"),
        int(s.pipeline.mtp_mode),
        sum(ph.path != "standalone" for ph in s.launches),
        sum(ph.sync != "lockstep" for ph in s.launches),
        sum(ph.retry != "none" for ph in s.launches),
        sum(getattr(s.pipeline, name) != getattr(_PLAIN, name) for name in CODEC_OPTIONS),
        int(s.pipeline.mapping != "contiguous"),
        int(s.persist_format != "pickle"),
        sum(getattr(s.deployment, n) != getattr(DOWNSTREAM, n) for n in DEPLOYMENT_CHOICES),
    )


@dataclass
class Finding:
    signature: str
    tier: str
    scenario: Scenario
    report: str
    first_seen_s: float
    seen: int = 1
    label: FindingLabel = FindingLabel.UNCONFIRMED
    reruns: list[str] = field(default_factory=list)
    confirmed_on: dict[str, str] = field(default_factory=dict)
    """Other tiers it was replayed on: tier -> the signature seen there (or ``passed``)."""
    outcome: ScenarioOutcome | None = None
    files: list[Path] = field(default_factory=list)
    shrunk_s: float | None = None
    """When its shrinking ended (seconds into the exploration); None if the search's shrink
    allowance ran out first."""
    shrunk_on: str | None = None
    """The tier its minimal scenario was shrunk on: ``inproc`` for a torchrun finding that
    replays in process (confirmed on torchrun afterwards)."""

    def __post_init__(self) -> None:
        if self.harness:
            self.label = FindingLabel.HARNESS

    @property
    def known(self) -> bool:
        """Explained by what is known of Zephon: defects, or limitations only."""
        return self.signature.startswith(("known.", "limitation."))

    @property
    def hung(self) -> bool:
        """Its kept run has a launch that hung (to its deadline, or cut short as a known
        hang): each run of it costs a hang."""
        kept = self.outcome
        return kept is not None and any(run.result.timed_out for run in kept.phases)

    @property
    def limitation(self) -> bool:
        return self.signature.startswith("limitation.")

    @property
    def harness(self) -> bool:
        """The harness's own problem (its signature's area is ``harness``), never Zephon's."""
        return self.signature.split(".", 1)[0] == HARNESS_AREA

    @property
    def section(self) -> Section:
        """Harness problems and known defects apart; of the rest, flaky ones apart. A finding
        not (or not yet) rerun counts as a violation: nothing refuted it."""
        if self.harness:
            return Section.HARNESS
        if self.limitation:
            return Section.LIMITATION
        if self.known:
            return Section.KNOWN
        if self.label is FindingLabel.FLAKY:
            return Section.FLAKY
        return Section.VIOLATION

    def offer(self, scenario: Scenario, outcome: ScenarioOutcome) -> bool:
        """Count one more sighting; keep ``scenario`` if it is no larger. True if kept."""
        self.seen += 1
        if size_key(scenario) > size_key(self.scenario):
            return False
        self.scenario, self.report = scenario, evidence(outcome)
        self._replace_outcome(outcome)
        return True

    def _replace_outcome(self, outcome: ScenarioOutcome) -> None:
        old = self.outcome
        self.outcome = outcome
        if old is not None and old is not outcome:
            discard(old)

    def confirm(
        self,
        run: Callable[[Scenario], ScenarioOutcome | None],
        times: int = CONFIRM_RUNS,
    ) -> FindingLabel:
        """Rerun the minimal scenario ``times`` times: reproducible if every rerun fails alike,
        else flaky (the evidence stays the failing run's; the reruns' signatures are listed).

        ``run`` returns None when it could not finish (the budget ran out): unconfirmed,
        unless a rerun before it already failed otherwise or passed (then flaky: refuted).
        """
        self.reruns = []
        for _ in range(times):
            outcome = run(self.scenario)
            if outcome is None:
                refuted = any(s != self.signature for s in self.reruns)
                self.label = FindingLabel.FLAKY if refuted else FindingLabel.OUT_OF_TIME
                return self.label
            self.reruns.append(signature(outcome) or "passed")
            if self.reruns[-1] == self.signature:
                self.report = evidence(outcome)
                self._replace_outcome(outcome)
            else:
                discard(outcome)
        alike = all(s == self.signature for s in self.reruns)
        self.label = FindingLabel.REPRODUCIBLE if alike else FindingLabel.FLAKY
        return self.label

    def file_stem(self) -> str:
        return re.sub(r"[^\w.+-]+", "_", self.signature)[:120]

    def save(self, folder: Path, launch: LaunchLane = DEFAULT_LAUNCH_LANE) -> list[Path]:
        """Write the scenario, the evidence and the timeline; return the paths. The scenario
        records how it was found (its tier, ``launch``: the exploration's launch lane, its
        signature), which ``replay`` reruns by default."""
        folder.mkdir(parents=True, exist_ok=True)
        stem = self.file_stem()
        found = Found(tier=self.tier, launch=launch, signature=self.signature)
        scenario = self.scenario.with_(name=stem, found=found)
        json_path = scenario.save(folder / f"{stem}.json")
        text = folder / f"{stem}.txt"
        text.write_text(self.describe(json_path) + "\n")
        paths = [json_path, text]
        launches = launch_reports(self.outcome) if self.outcome is not None else ""
        if launches:
            paths.append(folder / f"{stem}.launches.txt")
            paths[-1].write_text(launches)
        from zephon_chaos.explore.picture import plot_timeline

        png = plot_timeline(scenario, folder / f"{stem}.png", self.outcome, title=self.signature)
        if png is not None:
            paths.append(png)
        self.files = paths
        return paths

    def describe(self, path: Path | None = None) -> str:
        lines = [
            f"finding {self.signature} ({self.label}, {self.tier} tier)",
            f"seen {self.seen} time(s), first after {self.first_seen_s:.0f}s of exploring"
            + (f", shrunk by {self.shrunk_s:.0f}s" if self.shrunk_s is not None else "")
            + (
                f" (shrunk in process, confirmed on {self.tier})"
                if self.shrunk_on is not None and self.shrunk_on != self.tier
                else ""
            ),
        ]
        if self.reruns:
            lines.append(f"confirmation reruns: {', '.join(self.reruns)}")
        for tier, result in self.confirmed_on.items():
            lines.append(f"replayed on the {tier} tier: {result}")
        if self.known:
            from zephon_chaos.explore.known import KNOWN_DEFECTS, KnownKind

            for d in KNOWN_DEFECTS:
                if d.id not in self.signature:
                    continue
                if d.kind is KnownKind.LIMITATION:
                    lines.append(f"known limitation {d.id}: {d.summary}")
                    lines.append(f"  consequence: {d.consequence}")
                    lines.append(f"  mitigation: {d.mitigation}")
                else:
                    lines.append(f"known defect {d.id}: {d.summary}")
        lines.append(f"minimal scenario: {self.scenario.summary()}")
        if path is not None:
            lines.append(f"replay: {replay_command(path, self.tier)}")
        lines += [EVIDENCE_SEPARATOR, self.report]
        return "\n".join(lines)


EVIDENCE_SEPARATOR = ""
"""In :meth:`Finding.describe`: the blank line between the finding's header (one line each)
and its evidence; :func:`evidence_of` splits there."""


def evidence_of(description: str) -> str:
    """The evidence part of a :meth:`Finding.describe` text (a finding's ``.txt`` file): what
    a merged report's finding carries, its header being remade from the merged facts."""
    return description.partition("\n" + EVIDENCE_SEPARATOR + "\n")[2].rstrip("\n")


LAUNCH_TAIL_LINES = 60
"""Lines of each rank's and agent's logs a finding's ``.launches.txt`` keeps."""


def evidence(outcome: ScenarioOutcome) -> str:
    """The outcome's report (without its working-copy replay line: that folder goes away),
    and the full summary of every failed launch (who failed how, stuck frames)."""
    lines = [ln for ln in outcome.report().splitlines() if not ln.startswith("replay: ")]
    for run in [outcome.reference, *outcome.phases]:
        if run is not None and not run.result.ok:
            lines += ["", f"launch {run.result.name}:", run.result.summary()]
            failure = run.result.first_failure
            if failure is not None and failure.traceback:
                lines += [f"rank {failure.rank} traceback:", failure.traceback.rstrip()]
    return "\n".join(lines)


def launch_reports(outcome: ScenarioOutcome, tail_lines: int = LAUNCH_TAIL_LINES) -> str:
    """Each failed launch's whole report: who failed how, the first failure's traceback,
    every rank's and agent's log tail, and every stack captured at a deadline or a hang's
    proof. The evidence keeps each process's innermost frame only, and a hang before any
    rank began (torch's own connect retries, logged on a rank's stderr) is triaged on the
    rest."""
    results = [run.result for run in [outcome.reference, *outcome.phases] if run is not None]
    parts = [
        f"=== launch {result.name} ===\n{result.report(tail_lines)}"
        for result in [*results, *outcome.unformed]
        if not result.ok
    ]
    return "\n\n".join(parts) + "\n" if parts else ""


def discard(outcome: ScenarioOutcome) -> None:
    """Remove a judged outcome's working files (data, records, checkpoints)."""
    if outcome.scenario_file is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(outcome.scenario_file.parent, ignore_errors=True)


def confirmation_order(findings: Iterable[Finding]) -> list[Finding]:
    """The order confirmation reruns go in: the findings that decide the exit status first
    (a known defect's label decides nothing), each group by first sighting. A budget that
    ends while known defects were rerun left a new finding "unconfirmed (out of time)", which
    counts as a violation even when its reruns would have passed."""
    return sorted(findings, key=lambda f: (f.known, f.first_seen_s))
