"""Write a failing test's evidence under ``--chaos-artifacts DIR``: one folder per test.

Layout (``<test>`` is the node id made file-safe)::

    <test>/report.txt          pytest's failure text and every zephon-chaos section
    <test>/summary.txt         group verdicts, statuses in words, stuck frames, scenario verdicts
    <test>/timeline.txt        the fault timeline
    <test>/properties.json     the key facts (also the JUnit properties)
    <test>/<group>/stacks/     one file per process stack captured at the deadline
    <test>/<group>/logs/ ...   torchrun's per-rank logs and the agents' logs
    <test>/<scenario>.json     the scenario file; replay.txt has the command that reruns it

A failure in setup or teardown (a hygiene verdict, say) writes ``report.<phase>.txt`` beside it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from zephon_chaos.launch.result import GroupResult
from zephon_chaos.report import timeline
from zephon_chaos.report.failure import failure_sections, fault_timeline
from zephon_chaos.report.properties import group_properties, outcome_properties, replay_command


def artifact_dir(root: str | Path, nodeid: str) -> Path:
    safe = re.sub(r"[^\w.-]+", "_", nodeid).strip("_")[:150]
    return Path(root) / safe


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name).strip("_") or "unnamed"


def write_artifacts(
    root: str | Path,
    nodeid: str,
    report: Any,
    results: list[GroupResult],
    outcomes: list[Any] | None = None,
) -> Path:
    """Write the report, summary, timeline, key facts, stacks, logs and scenarios; return the
    folder."""
    outcomes = list(outcomes or [])
    target = artifact_dir(root, nodeid)
    target.mkdir(parents=True, exist_ok=True)
    when = getattr(report, "when", "call")
    name = "report.txt" if when == "call" else f"report.{when}.txt"
    sections = failure_sections(results, outcomes)
    body = [str(getattr(report, "longrepr", "") or "")]
    body += [f"{'=' * 20} {title} {'=' * 20}\n{text}" for title, text in sections]
    (target / name).write_text("\n\n".join(body))
    summaries = [o.report() for o in outcomes] + [r.summary() for r in results]
    if summaries:
        (target / "summary.txt").write_text("\n\n".join(summaries) + "\n")
    events = fault_timeline(results, outcomes)
    if events:
        (target / "timeline.txt").write_text(timeline.render(events) + "\n")
    facts = [p for r in results for p in group_properties(r)]
    facts += [p for o in outcomes for p in outcome_properties(o)]
    (target / "properties.json").write_text(json.dumps(dict(facts), indent=1) + "\n")
    for result in results:
        _write_group(target / _safe(result.name), result)
    for outcome in outcomes:
        _write_scenario(target, outcome)
    return target


def _write_group(folder: Path, result: GroupResult) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if result.stacks:
        stacks = folder / "stacks"
        stacks.mkdir(exist_ok=True)
        for who, text in result.stacks.items():
            (stacks / f"{_safe(who)}.txt").write_text(text)
    logs = result.workdir / "logs"
    if logs.is_dir():
        shutil.copytree(logs, folder / "logs", dirs_exist_ok=True)
    for log in result.agent_logs:
        if log.exists():
            shutil.copy2(log, folder / log.name)


def _write_scenario(target: Path, outcome: Any) -> None:
    source = getattr(outcome, "scenario_file", None)
    if source is not None and Path(source).exists():
        shutil.copy2(source, target / f"{_safe(outcome.scenario.name)}.json")
    replay = replay_command(outcome)
    if replay:
        with open(target / "replay.txt", "a", encoding="utf-8") as f:
            f.write(replay + "\n")
