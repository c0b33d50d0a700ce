"""Exploration across runners: shards draw apart, a shared example database replays one
runner's failures first on the others, and the shards' reports merge into one."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import Phase as HypothesisPhase
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    InMemoryExampleDatabase,
    MultiplexedDatabase,
    _hash,
    choices_from_bytes,
)

from zephon_chaos import cli
from zephon_chaos.dimensions.cells import Dim, cell
from zephon_chaos.explore.config import BOTH_INPROC_SHARE, reserve_s
from zephon_chaos.explore.database import (
    DatabaseError,
    KeepKnown,
    PinnedKey,
    SearchKey,
    database_key,
    open_database,
    shown,
)
from zephon_chaos.explore.findings import Finding, FindingLabel
from zephon_chaos.explore.judged import EndShrinking, ShrinkStop
from zephon_chaos.explore.merge import MergeError, merge, read_reports, write_merged
from zephon_chaos.explore.search import ExploreConfig, Explorer
from zephon_chaos.explore.shard import Shard, round_seed, tier_order
from zephon_chaos.explore.space import declare
from zephon_chaos.explore.steer import RoundSteering
from zephon_chaos.explore.summary import Coverage
from zephon_chaos.explore.summary_json import (
    CellFacts,
    CoverageFacts,
    FindingFacts,
    SummaryFacts,
    TierFacts,
    read_summary_json,
    write_facts,
)
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

# ---- shards ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "shard"), [("1/1", Shard(1, 1)), (" 2 / 4 ", Shard(2, 4))])
def test_a_shard_is_i_of_n(text: str, shard: Shard) -> None:
    assert Shard.parse(text) == shard
    assert str(shard) == text.replace(" ", "")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shard", "3/2"], "--shard 3/2 is no shard: write i/n with 1 <= i <= n"),
        (["--shard", "0/4"], "--shard 0/4 is no shard"),
        (["--shard", "two"], "--shard 'two' is not i/n"),
        (["--database", "unix:///nonexistent/redis.sock"], "cannot reach the Redis server"),
    ],
    ids=["i-above-n", "zero", "not-a-fraction", "unreachable-redis"],
)
def test_bad_shard_and_database_flags_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    if "--database" in argv:
        pytest.importorskip("redis", reason="the redis package is missing")
    code = cli.main(["explore", *argv, "--budget", "5", "--report", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err


def test_a_redis_database_without_the_redis_package_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis raises ImportError
    with pytest.raises(DatabaseError, match=r"pip install 'zephon-chaos\[shard\]'"):
        open_database("redis://127.0.0.1:6379/0", tmp_path)


def test_no_two_shards_of_a_run_share_a_round_seed() -> None:
    for n in range(1, 9):
        seeds = [
            round_seed(42, Shard(i, n), r, tier)
            for i in range(1, n + 1)
            for r in range(1, 61)
            for tier in ("inproc", "torchrun")
        ]
        assert len(set(seeds)) == len(seeds), n
    # Shard 1/1 is the unsharded search: a seed's runs stay what they were.
    assert [round_seed(5, Shard(), r, "torchrun") for r in (1, 2)] == [
        5 * 1_000_003 + 7 + 1,
        5 * 1_000_003 + 14 + 1,
    ]


# ---- the database spec -----------------------------------------------------------------


def test_database_specs_open_what_they_name(tmp_path: Path) -> None:
    assert open_database(None, tmp_path) is None
    assert open_database("none", tmp_path) is None
    folder = tmp_path / "db"
    db = open_database(str(folder), tmp_path)
    assert isinstance(db, DirectoryBasedExampleDatabase) and folder.is_dir()
    shared = open_database("github-artifact:owner/repo", tmp_path / "report")
    assert isinstance(shared, MultiplexedDatabase)  # nothing fetched until a round reads it
    assert (tmp_path / "report" / "example-db").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(DatabaseError, match="exists and is not a directory"):
        open_database(str(tmp_path / "file"), tmp_path)
    with pytest.raises(DatabaseError, match="OWNER/REPO"):
        open_database("github-artifact:no-repo", tmp_path)
    assert shown("redis://user:secret@host:6379/0") == "redis://user:***@host:6379/0"
    assert "secret" not in shown("redis://:secret@host/0")


def test_the_database_key_names_the_strategy_not_the_round() -> None:
    base = SearchKey("inproc", 3, 3, None, False, "default")
    assert database_key(base) == database_key(SearchKey("inproc", 3, 3, None, False, "default"))
    others = [
        SearchKey("torchrun", 3, 3, None, False, "default"),
        SearchKey("inproc", 3, 3, "skip_sample", False, "default"),
        SearchKey("inproc", 4, 3, None, False, "default"),
    ]
    assert len({database_key(k) for k in [base, *others]}) == 4


# ---- sharing failures through a database, with runs judged without launching -----------

PROBLEM = Problem(
    Area.CHECKPOINT,
    ProblemKind.MISSING_RECORD,
    "checkpoint 0 has no record from ranks [1]",
    checkpoint=0,
).in_phase(0)
PROBLEM_SIGNATURE = "checkpoint.missing-record.no-resume.no-resume"


class Judging(ScenarioRunner):
    """Judges a scenario by ``fails`` instead of launching it; records what it ran."""

    def __init__(self, root: Path, fails: Callable[[Scenario], bool]) -> None:
        super().__init__(root)
        self.fails = fails
        self.ran: list[tuple[Scenario, bool]] = []

    def run(self, scenario: Scenario) -> ScenarioOutcome:
        failed = self.fails(scenario)
        self.ran.append((scenario, failed))
        return ScenarioOutcome(scenario, None, problems=[PROBLEM] if failed else [])


def _mid_window(s: Scenario) -> bool:
    return any(c.extra for ph in s.launches for c in ph.checkpoints)


def _judged_explorer(
    root: Path, shard: Shard, database: str, budget_s: float, stop: bool
) -> tuple[Explorer, Judging]:
    explorer = Explorer(
        ExploreConfig(
            budget_s=budget_s,
            report_dir=root / f"report-{shard.index}",
            tier="inproc",
            seed=11,
            max_world=3,
            max_phases=3,
            confirm_runs=1,
            shard=shard,
            database=database,
            stop_when=(lambda found: PROBLEM_SIGNATURE in found) if stop else None,
        )
    )
    runner = Judging(root / f"runs-{shard.index}", _mid_window)
    explorer.runners["inproc"] = runner
    return explorer, runner


def test_a_failure_saved_by_one_shard_is_the_first_scenario_another_runs(tmp_path: Path) -> None:
    """Shard 1 explores past its finding (later rounds replay it as already held: it must stay
    in the database); shard 2 then runs the saved failure before anything it generates."""
    db = tmp_path / "db"
    first, ran_first = _judged_explorer(tmp_path, Shard(1, 2), str(db), 6, stop=False)
    rounds: list[int] = []
    real_round = first._round
    first._round = lambda *a: (rounds.append(1), real_round(*a))[1]  # type: ignore[method-assign]
    first.run()
    assert PROBLEM_SIGNATURE in first.findings and len(rounds) >= 2, rounds
    primary = db / _hash(first._database_key("inproc"))
    assert primary.is_dir() and any(primary.iterdir()), "the held failure left the database"
    failing = [s for s, failed in ran_first.ran if failed]

    second, ran_second = _judged_explorer(tmp_path, Shard(2, 2), str(db), 6, stop=True)
    second.run()
    first_run, failed = ran_second.ran[0]
    assert failed, "shard 2's first scenario passed: it was not the saved failure"
    assert first_run in failing
    found = second.findings[PROBLEM_SIGNATURE]
    assert found.first_seen_s < 2.0
    summary = (tmp_path / "report-2" / "summary.md").read_text()
    assert "- shard 2/2 " in summary and f"`{db}`" in summary
    assert read_summary_json(tmp_path / "report-2" / "summary.json").shard == "2/2"


@pytest.mark.parametrize("guarded", [False, True])
def test_a_shrink_candidate_ended_unrun_is_not_saved(guarded: bool) -> None:
    """Hypothesis saves the example of any call that raises a BaseException; the explorer ends
    a round's shrinking so, on a candidate it never ran. Unguarded (as Hypothesis does it),
    that candidate lands beside the failure; the round's view drops it."""
    db = KeepKnown(InMemoryExampleDatabase())
    failing: list[int] = []

    @settings(
        database=PinnedKey(db, b"k"),
        phases=[HypothesisPhase.generate, HypothesisPhase.shrink],
        report_multiple_bugs=False,
    )
    @seed(0)
    @given(st.integers(0, 10**6))
    def prop(x: int) -> None:
        db.keep, db.save_ok = False, True
        if failing and x != failing[0]:
            if guarded:
                db.keep, db.save_ok = True, False
            raise EndShrinking(ShrinkStop.BOUND)
        if x > 1000:
            failing.append(x)
            raise AssertionError(x)

    with pytest.raises(EndShrinking):
        prop()
    saved = {choices_from_bytes(b) for b in db.fetch(b"k")}
    assert ((failing[0],) in saved) and (saved == {(failing[0],)}) is guarded, saved


