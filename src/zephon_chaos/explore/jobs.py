"""``explore --jobs N``: one exploration as N local shards, each a subprocess, one report.

An exploration in process runs on one core (its rank threads share one interpreter). With
``--jobs N`` the command starts N children, ``python -m zephon_chaos.cli explore --shard i/N``
with the same seed, budget and flags (:mod:`.shard`: no two shards draw the same scenarios),
each writing its report under ``REPORT/shards/i``, all sharing one example database: the
user's ``--database`` unchanged, else the directory ``REPORT/example-db`` (Hypothesis's
directory database takes concurrent writers: one file per example, written whole). So a
failure one shard finds is the first scenario the others replay in their next round. Then
the shards' reports are merged into ``REPORT`` itself (:mod:`.merge`), and the merged report
is read back as one :class:`ExploreResult` for what the command prints, its CI files and its
exit status.

Every child has a deadline (its budget plus ``OVERRUN_S``); past it, or when this process is
interrupted (Ctrl-C, SIGTERM), each child gets SIGINT and ``INTERRUPT_GRACE_S`` to write its
report, then its whole tree is killed: every process a child starts carries a marker variable
of its own (``MARKER_VAR``), however far it was re-parented. A child's stderr (its progress)
is echoed prefixed ``[shard i/N]`` and kept in its folder, its stdout too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, TextIO

from zephon_chaos.explore.budget import format_duration
from zephon_chaos.explore.database import LOCAL_COPY, NONE
from zephon_chaos.explore.findings import Finding, FindingLabel, evidence_of
from zephon_chaos.explore.merge import Candidate, Merged, MergeError, Report, read_reports
from zephon_chaos.explore.shard import Shard
from zephon_chaos.explore.step_summary import ENV as STEP_SUMMARY_ENV
from zephon_chaos.explore.summary import ExploreResult, TierStats
from zephon_chaos.explore.summary_json import SUMMARY_JSON, FindingFacts, TierFacts
from zephon_chaos.procs import kill_with_env
from zephon_chaos.scenario import Scenario

MARKER_VAR = "ZC_EXPLORE_JOB"
"""Carried by every process of one child explore: how its whole tree is found and killed."""
OVERRUN_S = 120.0
"""A child's deadline past its budget: start-up (importing torch), the report, the closing."""
INTERRUPT_GRACE_S = 60.0
"""After SIGINT (the deadline, or this process interrupted), how long a child gets to write
its report before its tree is killed."""
SHARDS = "shards"
"""Under the report folder: one folder per shard (``shards/<i>``), the jobs' own."""
STDERR_LOG = "stderr.log"
STDOUT_LOG = "stdout.log"
REPORTED = (0, 1, 3, 130)
"""A child's exit codes that come with a report it finished: explore's exit statuses."""


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def shard_folder(report: Path, shard: Shard) -> Path:
    return report / SHARDS / str(shard.index)


def shared_database(spec: str | None, report: Path) -> str:
    """The database every shard is given: the user's as it is (a Redis server, a GitHub
    artifact, a directory, none), else the report's own directory database."""
    return str(report / LOCAL_COPY) if spec is None else spec


def joins_databases(spec: str, report: Path) -> bool:
    """Whether the merge should join the shards' own ``example-db`` folders into the report's:
    not when the shards shared the report's one (already joined; the merge would replace it)."""
    if spec.strip().lower() == NONE or "://" in spec or spec.startswith("github-artifact:"):
        return True
    return Path(spec).resolve() != (report / LOCAL_COPY).resolve()


def child_argv(options: Sequence[str], shard: Shard, report: Path, database: str) -> list[str]:
    """A child's command line: ``options`` (seed, budget and the user's flags, none of the
    four set here), then its shard, its report folder and the shared database."""
    return [
        sys.executable,
        "-m",
        "zephon_chaos.cli",
        "explore",
        *options,
        "--jobs",
        "1",
        "--shard",
        str(shard),
        "--report",
        str(shard_folder(report, shard)),
        "--database",
        database,
    ]


