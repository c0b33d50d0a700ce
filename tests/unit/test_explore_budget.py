"""The explorer's budget: shrinking is paid for by searching, torchrun findings that replay in
process shrink in process, and summary.json says where the time went."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from zephon_chaos.explore import search
from zephon_chaos.explore.activity import Activity, ActivityClock, shrink_allowance_s
from zephon_chaos.explore.config import SEARCH_SHARE
from zephon_chaos.explore.findings import Finding
from zephon_chaos.explore.search import ExploreConfig, Explorer
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.summary import ExploreResult, TierStats, write_summary
from zephon_chaos.explore.summary_json import SummaryError, read_summary_json
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario
from zephon_chaos.strategies import scenarios

PLANT = "skip_after_midwindow_resize"
PLANT_SIGNATURE = "batches-mid-window.missing.resized.mid-window"
REPO = Path(__file__).resolve().parents[2]

# ---- the clock and the allowance -------------------------------------------------------


def test_the_clock_charges_every_moment_once_to_the_activity_switched_from() -> None:
    stats = TierStats("torchrun")
    clock = ActivityClock()
    began = clock.switch(stats, Activity.SEARCH)
    clock.switch(stats, Activity.SHRINK)
    with clock.during(stats, Activity.CONFIRM):
        clock.flush()
    assert clock.activity is Activity.SHRINK
    ended = clock.stop()
    assert stats.search_s > 0 and stats.shrink_s > 0 and stats.confirm_s > 0
    total = stats.search_s + stats.shrink_s + stats.confirm_s
    assert total == pytest.approx(ended - began, abs=1e-9)


@pytest.mark.parametrize(
    ("search_s", "spent_s", "share", "left"),
    [(70.0, 0.0, 0.7, 30.0), (70.0, 30.0, 0.7, 0.0), (10.0, 12.0, 0.5, -2.0), (5.0, 0.0, 1.0, 0.0)],
)
def test_the_allowance_keeps_the_share_for_new_scenarios(
    search_s: float, spent_s: float, share: float, left: float
) -> None:
    assert shrink_allowance_s(search_s, spent_s, share) == pytest.approx(left)


def test_a_share_outside_its_range_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="search share 0"):
        shrink_allowance_s(1.0, 0.0, 0.0)


# ---- a search whose scenarios fail often: fakes that judge without launching ------------

KINDS = (
    ProblemKind.DIFFERS,
    ProblemKind.COVERAGE,
    ProblemKind.MISSING_RECORD,
    ProblemKind.SPURIOUS_WARNING,
)
RUN_S = {"torchrun": 0.03, "inproc": 0.003}
"""What one fake run takes: stands for a launch's duration, so shrinking costs time."""


def kind_of(scenario: Scenario) -> int | None:
    """Fails when the first launch checkpoints; the kind of failure by the number of launches
    (so shrinking cannot turn one kind into another by dropping launches)."""
    if not scenario.launches[0].checkpoints:
        return None
    return (len(scenario.launches) - 1) % len(KINDS)


class FakeRunner(ScenarioRunner):
    """Judges a scenario by ``fails`` instead of launching it; records what it ran."""

    def __init__(self, root: Path, tier: str, fails: Callable[[Scenario], int | None]) -> None:
        super().__init__(root)
        self.tier = tier
        self.fails = fails
        self.ran: list[tuple[float, Scenario]] = []

    def run(self, scenario: Scenario) -> ScenarioOutcome:
        self.ran.append((time.monotonic(), scenario))
        time.sleep(RUN_S[self.tier])  # the run's duration, not a synchronization
        kind = self.fails(scenario)
        if kind is None:
            return ScenarioOutcome(scenario, None)
        problem = Problem(Area.CHECKPOINT, KINDS[kind], f"checkpoint 0: {KINDS[kind]}")
        return ScenarioOutcome(scenario, None, problems=[problem.in_phase(0)])


def in_process_kind(scenario: Scenario) -> int | None:
    """In process only the first two kinds fail alike: the others shrink on torchrun."""
    kind = kind_of(scenario)
    return kind if kind in (0, 1) else None


FAKE_BUDGET_S = 15


@pytest.fixture(scope="module")
def fake_search(tmp_path_factory: pytest.TempPathFactory) -> tuple[Explorer, dict[str, FakeRunner]]:
    """A 15 s torchrun-tier exploration whose scenarios fail in four ways, often."""
    root = tmp_path_factory.mktemp("fake-search")
    explorer = Explorer(
        ExploreConfig(
            budget_s=FAKE_BUDGET_S,
            report_dir=root / "report",
            tier="torchrun",
            seed=5,
            max_world=3,
            max_phases=4,
            confirm_runs=1,
        )
    )
    fakes = {
        "torchrun": FakeRunner(root / "torchrun", "torchrun", kind_of),
        "inproc": FakeRunner(root / "inproc", "inproc", in_process_kind),
    }
    explorer.runners.update(fakes)
    explorer.run()
    return explorer, fakes