def test_every_key_hypothesis_derives_lands_under_the_pinned_one() -> None:
    """Hypothesis keys a property by a digest of its source; the rounds' properties are one
    nested function, so without the pin two explorers on different commits (or two tiers)
    would mix or miss each other's failures. Its sub-keys stay apart under the pin."""
    inner = InMemoryExampleDatabase()
    db = PinnedKey(inner, b"pin")
    digest = bytes(range(48))
    db.save(digest, b"a")
    db.save(digest + b".secondary", b"b")
    db.save(digest + b".pareto", b"c")
    db.move(digest, digest + b".secondary", b"a")
    assert list(inner.fetch(b"pin")) == []
    assert sorted(inner.fetch(b"pin.secondary")) == [b"a", b"b"]
    assert list(db.fetch(b"other")) == [] and list(inner.fetch(b"pin.pareto")) == [b"c"]
    db.delete(digest + b".pareto", b"c")
    assert list(inner.fetch(b"pin.pareto")) == []


def test_the_round_view_keeps_only_what_it_is_told_to(tmp_path: Path) -> None:
    inner = DirectoryBasedExampleDatabase(tmp_path)
    db = KeepKnown(inner)
    db.save(b"k", b"v")
    db.keep = True
    db.delete(b"k", b"v")
    assert list(db.fetch(b"k")) == [b"v"]
    db.keep = False
    db.delete(b"k", b"v")
    assert list(db.fetch(b"k")) == []


