"""The fault timeline: events from every source, in time order, untimed ones kept."""

from __future__ import annotations

import json
import time
from pathlib import Path

from zephon_chaos.launch.result import GroupResult
from zephon_chaos.report.timeline import (
    EVENTS_FILE,
    Event,
    group_events,
    interposer_events,
    merge,
    render,
    workload_fault_events,
)


def test_merge_orders_by_time_and_keeps_untimed_events_last() -> None:
    a = [Event(20.0, "rank 1", "fault sigkill fired", "step 3"), Event(None, "rank 0", "x")]
    b = [Event(10.0, "proxy", "latency 500ms", "store op 12")]
    merged = merge(a, b)
    assert [e.what for e in merged] == ["latency 500ms", "fault sigkill fired", "x"]
    text = render(merged)
    assert "+   0.000s  proxy" in text and "[at store op 12]" in text
    assert "+  10.000s  rank 1" in text and "(no clock)  rank 0" in text


def test_workload_fault_records_are_events(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    lines = [
        {"kind": "start", "rank": 1},
        {"kind": "fault", "rank": 1, "at_step": 3, "action": "sigkill", "pid": 99, "t": 5.0},
        "torn line {",
    ]
    (records / "rank1.jsonl").write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    )
    events = workload_fault_events(tmp_path, label="phase0")
    assert events == [Event(5.0, "phase0 rank 1", "fault sigkill fired (pid 99)", "step 3")]


def test_interposer_triggers_are_events_on_the_wall_clock(tmp_path: Path) -> None:
    log = tmp_path / "interposer" / "rank0.jsonl"
    log.parent.mkdir()
    now = time.monotonic()
    lines = [
        {"kind": "write", "t": now - 2, "rank": 0, "phase": "shard", "n": 1, "key": "ns/1/state/0"},
        {"kind": "held", "t": now - 1, "rank": 0, "phase": "outcome", "n": 1, "key": "ns/1/outcome",
         "action": "hold"},
        {"kind": "released", "t": now, "rank": 0, "phase": "outcome", "n": 1, "action": "hold",
         "how": "released"},
    ]
    log.write_text("\n".join(json.dumps(x) for x in lines))
    events = interposer_events(tmp_path, label="phase1")
    assert [e.what for e in events] == ["hold held", "hold released (released)"]
    assert events[0].at == "outcome write #1 (ns/1/outcome)"
    assert events[0].source == "phase1 rank 0"
    assert events[1].t is not None and abs(events[1].t - time.time()) < 5


def test_a_groups_events_come_from_its_records_error_files_and_fault_layer(
    failed_group: GroupResult,
) -> None:
    (failed_group.workdir / EVENTS_FILE).write_text(
        json.dumps({"t": 1700000005, "source": "proxy", "what": "reset_peer", "at": "op 7"}) + "\n"
    )
    events = merge(group_events(failed_group))
    whats = [e.what for e in events]
    assert "started (pid 4242)" in whats and "started (pid 4343)" in whats
    assert "reset_peer" in whats
    failure = next(e for e in events if e.source == "g0 rank 1")
    assert failure.t == 1700000010.0 and "ended: killed by SIGKILL" in failure.what
    assert failure.what.endswith(": boom")