@dataclass
class ShardRun:
    """One child: its shard and folder, how it ended, and why its report is missing or
    untrusted (None: it ended on its own with a report)."""

    shard: Shard
    folder: Path
    exit_code: int | None = None
    problem: str | None = None
    leftovers: int = 0
    """Processes of its tree still alive after it ended (killed then)."""

    @property
    def reported(self) -> bool:
        return (self.folder / SUMMARY_JSON).is_file()

    def line(self) -> str:
        parts = [f"shard {self.shard}: exit {self.exit_code}"]
        if self.problem:
            parts.append(self.problem)
        if self.leftovers:
            parts.append(f"{self.leftovers} leftover process(es) killed")
        if not self.reported:
            parts.append(f"no report; its stderr: {self.folder / STDERR_LOG}")
        return "; ".join(parts)


class _Child:
    """A running child explore: its process, its marker and the thread echoing its stderr."""

    def __init__(self, run: ShardRun, argv: list[str], stream: TextIO, lock: threading.Lock):
        self.run = run
        self.marker = uuid.uuid4().hex
        env = {**os.environ, MARKER_VAR: self.marker, "PYTHONUNBUFFERED": "1"}
        env.pop(STEP_SUMMARY_ENV, None)  # the parent writes the step summary, merged
        run.folder.mkdir(parents=True, exist_ok=True)
        self._stderr_log = (run.folder / STDERR_LOG).open("wb")
        with (run.folder / STDOUT_LOG).open("wb") as stdout, _sigint_heard_by_children():
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.PIPE,
                start_new_session=True,  # the parent forwards a terminal's Ctrl-C itself
            )
        assert self.proc.stderr is not None
        self._echo = threading.Thread(
            target=self._copy,
            args=(self.proc.stderr, f"[shard {run.shard}] ", stream, lock),
            name=f"zc-explore-shard-{run.shard.index}",
            daemon=True,
        )
        self._echo.start()

    def _copy(self, pipe: IO[bytes], prefix: str, stream: TextIO, lock: threading.Lock) -> None:
        for raw in iter(pipe.readline, b""):
            self._stderr_log.write(raw)
            self._stderr_log.flush()
            text = raw.decode(errors="replace").rstrip("\r\n").split("\r")[-1]
            with lock:
                stream.write(prefix + text + "\n")
                stream.flush()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def interrupt(self, problem: str | None = None) -> None:
        if not self.alive():
            return
        if problem is not None and self.run.problem is None:
            self.run.problem = problem
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)

    def wait(self, until: float) -> bool:
        """Wait for the child until the monotonic time ``until``; True if it has ended."""
        try:
            self.proc.wait(timeout=max(until - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        """Kill what is left of its tree, reap it, and finish its logs."""
        if self.alive():
            self.run.problem = (self.run.problem or "interrupted") + ", ignored SIGINT: killed"
        self.run.leftovers = kill_with_env(MARKER_VAR, self.marker)
        self.proc.wait()
        self._echo.join(10.0)
        self._stderr_log.close()
        self.run.exit_code = self.proc.returncode
        if self.run.problem is None and self.proc.returncode not in REPORTED:
            self.run.problem = f"exited {self.proc.returncode}"


@contextlib.contextmanager
def _sigint_heard_by_children() -> Iterator[None]:
    """Children started inside take SIGINT as Ctrl-C, even where this process ignores it (a
    background job of a script): an ignored signal stays ignored across ``exec``, a handled
    one is reset, and Python turns a default SIGINT into ``KeyboardInterrupt``."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class JobsRun:
    """What the children did: each shard's run, and whether this process was interrupted."""

    runs: list[ShardRun]
    interrupted: bool
    elapsed_s: float

    @property
    def failed(self) -> list[ShardRun]:
        """Shards whose report is missing or that did not end on their own (not counting an
        interruption asked for)."""
        return [r for r in self.runs if not r.reported or (r.problem and not self.interrupted)]


def run_jobs(
    argvs: Sequence[tuple[Shard, list[str]]],
    report: Path,
    budget_s: float,
    stream: TextIO = sys.stderr,
) -> JobsRun:
    """Run the children ``argvs`` (one per shard) to their ends (module docstring); nothing
    they started is left running when this returns, whatever happens."""
    shutil.rmtree(report / SHARDS, ignore_errors=True)  # an earlier run's: never merged in
    lock = threading.Lock()
    began = time.monotonic()
    children: list[_Child] = []
    interrupted = False
    try:
        for shard, argv in argvs:
            children.append(
                _Child(ShardRun(shard, shard_folder(report, shard)), argv, stream, lock)
            )
        deadline = began + budget_s + OVERRUN_S
        if not _wait_all(children, deadline):
            late = f"passed its deadline ({format_duration(budget_s + OVERRUN_S)}): interrupted"
            for child in children:
                child.interrupt(late)
            _wait_all(children, time.monotonic() + INTERRUPT_GRACE_S)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (``hygiene.command.Terminated``)
        interrupted = True
        for child in children:
            child.interrupt()
        with contextlib.suppress(KeyboardInterrupt):  # a second one: kill now
            _wait_all(children, time.monotonic() + INTERRUPT_GRACE_S)
    finally:
        for child in children:
            child.close()
    return JobsRun([c.run for c in children], interrupted, time.monotonic() - began)


def _wait_all(children: Sequence[_Child], until: float) -> bool:
    return all([child.wait(until) for child in children])


# ---- the merged report as one result ----------------------------------------------------


def read_shards(runs: Sequence[ShardRun]) -> tuple[list[Report], dict[Shard, str]]:
    """The shards' reports that can be read, and why each other shard's cannot."""
    reports: list[Report] = []
    unread: dict[Shard, str] = {}
    for run in runs:
        if not run.reported:
            unread[run.shard] = run.problem or f"exited {run.exit_code} without a report"
            continue
        try:
            reports += read_reports([run.folder])
        except MergeError as exc:
            unread[run.shard] = str(exc)
    return reports, unread


def merged_result(
    merged: Merged, out: Path, *, budget_s: float, elapsed_s: float, max_world: int
) -> ExploreResult:
    """The merged report (written under ``out``) as one run's result: what ``explore`` prints,
    its JUnit XML and step summary, and its exit status, made as an unsharded run's are.
    ``budget_s`` and ``elapsed_s`` are the wall clock's (the summary's are the shards' sums)."""
    s = merged.summary
    result = ExploreResult(
        report_dir=out,
        budget_s=budget_s,
        tier=s.tier,
        seed=s.seed,
        max_world=max_world,
        plant=s.plant,
        database=s.database,
        elapsed_s=elapsed_s,
        interrupted=s.interrupted,
    )
    result.tiers = {name: _tier_stats(t) for name, t in s.tiers.items()}
    result.findings = [_finding(f, merged.kept[f.signature], out) for f in s.findings]
    return result


def _tier_stats(t: TierFacts) -> TierStats:
    return TierStats(**{fl.name: getattr(t, fl.name) for fl in fields(TierFacts)})


def _finding(f: FindingFacts, kept: Candidate, out: Path) -> Finding:
    files: list[Path] = []
    report = ""
    if f.scenario_file is not None:
        json_path = out / f.scenario_file
        files = [
            p
            for p in (json_path, *(json_path.with_suffix(x) for x in (".txt", ".png")))
            if p.is_file()
        ]
        text = json_path.with_suffix(".txt")
        if text.is_file():
            report = evidence_of(text.read_text())
    return Finding(
        signature=f.signature,
        tier=f.tier,
        scenario=kept.scenario or Scenario(),
        report=report,
        first_seen_s=f.first_seen_s,
        seen=f.seen,
        label=FindingLabel(f.label),
        files=files,
        shrunk_s=f.shrunk_s,
        shrunk_on=f.shrunk_on,
    )