# ---- merging the shards' reports -------------------------------------------------------


def _scenario(world_sizes: tuple[int, ...], steps: int = 1) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=tuple(
            Launch(g, steps, (CheckpointAt(0, 1),) if i < len(world_sizes) - 1 else ())
            for i, g in enumerate(world_sizes)
        ),
    )


def _tier(**extra: float) -> TierFacts:
    base = dict(
        tier="inproc", scenarios=10, new_scenarios=8, seconds=20.0, search_s=15.0,
        shrink_s=4.0, confirm_s=1.0, in_process_runs=0, shrunk_in_process=0,
    )
    return TierFacts(**{**base, **extra})  # type: ignore[arg-type]


def _shard_report(
    root: Path,
    shard: str,
    findings: list[tuple[str, Scenario, str, float, int]],
    count: int,
    seed: int = 7,
) -> Path:
    """A shard's report folder: summary.json and each finding's scenario file."""
    folder = root / f"seed{seed}-shard-{shard.replace('/', 'of')}"
    facts = []
    for sig, scenario, label, first_s, seen in findings:
        rel = f"findings/{sig}.json"
        (folder / "findings").mkdir(parents=True, exist_ok=True)
        scenario.save(folder / rel)
        (folder / f"findings/{sig}.txt").write_text(f"evidence of {sig} on {shard}\n")
        facts.append(FindingFacts(sig, label, "inproc", first_s, seen, False, scenario_file=rel))
    cells = [
        CellFacts("LAUNCHES", ["1"], count),
        CellFacts("LAUNCHES", ["2"], 1),
        CellFacts("WORLD_SIZE", ["1"], 0, why_not="NO_ODDS"),
    ]
    write_facts(
        SummaryFacts(
            budget_s=60,
            elapsed_s=59.0,
            interrupted=False,
            tier="inproc",
            seed=seed,
            plant=None,
            tiers={"inproc": _tier()},
            findings=facts,
            shard=shard,
            coverage={"inproc": CoverageFacts(3, 3, True, False, cells)},
        ),
        folder,
    )
    return folder


