"""A failing test's report, assembled from its groups and scenarios: the sections pytest shows.

Order follows what a person needs first: the scenario and its verdict (oracle evidence, replay
command), each group (statuses in words, first failure, stuck frames, log tails, stacks), then
the fault timeline across all of them.
"""

from __future__ import annotations

from typing import Any

from zephon_chaos.launch.result import GroupResult
from zephon_chaos.report import timeline

Section = tuple[str, str]


def scenario_events(outcome: Any) -> list[timeline.Event]:
    """Fault records and interposer events of every phase run of a scenario outcome."""
    runs = ([outcome.reference] if outcome.reference else []) + list(outcome.phases)
    events: list[timeline.Event] = []
    for run in runs:
        events += timeline.workload_fault_events(run.spec.out_dir, label=run.result.name)
        events += timeline.interposer_events(run.spec.out_dir, label=run.result.name)
    return events


def fault_timeline(results: list[GroupResult], outcomes: list[Any]) -> list[timeline.Event]:
    sources = [timeline.group_events(r) for r in results]
    sources += [scenario_events(o) for o in outcomes]
    return timeline.merge(*sources)


def failure_sections(results: list[GroupResult], outcomes: list[Any]) -> list[Section]:
    sections: list[Section] = []
    for outcome in outcomes:
        sections.append((f"zephon-chaos scenario {outcome.scenario.name}", outcome.report()))
    for result in results:
        sections.append((f"zephon-chaos group {result.name}", result.report()))
    events = fault_timeline(results, outcomes)
    if events:
        sections.append(("zephon-chaos timeline", timeline.render(events)))
    return sections
