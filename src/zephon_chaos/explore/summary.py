"""What an exploration covered, and the markdown summary of its findings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zephon_chaos.dimensions.cells import Cell, Dim, Why
from zephon_chaos.explore.activity import Activity
from zephon_chaos.explore.budget import format_duration
from zephon_chaos.explore.codecov import MEASURE_EVERY, NotMeasured, ZephonCoverage
from zephon_chaos.explore.codecov import write_files as write_codecov
from zephon_chaos.explore.findings import Finding, Section
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.explore.liveness_table import LivenessTally
from zephon_chaos.explore.space import Declared, Space, declare
from zephon_chaos.explore.tiers import replay_command
from zephon_chaos.explore.unreached import Hole, explain
from zephon_chaos.harness_problem import HarnessGap
from zephon_chaos.problem import Area
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario


@dataclass
class Coverage:
    """Per tier, how many scenarios reached each cell of the declared scenario space (a
    scenario counts once per cell, :mod:`zephon_chaos.explore.space`), and Zephon's own code
    reached by the in-process tier (:mod:`zephon_chaos.explore.codecov`)."""

    counts: dict[str, Counter[Cell]] = field(default_factory=dict)
    spaces: dict[str, Space] = field(default_factory=dict)
    code: ZephonCoverage | None = None
    last: tuple[Scenario, frozenset[Cell]] | None = None
    """The scenario added last and its cells (what the search's steering scores)."""
    offered: dict[str, Counter[Cell]] = field(default_factory=dict)
    """Per tier, in how many aimed rounds each cell was among the aims (``explore.steer``)."""

    def declare(self, space: Space) -> None:
        self.spaces.setdefault(space.tier, space)

    def add(
        self, scenario: Scenario, outcome: ScenarioOutcome | None, tier: str = "inproc"
    ) -> None:
        cells = frozenset(cells_of(scenario, outcome))
        self.counts.setdefault(tier, Counter()).update(cells)
        self.last = (scenario, cells)
        if self.code is not None:
            self.code.saw_scenario()

    def offer(self, tier: str, cells: Iterable[Cell]) -> None:
        """One aimed round of ``tier`` aims at ``cells``."""
        self.offered.setdefault(tier, Counter()).update(set(cells))

    def combined(self) -> Counter[Cell]:
        """Scenarios per cell, over every tier."""
        total: Counter[Cell] = Counter()
        for counts in self.counts.values():
            total.update(counts)
        return total

    def holes(self, max_world: int = 4) -> tuple[list[Hole], int]:
        """Over every tier: the cells some tier can reach that none reached, each with why
        (``explore.unreached``), and how many cells some tier can reach (what the acceptance
        of a run's coverage counts)."""
        tiers = list(self.counts or self.spaces)
        reachable: dict[Cell, list[str]] = {}
        for tier in tiers:
            for d in self.space(tier, max_world).cells:
                if d.why_not is None:
                    reachable.setdefault(d.cell, []).append(tier)
        total = self.combined()
        holes = [
            explain(c, tuple(by), sum(self.offered.get(t, Counter())[c] for t in by))
            for c, by in reachable.items()
            if not total.get(c)
        ]
        return holes, len(reachable)

    def code_coverage(self) -> ZephonCoverage:
        if self.code is None:
            self.code = ZephonCoverage()
        return self.code

    def space(self, tier: str, max_world: int) -> Space:
        """The declared space of ``tier``; the strategies' defaults where none was declared."""
        return self.spaces.get(tier) or declare(tier, max_world=max_world)

    def table(self, tier: str, max_world: int = 4) -> list[tuple[Declared, int]]:
        """Every declared cell of ``tier`` with its count, in declaration order."""
        counts = self.counts.get(tier, Counter())
        return [(d, counts.get(d.cell, 0)) for d in self.space(tier, max_world).cells]

    def outside(self, tier: str, max_world: int = 4) -> list[tuple[Cell, int]]:
        """Cells reached that the declared space lacks: the space lags the strategies."""
        space = self.space(tier, max_world)
        return sorted(
            ((c, n) for c, n in self.counts.get(tier, Counter()).items() if c not in space),
            key=lambda cn: (cn[0].dim.name, cn[0].value),
        )

    def section(self, report_dir: Path, max_world: int) -> list[str]:
        """The summary's coverage section; writes Zephon's code reach next to it."""
        lines = ["", "## Coverage"]
        tiers = list(self.counts or self.spaces)
        if len(tiers) > 1:
            lines += self.holes_section(max_world)
        for tier in tiers:
            lines += self.tier_section(tier, max_world)
        lines += self._code_section(report_dir)
        return lines

    def holes_section(self, max_world: int) -> list[str]:
        holes, reachable = self.holes(max_world)
        lines = [
            "",
            f"### All tiers: {reachable - len(holes)} of {reachable} cells some tier can reach "
            f"were reached; {len(holes)} never",
        ]
        if holes:
            lines += ["", "| dimension | cell never reached by any tier | reachable by | why |"]
            lines.append("|---|---|---|---|")
            lines += [
                f"| {h.cell.dim.value} | {h.cell.label()} | {', '.join(h.tiers)} | {h.reason()} |"
                for h in holes
            ]
        return lines

    def tier_section(self, tier: str, max_world: int) -> list[str]:
        rows = self.table(tier, max_world)
        reachable = [(d, n) for d, n in rows if d.why_not is None]
        reached = sum(1 for _, n in reachable if n)
        space = self.space(tier, max_world)
        lines = [
            "",
            f"### {tier}: {reached} of {len(reachable)} reachable cells reached "
            f"(world sizes 1..{space.max_world}, up to {space.max_phases} launches"
            + (", store faults" if space.store_faults else "")
            + f"); {len(rows) - len(reachable)} cells unreachable by design",
            "",
            "| dimension | cell | scenarios |",
            "|---|---|---|",
        ]
        lines += [
            f"| {d.cell.dim.value} | {d.cell.label()} | {n if n else NEVER} |" for d, n in reachable
        ]
        unreachable: dict[tuple[Dim, Why], list[Cell]] = {}
        for d, _ in rows:
            if d.why_not is not None:
                unreachable.setdefault((d.cell.dim, d.why_not), []).append(d.cell)
        if unreachable:
            lines += ["", "Unreachable by design:", "", "| dimension | cells | why |"]
            lines.append("|---|---|---|")
            for (dim, why), cells in unreachable.items():
                shown = "; ".join(c.label() for c in cells[:UNREACHABLE_SHOWN])
                more = len(cells) - UNREACHABLE_SHOWN
                shown += f"; and {more} more" if more > 0 else ""
                lines.append(f"| {dim.value} | {shown} | {why.value} |")
        outside = self.outside(tier, max_world)
        if outside:
            lines += ["", "Reached, yet outside the declared space (explore/space.py lags):", ""]
            lines += [f"- {c.dim.value}: {c.label()} ({n})" for c, n in outside]
        return lines

    def _code_section(self, report_dir: Path) -> list[str]:
        code = self.code
        lines = ["", "### Zephon's code reached", ""]
        if code is None or code.seen == 0:
            why = code.skipped if code is not None and code.skipped else NotMeasured.NO_INPROC
            return [*lines, f"Not measured: {why.value}."]
        reach = code.reach()
        if reach is None:
            return [*lines, f"Not measured: {(code.skipped or NotMeasured.NO_INPROC).value}."]
        json_path, csv_path = write_codecov(reach, report_dir)
        lines += [
            f"Measured with coverage.py: {reach.scenarios} of the {code.seen} scenarios of the "
            f"in-process search (one in {MEASURE_EVERY}). Files: "
            f"[{json_path.name}]({json_path.name}), [{csv_path.name}]({csv_path.name}).",
            "",
            "| module | lines | branches | functions never reached |",
            "|---|---|---|---|",
        ]
        for m in reach.modules:
            lines.append(
                f"| `{m.module}` | {_share(m.lines_hit, m.lines)} | "
                f"{_share(m.branches_hit, m.branches)} | {len(m.never)} |"
            )
        for m in reach.modules:
            if m.never:
                names = ", ".join(f"`{n}`" for n in m.never)
                lines += ["", f"Never reached in `{m.module}`: {names}"]
        return lines


NEVER = "**never**"
UNREACHABLE_SHOWN = 6
"""Unreachable cells listed by name per (dimension, reason); the rest are counted."""


def _share(hit: int, total: int) -> str:
    return f"{hit}/{total} ({100 * hit / total:.0f}%)" if total else "0/0"


@dataclass
class TierStats:
    tier: str
    scenarios: int = 0
    """Runs on this tier during its search: new scenarios and shrinking candidates."""
    seconds: float = 0.0
    """The tier's search time: searching, shrinking and the confirmations shrinking needs."""
    refused: int = 0
    new_scenarios: int = 0
    """Scenarios Hypothesis generated (the rest of ``scenarios`` were shrinking's)."""
    search_s: float = 0.0
    """Seconds generating new scenarios (Hypothesis's generate phase)."""
    shrink_s: float = 0.0
    """Seconds shrinking (Hypothesis's shrink phase, then polishing), on either runner."""
    confirm_s: float = 0.0
    """Seconds confirming minimal scenarios on this tier, during the search and after it."""
    in_process_runs: int = 0
    """Shrinking candidates of this tier's findings run in process, not counted above."""
    shrunk_in_process: int = 0
    """Findings of this tier shrunk in process, then confirmed on this tier."""
    aimed_s: float = 0.0
    """Seconds of ``search_s`` in rounds aimed at fault cells no tier reached yet."""
    aimed_rounds: int = 0

    @property
    def rate(self) -> float:
        return 60.0 * self.scenarios / self.seconds if self.seconds > 0 else 0.0

    @property
    def search_share(self) -> float:
        """The share of the search time that went to new scenarios."""
        spent = self.search_s + self.shrink_s
        return self.search_s / spent if spent > 0 else 1.0

    def charge(self, activity: Activity, seconds: float) -> None:
        if activity is Activity.SEARCH:
            self.search_s += seconds
        elif activity is Activity.SHRINK:
            self.shrink_s += seconds
        else:
            self.confirm_s += seconds

    def summary_lines(self) -> list[str]:
        """The tier's two lines in a summary: its pace, then where its time went (a run's own
        summary and the merged one alike)."""
        return [
            f"- {self.tier}: {self.scenarios} scenarios in {format_duration(self.seconds)} "
            f"({self.rate:.1f}/min)",
            f"- {self.tier} time: {self.time_line()}",
        ]

    def time_line(self) -> str:
        """Where the tier's time went, for the summary."""
        in_process = (
            f"; {self.in_process_runs} runs in process, {self.shrunk_in_process} finding(s) "
            "shrunk in process"
            if self.in_process_runs or self.shrunk_in_process
            else ""
        )
        aimed = (
            f"; {format_duration(self.aimed_s)} in {self.aimed_rounds} round(s) aimed at "
            "unreached fault cells"
            if self.aimed_rounds
            else ""
        )
        return (
            f"searching {format_duration(self.search_s)} ({self.new_scenarios} new scenarios, "
            f"{100 * self.search_share:.0f}% of searching and shrinking{aimed}), shrinking "
            f"{format_duration(self.shrink_s)}{in_process}, confirming "
            f"{format_duration(self.confirm_s)}"
        )


@dataclass
class ExploreResult:
    report_dir: Path
    budget_s: float
    tier: str
    seed: int
    max_world: int
    plant: str | None
    shard: str | None = None
    """``i/n`` when this run is one shard of a run split across runners."""
    database: str | None = None
    """The example database shared with other runs (a URL's password hidden), if any."""
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
    Section.LIMITATION: "Documented limitations of Zephon that a default recipe meets, each "
    "with its consequence and the recipe-side mitigation: they do not fail `explore`.",
}


