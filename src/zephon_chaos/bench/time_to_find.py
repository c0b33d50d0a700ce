"""Time to find: explore with several seeds, then per finding signature, how many seeds found
it and the median seconds to its first sighting, the way FuzzBench and Magma compare fuzzers.

Each seed is one ``zephon-chaos explore`` subprocess (``python -m zephon_chaos.cli``, so a
wheel install works as well as a checkout) with a deadline; its first sightings come from
the ``summary.json`` it writes. Every process it starts carries a marker variable in its
environment, so the whole tree (re-parented and new-session processes included) is killed
at the deadline and swept after each run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from zephon_chaos.explore import jobs
from zephon_chaos.explore.budget import format_duration
from zephon_chaos.explore.summary_json import (
    SUMMARY_JSON,
    SummaryError,
    SummaryFacts,
    read_summary_json,
)
from zephon_chaos.procs import kill_with_env, pids_with_env

MARKER_VAR = "ZC_TIME_TO_FIND_RUN"
"""Carried by every process of one explore run: how its whole tree is found and killed."""
# A run's deadline past its budget (start-up, the report, the closing), and how long it gets
# after SIGINT to write its report: those of ``explore --jobs``'s children.
OVERRUN_S = jobs.OVERRUN_S
INTERRUPT_GRACE_S = jobs.INTERRUPT_GRACE_S
EXIT_OK = (0, 1, 130)
"""explore's exit codes with a report: nothing but known defects, a violation, interrupted."""


@dataclass(frozen=True)
class SeedRun:
    """One explore run: its seed, plant, exit, wall time and what its summary.json says."""

    seed: int
    plant: str | None
    exit_code: int
    seconds: float
    report: Path
    summary: SummaryFacts | None
    problem: str | None = None
    """Why the run has no summary, or was killed; None when it ended on its own."""
    leftovers: int = 0
    """Processes of the run still alive after it ended (killed then)."""


@dataclass(frozen=True)
class TimeToFind:
    """One signature (under one plant): how many seeds found it and how soon."""

    plant: str | None
    signature: str
    found: int
    seeds: int
    first_seen_s: tuple[float, ...]
    labels: tuple[str, ...]
    tiers: tuple[str, ...]

    @property
    def median_s(self) -> float:
        return statistics.median(self.first_seen_s)


def explore_argv(
    seed: int, budget: str, report: Path, plant: str | None, extra: Sequence[str]
) -> list[str]:
    """One seed's explore: in one process (``--jobs 1``, as the figures measured before
    ``--jobs`` were), unless ``extra`` says otherwise (the last ``--jobs`` counts)."""
    argv = [sys.executable, "-m", "zephon_chaos.cli", "explore", "--budget", budget]
    argv += ["--seed", str(seed), "--report", str(report), "--jobs", "1", *extra]
    return argv + (["--plant", plant] if plant else [])


def marked(marker: str) -> list[int]:
    """PIDs of live processes whose environment carries ``MARKER_VAR=marker``."""
    return pids_with_env(MARKER_VAR, marker)


def kill_marked(marker: str) -> int:
    """SIGKILL every process carrying ``marker`` until none is left; how many there were."""
    return kill_with_env(MARKER_VAR, marker)


def run_explore(
    seed: int,
    budget_s: float,
    budget: str,
    report: Path,
    plant: str | None = None,
    extra: Sequence[str] = (),
) -> SeedRun:
    """One explore subprocess, ended at ``budget_s + OVERRUN_S`` (SIGINT, then SIGKILL)."""
    report.mkdir(parents=True, exist_ok=True)
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER_VAR: marker, "PYTHONUNBUFFERED": "1"}
    problem = None
    began = time.monotonic()
    with open(report / "explore.log", "wb") as log:
        proc = subprocess.Popen(
            explore_argv(seed, budget, report, plant, extra),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=budget_s + OVERRUN_S)
        except subprocess.TimeoutExpired:
            problem = f"passed its deadline ({format_duration(budget_s + OVERRUN_S)}): interrupted"
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                problem = "passed its deadline and ignored SIGINT: killed"
                kill_marked(marker)
                proc.wait()
        finally:
            if proc.poll() is None:
                kill_marked(marker)
                proc.wait()
    seconds = time.monotonic() - began
    leftovers = kill_marked(marker)
    summary = None
    try:
        summary = read_summary_json(report / SUMMARY_JSON)
    except SummaryError as exc:
        problem = problem or f"no summary (exit {proc.returncode}): {exc}"
    if problem is None and proc.returncode not in EXIT_OK:
        problem = f"explore exited {proc.returncode}; see {report / 'explore.log'}"
    return SeedRun(seed, plant, proc.returncode, seconds, report, summary, problem, leftovers)


def time_to_find(runs: Sequence[SeedRun]) -> list[TimeToFind]:
    """Per plant and signature: the seeds that saw it, and when each first did. A run without
    a summary counts as a seed that found nothing."""
    seeds: dict[str | None, int] = {}
    sightings: dict[tuple[str | None, str], list[tuple[float, str, str]]] = {}
    for run in runs:
        seeds[run.plant] = seeds.get(run.plant, 0) + 1
        if run.summary is None:
            continue
        for f in run.summary.findings:
            sightings.setdefault((run.plant, f.signature), []).append(
                (f.first_seen_s, f.label, f.tier)
            )
    rows = []
    for (plant, sig), seen in sightings.items():
        rows.append(
            TimeToFind(
                plant=plant,
                signature=sig,
                found=len(seen),
                seeds=seeds[plant],
                first_seen_s=tuple(sorted(s for s, _, _ in seen)),
                labels=tuple(sorted({label for _, label, _ in seen})),
                tiers=tuple(sorted({tier for _, _, tier in seen})),
            )
        )
    return sorted(rows, key=lambda r: (r.plant or "", -r.found, r.median_s, r.signature))


def run_line(run: SeedRun) -> str:
    """One run: exit, wall time, and where each tier's time went."""
    parts = [f"seed {run.seed}: exit {run.exit_code}, {run.seconds:.0f}s"]
    if run.summary is not None:
        parts.append(f"{len(run.summary.findings)} finding(s)")
        for t in run.summary.tiers.values():
            parts.append(
                f"{t.tier} {t.new_scenarios} new / {t.scenarios} runs, searching "
                f"{t.search_s:.0f}s, shrinking {t.shrink_s:.0f}s, confirming {t.confirm_s:.0f}s"
            )
    if run.problem:
        parts.append(run.problem)
    if run.leftovers:
        parts.append(f"{run.leftovers} leftover process(es) killed")
    return "; ".join(parts)


def table(rows: Sequence[TimeToFind]) -> list[str]:
    lines = [f"{'signature':<58}{'found':>7}{'median s':>10}{'min s':>8}{'max s':>8}  label"]
    for r in rows:
        lines.append(
            f"{r.signature:<58}{f'{r.found}/{r.seeds}':>7}{r.median_s:>10.1f}"
            f"{min(r.first_seen_s):>8.1f}{max(r.first_seen_s):>8.1f}  {', '.join(r.labels)}"
        )
    return lines