def test_shrinking_stays_within_its_allowance_and_the_search_goes_on(
    fake_search: tuple[Explorer, dict[str, FakeRunner]],
) -> None:
    explorer, fakes = fake_search
    stats = explorer.result.tiers["torchrun"]
    share = SEARCH_SHARE["torchrun"]
    assert len(explorer.result.findings) >= 2, [f.signature for f in explorer.result.findings]
    assert stats.shrink_s > 0 and stats.scenarios > stats.new_scenarios
    # Unbounded, Hypothesis alone would shrink each finding for up to SHRINK_S (60 s).
    slack = 1.0  # one run past the estimate, and Hypothesis's overhead around it
    assert stats.shrink_s <= stats.search_s * (1 - share) / share + slack
    assert stats.search_share >= share - slack / (stats.search_s + stats.shrink_s)
    # The search kept generating after its first finding: new scenarios in its last quarter.
    first = min(f.first_seen_s for f in explorer.result.findings) + explorer.state.started
    search_end = explorer.state.started + stats.seconds
    assert first < search_end - 0.25 * stats.seconds
    late = [t for t, _ in fakes["torchrun"].ran if t > search_end - 0.25 * stats.seconds]
    assert late, "no scenario ran in the last quarter of the search"
    assert stats.search_s + stats.shrink_s <= stats.seconds + 1e-6


def test_findings_that_replay_in_process_shrink_there_and_the_others_on_torchrun(
    fake_search: tuple[Explorer, dict[str, FakeRunner]],
) -> None:
    explorer, fakes = fake_search
    stats = explorer.result.tiers["torchrun"]
    routed = [f for f in explorer.result.findings if f.shrunk_on is not None]
    assert routed
    for f in routed:
        kind = KINDS.index(next(k for k in KINDS if f.signature.startswith(f"checkpoint.{k}.")))
        if f.shrunk_on == "inproc":
            assert kind in (0, 1), f.signature
            # Confirmed on torchrun: the torchrun runner ran its minimal scenario.
            assert any(s == f.scenario for _, s in fakes["torchrun"].ran), f.signature
        else:
            assert f.shrunk_on == "torchrun"
    if any(f.shrunk_on == "inproc" for f in routed):
        assert stats.in_process_runs > 0 and stats.shrunk_in_process >= 1
        assert len(fakes["inproc"].ran) >= stats.in_process_runs


def test_summary_json_holds_the_findings_and_where_each_tiers_time_went(
    fake_search: tuple[Explorer, dict[str, FakeRunner]],
) -> None:
    explorer, _ = fake_search
    result = explorer.result
    facts = read_summary_json(result.report_dir / "summary.json")
    assert facts.tier == "torchrun" and facts.seed == 5 and facts.budget_s == FAKE_BUDGET_S
    assert [f.signature for f in facts.findings] == [f.signature for f in result.findings]
    for fact, finding in zip(facts.findings, result.findings, strict=True):
        assert fact.first_seen_s == pytest.approx(finding.first_seen_s, abs=1e-3)
        assert (fact.seen, fact.label, fact.tier) == (finding.seen, finding.label, finding.tier)
        assert fact.shrunk_on == finding.shrunk_on
        assert fact.scenario_file is not None
        assert (result.report_dir / fact.scenario_file).is_file()
    stats, tier = result.tiers["torchrun"], facts.tiers["torchrun"]
    assert tier.new_scenarios == stats.new_scenarios and tier.scenarios == stats.scenarios
    assert tier.search_s == pytest.approx(stats.search_s, abs=1e-3)
    assert tier.shrink_s == pytest.approx(stats.shrink_s, abs=1e-3)
    assert tier.confirm_s == pytest.approx(stats.confirm_s, abs=1e-3) and tier.confirm_s > 0
    summary = (result.report_dir / "summary.md").read_text()
    assert f"- torchrun time: {stats.time_line()}" in summary


def test_a_summary_json_of_another_version_is_refused_naming_it(tmp_path: Path) -> None:
    result = ExploreResult(tmp_path, 60.0, "inproc", 1, 2, None)
    write_summary(result)
    from zephon_chaos.explore.summary_json import write_summary_json

    path = write_summary_json(result)
    assert read_summary_json(path).findings == []
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "version": 99}))
    with pytest.raises(SummaryError, match="version 99"):
        read_summary_json(path)


# ---- a torchrun finding that replays in process: shrunk there, confirmed on torchrun ------


class ThreadsForTorchrun:
    """Stands in for the torchrun runner with rank threads, so the planted defect's finding
    is a torchrun finding found in seconds; records what it ran, its signature, and what the
    explorer's clock charged meanwhile."""

    def __init__(self, root: Path, passes: Callable[[Scenario], bool] = lambda s: False) -> None:
        self.runner = inproc_runner(root)
        self.ran: list[tuple[Scenario, str | None, Activity | None]] = []
        self.passes = passes
        self.activity: Callable[[], Activity | None] = lambda: None
        run = self.runner.run

        def recording(scenario: Scenario) -> ScenarioOutcome:
            activity = self.activity()
            outcome = ScenarioOutcome(scenario, None) if self.passes(scenario) else run(scenario)
            self.ran.append((scenario, signature(outcome), activity))
            return outcome

        self.runner.run = recording  # type: ignore[method-assign]