def section_head(section: Section, count: int, columns: Sequence[str]) -> list[str]:
    """A findings section's heading, meaning and table header: a run's summary and the merged
    one (``explore.merge``) open their sections alike."""
    return [
        "",
        f"## {section.value} ({count})",
        "",
        SECTION_MEANING[section],
        "",
        f"| {' | '.join(columns)} |",
        "|" + "---|" * len(columns),
    ]


def _findings_section(result: ExploreResult, section: Section) -> list[str]:
    """One kind of finding: what it means, a table, then each finding's files and evidence."""
    found = result.in_section(section)
    if not found:
        return []
    lines = section_head(
        section, len(found), ("signature", "label", "tier", "seen", "minimal scenario")
    )
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


def setting_lines(plant: str | None, database: str | None, *, shared: str) -> list[str]:
    """A summary's lines for the example database and the self-test's planted defect."""
    lines = [f"- example database shared {shared}: `{database}`"] if database else []
    if plant:
        lines.append(f"- self-test: every scenario carries the planted defect `{plant}`")
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
    if result.shard:
        lines.append(f"- shard {result.shard} (`zephon-chaos report merge` joins the shards)")
    lines += setting_lines(result.plant, result.database, shared="with other runs")
    for t in result.tiers.values():
        lines += t.summary_lines()
    lines += [f"- note: {n}" for n in result.notes]
    if not result.findings:
        lines += ["", "## Findings (0)", ""]
        lines.append("None: every scenario run met the oracles (see the coverage below).")
    for section in Section:
        lines += _findings_section(result, section)
    lines += result.coverage.section(result.report_dir, result.max_world)
    if result.timeline is not None:
        rel = result.timeline.relative_to(result.report_dir)
        lines += ["", "## Timeline", "", f"![timeline]({rel})"]
    lines += result.liveness.section()
    lines += [
        "",
        "## Signatures",
        "",
        "`<area>.<kind>.<topology>.<window>`: the oracle or step that failed (in order of "
        f"precedence: {', '.join(a.value for a in Area)}), "
        "the kind of problem, whether a restore changed the world size, and "
        "whether a restored checkpoint was mid-window. One finding per signature; its "
        "smallest scenario is kept. "
        "`known.<id>`: only a known defect of Zephon is involved. "
        "`limitation.<id>`: only a documented limitation a recipe meets. "
        "`harness.<kind>`: the harness raised (the exception's type), could not describe a "
        "failure, or a fault did not act ("
        + ", ".join(f"`{gap.value}`" for gap in HarnessGap)
        + ").",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