SIG_A = "batches-identical.reordered.same-size.boundary"
SIG_B = "checkpoint.differs.no-resume.no-resume"


def test_shard_reports_merge_into_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small, large = _scenario((1, 2)), _scenario((2, 1, 2), steps=3)
    found = [(SIG_A, large, "reproducible", 5.0, 3), (SIG_B, small, "flaky", 9.0, 1)]
    one = _shard_report(tmp_path, "1/3", found, 4)
    two = _shard_report(tmp_path, "2/3", [(SIG_A, small, "flaky", 12.0, 2)], 6)
    out = tmp_path / "merged"
    assert cli.main(["report", "merge", str(one), str(two), "--out", str(out)]) == 0
    assert "shards missing: 3/3" in capsys.readouterr().out
    merged = read_summary_json(out / "summary.json")
    by_sig = {f.signature: f for f in merged.findings}
    assert set(by_sig) == {SIG_A, SIG_B}
    a = by_sig[SIG_A]
    assert (a.seen, a.first_seen_s, a.shard) == (5, 5.0, "2/3")  # smallest kept, earliest sighting
    assert a.label == "reproducible" and a.labels == {"1/3": "reproducible", "2/3": "flaky"}
    assert Scenario.load(out / a.scenario_file).launches == small.launches
    assert (out / "findings" / f"{SIG_A}.txt").read_text() == f"evidence of {SIG_A} on 2/3\n"
    assert by_sig[SIG_B].label == "flaky"
    assert merged.tiers["inproc"].scenarios == 20 and merged.tiers["inproc"].search_s == 30.0
    counts = {(c.dim, tuple(c.value)): c.count for c in merged.coverage["inproc"].cells}
    assert counts == {("LAUNCHES", ("1",)): 10, ("LAUNCHES", ("2",)): 2, ("WORLD_SIZE", ("1",)): 0}
    assert [r.shard for r in merged.runs] == ["1/3", "2/3"] and merged.budget_s == 120
    text = (out / "summary.md").read_text()
    assert "2 runs merged" in text and "## Violations (1)" in text
    assert "## Flaky findings (1)" in text
    assert "shards missing (no report given): 3/3" in text and "## Coverage" in text
    # Each run's pace is 30/min (10 in 20 s); made at once, they find 60 a minute together.
    assert "- inproc: 20 scenarios in 40s (30.0/min)" in text
    assert "- inproc: 2 runs at once: 60.0/min together" in text
    # A merged report merges again (its runs are kept), and the same shard twice is refused.
    three = _shard_report(tmp_path, "3/3", [], 1)
    again = merge(read_reports([out, three]))
    assert [r.shard for r in again.summary.runs] == ["1/3", "2/3", "3/3"]
    assert again.missing_shards == []
    with pytest.raises(MergeError, match="shard 1/3 again"):
        read_reports([one, out])


def test_merged_labels_take_the_strongest_evidence() -> None:
    from zephon_chaos.explore.merge import merged_label

    where = Path("r")
    assert merged_label("x.y", {"1/2": "flaky", "2/2": "reproducible"}, where) is (
        FindingLabel.REPRODUCIBLE
    )
    assert merged_label("x.y", {"1/2": "unconfirmed", "2/2": "flaky"}, where) is FindingLabel.FLAKY
    with pytest.raises(MergeError, match=r"r/summary\.json: finding x\.y"):
        merged_label("x.y", {"1/2": "maybe"}, where)
    assert Finding("harness.OSError.no-resume.no-resume", "inproc", Scenario(), "", 0).harness