def _planted_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torchrun: ThreadsForTorchrun
) -> Explorer:
    # The torchrun tier's strategies would draw what threads refuse (signals, launch paths).
    monkeypatch.setattr(
        search, "scenarios", lambda **kw: scenarios(**{**kw, "tier": "inproc"})
    )

    def shrunk(findings: dict[str, Finding]) -> bool:
        found = findings.get(PLANT_SIGNATURE)
        return found is not None and found.shrunk_s is not None

    explorer = Explorer(
        ExploreConfig(
            budget_s=300,
            report_dir=tmp_path / "report",
            tier="torchrun",
            seed=3,
            max_world=3,
            max_phases=3,
            plant=PLANT,
            search_share=0.3,  # the allowance is not what this test is about
            stop_when=shrunk,
        )
    )
    explorer.runners["torchrun"] = torchrun.runner
    torchrun.activity = lambda: explorer.state.clock.activity
    explorer.run()
    return explorer


@pytest.mark.slow  # a search of its own: tens of seconds
def test_a_torchrun_finding_that_replays_in_process_is_shrunk_there_then_confirmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torchrun = ThreadsForTorchrun(tmp_path / "torchrun")
    explorer = _planted_search(tmp_path, monkeypatch, torchrun)
    finding = next(f for f in explorer.result.findings if f.signature == PLANT_SIGNATURE)
    stats = explorer.result.tiers["torchrun"]
    assert finding.tier == "torchrun" and finding.shrunk_on == "inproc"
    minimal = finding.scenario
    # The plant's minimum: a resize from one rank to two (C depends on the path shrinking
    # took: 2 or 3 lanes resume mid-window alike).
    assert [ph.world_size for ph in minimal.launches] == [1, 2], minimal.summary()
    assert stats.shrunk_in_process >= 1
    # Shrinking ran in process only (every scenario here is expressible there); torchrun ran
    # the minimal scenario to confirm it: once after shrinking, then the two reruns.
    assert stats.in_process_runs > 10
    assert [a for _, _, a in torchrun.ran if a is Activity.SHRINK] == []
    confirmed = [sig for s, sig, a in torchrun.ran if s == minimal and a is Activity.CONFIRM]
    assert confirmed == [PLANT_SIGNATURE] * 3, confirmed
    assert finding.label == "reproducible"


@pytest.mark.slow  # a search of its own: tens of seconds
def test_a_minimum_found_in_process_that_passes_on_torchrun_goes_back_to_torchrun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planted defect's true minimum passes on this 'torchrun': the finding keeps a
    scenario that fails there, shrunk on torchrun."""

    def true_minimum(s: Scenario) -> bool:
        return [ph.world_size for ph in s.launches] == [1, 2]

    torchrun = ThreadsForTorchrun(tmp_path / "torchrun", passes=true_minimum)
    explorer = _planted_search(tmp_path, monkeypatch, torchrun)
    finding = next(f for f in explorer.result.findings if f.signature == PLANT_SIGNATURE)
    notes = explorer.result.notes
    assert finding.shrunk_s is not None
    if finding.tier == "torchrun":
        # First seen on torchrun: back to its smallest torchrun failure, shrunk on torchrun.
        assert finding.shrunk_on == "torchrun"
        assert not true_minimum(finding.scenario), finding.scenario.summary()
        assert any(s == finding.scenario and sig == PLANT_SIGNATURE for s, sig, _ in torchrun.ran)
        assert any(f"{PLANT_SIGNATURE}: its minimal scenario shrunk in process did not fail "
                   "alike on torchrun (passed)" in n for n in notes), notes
        assert any(a is Activity.SHRINK for _, _, a in torchrun.ran)
    else:
        # First seen in process while another finding shrank there: no torchrun failure of
        # its own to go back to, so it is reported as what it is, an in-process finding.
        assert (finding.tier, finding.shrunk_on) == ("inproc", "inproc")
        assert true_minimum(finding.scenario), finding.scenario.summary()
        assert any(f"{PLANT_SIGNATURE}: first seen in process" in n for n in notes), notes


# ---- the benchmark -------------------------------------------------------------------------


@pytest.mark.slow
def test_time_to_find_reports_when_each_seed_first_saw_the_plant(tmp_path: Path) -> None:
    """``skip_sample`` breaks every resume, so one short seed surely sees it."""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "time_to_find.py"),
            "--seeds", "1", "--first-seed", "3", "--budget", "40s", "--plant", "skip_sample",
            "--json", str(out), "--", "--tier", "inproc", "--max-world", "2",
            "--max-phases", "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    [run] = doc["runs"]
    assert run["exit_code"] in (0, 1) and run["problem"] is None and run["leftovers"] == 0
    rows = [r for r in doc["time_to_find"] if r["plant"] == "skip_sample"]
    assert rows, proc.stdout
    first = min(rows, key=lambda r: r["median_s"])
    assert first["found"] == 1 and first["seeds"] == 1
    assert 0 < first["median_s"] < 40
    assert first["signature"] in proc.stdout