@pytest.mark.parametrize("broken", ["missing", "corrupt", "no-scenario", "not-a-folder"])
def test_a_missing_or_corrupt_input_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    good = _shard_report(tmp_path, "1/2", [(SIG_A, _scenario((1, 2)), "reproducible", 1.0, 1)], 1)
    bad = _shard_report(tmp_path, "2/2", [(SIG_A, _scenario((1, 2)), "reproducible", 1.0, 1)], 1)
    named = bad / "summary.json"
    if broken == "missing":
        named.unlink()
    elif broken == "corrupt":
        named.write_text("{ half")
    elif broken == "no-scenario":
        named = bad / "findings" / f"{SIG_A}.json"
        named.unlink()
    else:
        named = tmp_path / "nowhere"
        bad = named
    code = cli.main(["report", "merge", str(good), str(bad), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 2 and str(named) in err and "Traceback" not in err, err
    assert not (tmp_path / "m").exists()


def test_a_summary_json_of_version_1_still_reads(tmp_path: Path) -> None:
    folder = _shard_report(tmp_path, "1/1", [], 1)
    doc = json.loads((folder / "summary.json").read_text())
    for key in ("shard", "database", "coverage", "runs"):
        doc.pop(key)
    (folder / "summary.json").write_text(json.dumps({**doc, "version": 1}))
    facts = read_summary_json(folder / "summary.json")
    assert facts.shard is None and facts.coverage == {}
    merged = merge(read_reports([folder]))
    write_merged(merged, tmp_path / "out")
    assert "No per-cell counts" in (tmp_path / "out" / "summary.md").read_text()


# ---- acceptance: two in-process shards share a planted failure through Redis ------------


def _recording_shard(root: Path, index: int, url: str) -> tuple[Explorer, list[Scenario]]:
    """Shard ``index`` of 2 on the in-process tier with a planted defect, ending once it holds
    a finding; records every scenario it runs, in order."""
    explorer = Explorer(
        ExploreConfig(
            budget_s=60,
            report_dir=root / f"shard-{index}",
            tier="inproc",
            seed=3,
            max_world=2,
            max_phases=2,
            plant="skip_sample",
            confirm_runs=1,
            shard=Shard(index, 2),
            database=url,
            aim=False,  # only plain rounds share through the database (explore.search)
            stop_when=lambda found: any(not f.known and not f.harness for f in found.values()),
        )
    )
    ran: list[Scenario] = []
    real_run = explorer.judge.run

    def recording(runner: ScenarioRunner, scenario: Scenario) -> ScenarioOutcome | None:
        ran.append(scenario)
        return real_run(runner, scenario)

    explorer.judge.run = recording
    return explorer, ran


def test_two_shards_share_a_finding_through_redis_and_merge_into_one(
    tmp_path: Path, redis_socket: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import redis

    url = f"unix://{redis_socket}"
    first, _ = _recording_shard(tmp_path, 1, url)
    first.run()
    (sig,) = [s for s, f in first.findings.items() if not f.known and not f.harness]
    saved = first.findings[sig].scenario
    client = redis.Redis(unix_socket_path=str(redis_socket))
    try:
        key = b"hypothesis-example:" + first._database_key("inproc")
        assert client.scard(key) >= 1, "shard 1 saved nothing to the shared database"
    finally:
        client.close()

    second, ran = _recording_shard(tmp_path, 2, url)
    second.run()
    assert ran[0] == saved, "shard 2's first scenario is not shard 1's saved failure"
    assert list(second.findings) == [sig]

    out = tmp_path / "merged"
    dirs = [str(tmp_path / "shard-1"), str(tmp_path / "shard-2")]
    assert cli.main(["report", "merge", *dirs, "--out", str(out)]) == 0
    merged = read_summary_json(out / "summary.json")
    (finding,) = [f for f in merged.findings if f.signature == sig]
    assert finding.seen == first.findings[sig].seen + second.findings[sig].seen
    assert set(finding.labels) == {"1/2", "2/2"}
    assert [r.shard for r in merged.runs] == ["1/2", "2/2"]
    assert f"`unix://{redis_socket}`" in (out / "summary.md").read_text()
    capsys.readouterr()


def _searched(
    shard: Shard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, float]]:
    """The tiers a ``--tier both`` run of ``shard`` searches, each with its deadline (s)."""
    explorer = Explorer(
        ExploreConfig(
            budget_s=100, report_dir=tmp_path / "report", tier="both", seed=3, shard=shard
        )
    )
    searched: list[tuple[str, float]] = []

    def search(tier: str, deadline: float) -> None:
        searched.append((tier, deadline - explorer.state.started))

    monkeypatch.setattr(explorer, "_search", search)
    monkeypatch.setattr(explorer.judge, "confirm", lambda end: None)
    explorer.run()
    return searched


def test_unsharded_both_tiers_share_the_search_in_process_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tier_order(Shard()) == ("inproc", "torchrun")
    searched = _searched(Shard(), tmp_path, monkeypatch)
    assert [tier for tier, _ in searched] == ["inproc", "torchrun"]
    inproc, end = searched[0][1], searched[1][1]
    assert inproc / end == pytest.approx(BOTH_INPROC_SHARE, abs=0.01)


@pytest.mark.parametrize(
    ("shard", "tier", "left_to"),
    [
        (Shard(1, 2), "inproc", "torchrun"),
        (Shard(2, 2), "torchrun", "inproc"),
        (Shard(3, 4), "inproc", "torchrun"),
        (Shard(4, 4), "torchrun", "inproc"),
    ],
)
def test_a_shard_searches_one_tier_over_its_whole_search(
    shard: Shard, tier: str, left_to: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Odd shards in process, even ones on torchrun: each tier in one unbroken stretch."""
    assert tier_order(shard) == (tier, left_to)
    config = ExploreConfig(budget_s=100, report_dir=tmp_path, tier="both", shard=shard)
    assert config.left_to == left_to
    searched = _searched(shard, tmp_path, monkeypatch)
    assert [t for t, _ in searched] == [tier]
    assert searched[0][1] == pytest.approx(100 - reserve_s(100), abs=0.5)


def test_a_torchrun_shard_leaves_to_the_in_process_shard_what_threads_reach() -> None:
    """Its aims skip the cells the sibling tier reaches: that shard's counts are not seen."""
    class Options:
        max_world, max_phases, store_faults, profile, aim = 4, 5, True, "default", True
        left_to: str | None = None

    alone = set(RoundSteering(Coverage(), "torchrun", Options(), 1).aims())
    Options.left_to = "inproc"
    cov = Coverage()
    shared = RoundSteering(cov, "torchrun", Options(), 1).aims()
    threads = set(declare("inproc", store_faults=True).reachable())
    assert shared and set(shared) < alone
    assert not set(cov.offered["torchrun"]) & threads
    raise_at_shard = cell(Dim.RANK_FAULT_POINT, "raise", "shard", "store", "none")
    assert raise_at_shard in threads and raise_at_shard not in cov.offered["torchrun"]
    # The in-process shard leaves nothing to torchrun: it aims as if alone.
    Options.left_to = None
    inproc_alone = RoundSteering(Coverage(), "inproc", Options(), 1).aims()
    Options.left_to = "torchrun"
    assert inproc_alone and RoundSteering(Coverage(), "inproc", Options(), 1).aims() == inproc_alone


def test_the_same_shard_of_two_seeds_merges(tmp_path: Path) -> None:
    """Runs of several seeds (each split by ``--jobs``) join into one report: a shard is one
    of its seed's run, so only the same shard of the same seed is refused."""
    runs = [_shard_report(tmp_path, s, [], 1, seed=seed) for seed in (3, 4) for s in ("1/2", "2/2")]
    merged = merge(read_reports(runs))
    assert [(r.seed, r.shard) for r in merged.summary.runs] == [
        (3, "1/2"), (3, "2/2"), (4, "1/2"), (4, "2/2")
    ]
    assert merged.missing_shards == []

