"""The fault timeline: what fired, on which logical event, and when, merged from every source.

Sources are iterables of :class:`Event`; each knows how to read one kind of evidence:

* the workload's record files (``kind: "fault"`` lines a rank writes just before it fires),
* the store interposer's event files (``<out_dir>/interposer/rank<r>.jsonl``: a trigger that
  fired, held, released or resumed on a round phase's n-th write; its clock is
  ``time.monotonic()``, shared by every process of the host, so it is converted here),
* a group's spawn records (when each process started) and torchelastic error files (when a
  rank failed), and its deadline,
* ``events.jsonl`` in a group's work directory: the file any fault layer (proxy toxics,
  process faults) appends one JSON object per line to: ``{"t": <unix time>, "source": "proxy",
  "what": "latency 500ms on store", "at": "store op 12"}``.

Events without a clock keep their logical position (``at``) and are listed after the timed ones.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zephon_chaos.launch.result import GroupResult

EVENTS_FILE = "events.jsonl"


@dataclass(frozen=True)
class Event:
    t: float | None
    """Wall-clock seconds (``time.time()``); None when the source has no clock."""
    source: str
    what: str
    at: str = ""
    """The logical event it fired on: ``step 3``, ``checkpoint 1 announce``, ``store op 12``."""


def merge(*sources: Iterable[Event]) -> list[Event]:
    """All events, timed ones by time, then untimed ones in the order their sources gave them."""
    events = [e for source in sources for e in source]
    timed = sorted((e for e in events if e.t is not None), key=lambda e: e.t)  # type: ignore[arg-type,return-value]
    return timed + [e for e in events if e.t is None]


def render(events: list[Event], origin: float | None = None) -> str:
    """One line per event, times relative to ``origin`` (default: the first timed event)."""
    if not events:
        return "(no events recorded)"
    times = [e.t for e in events if e.t is not None]
    base = origin if origin is not None else (min(times) if times else None)
    lines = []
    for e in events:
        when = f"+{e.t - base:8.3f}s" if e.t is not None and base is not None else "   (no clock)"
        at = f"  [at {e.at}]" if e.at else ""
        lines.append(f"{when}  {e.source:<18} {e.what}{at}")
    if base is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(base))
        lines.insert(0, f"t=0 is {stamp} (local time)")
    return "\n".join(lines)


def jsonl_events(path: Path, default_source: str) -> list[Event]:
    """Events from a JSON-lines file of ``{"t", "source", "what", "at"}`` (torn lines skipped)."""
    out: list[Event] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and ev.get("what"):
            out.append(
                Event(_time(ev.get("t")), str(ev.get("source") or default_source),
                      str(ev["what"]), str(ev.get("at") or ""))
            )
    return out


def workload_fault_events(out_dir: Path | str, label: str = "") -> list[Event]:
    """``fault`` records of every rank under a workload output directory."""
    events: list[Event] = []
    for path in sorted(Path(out_dir).glob("records/rank*.jsonl")):
        for ev in _json_lines(path):
            if ev.get("kind") != "fault":
                continue
            rank = ev.get("rank", path.stem.removeprefix("rank"))
            what = f"fault {ev.get('action', '?')} fired (pid {ev.get('pid', '?')})"
            at = f"step {ev['at_step']}" if "at_step" in ev else str(ev.get("at", ""))
            source = f"{label} rank {rank}".strip()
            events.append(Event(_time(ev.get("t")), source, what, at))
    return events


INTERPOSER_KINDS = ("fired", "held", "released", "resumed")


def interposer_events(out_dir: Path | str, label: str = "") -> list[Event]:
    """What the store interposer's triggers did, per rank, on which phase write."""
    offset = time.time() - time.monotonic()
    events: list[Event] = []
    for path in sorted(Path(out_dir).glob("interposer/rank*.jsonl")):
        source = f"{label} rank {path.stem.removeprefix('rank')}".strip()
        for ev in _json_lines(path):
            kind = ev.get("kind")
            if kind not in INTERPOSER_KINDS:
                continue
            stamp = _time(ev.get("t"))
            what = f"{ev.get('action', 'trigger')} {kind}"
            if kind == "released" and ev.get("how"):
                what += f" ({ev['how']})"
            at = f"{ev.get('phase', '?')} write #{ev.get('n', '?')}"
            if ev.get("key"):
                at += f" ({ev['key']})"
            events.append(Event(stamp + offset if stamp is not None else None, source, what, at))
    return events


def _json_lines(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


def group_events(result: GroupResult) -> list[Event]:
    """When the group's processes started, when ranks failed, the deadline, and fault-layer
    events written to ``<workdir>/events.jsonl``."""
    events: list[Event] = []
    pid_dir = result.workdir / "pids"
    rank_of_pid = {o.pid: o.rank for o in result.ranks if o.pid is not None}
    starts: list[float] = []
    if pid_dir.is_dir():
        for entry in sorted(pid_dir.iterdir()):
            pid, _, _ = entry.name.partition("-")
            if not entry.is_file() or not pid.isdigit():
                continue
            stamp = entry.stat().st_mtime  # written by the spawn hook as the interpreter starts
            starts.append(stamp)
            rank = rank_of_pid.get(int(pid))
            argv = _argv(entry)
            if rank is not None:
                events.append(Event(stamp, f"{result.name} rank {rank}", f"started (pid {pid})"))
            elif "torch.distributed.run" in argv:
                events.append(Event(stamp, f"{result.name} agent", f"started (pid {pid})"))
    for outcome in result.ranks:
        if outcome.exitcode in (0, None):
            continue
        stamp = _error_file_time(outcome.stderr.parent / "error.json" if outcome.stderr else None)
        what = f"ended: {outcome.status}"
        if outcome.error:
            what += f": {outcome.error}"
        events.append(Event(stamp, f"{result.name} rank {outcome.rank}", what))
    if result.timed_out:
        begin = min(starts) if starts else None
        events.append(
            Event(
                begin + result.duration_s if begin is not None else None,
                f"{result.name} harness",
                f"past the deadline: {result.stacks_note}, whole tree killed (group ended)",
            )
        )
    events += jsonl_events(result.workdir / EVENTS_FILE, f"{result.name} faults")
    return events


def _argv(record: Path) -> str:
    try:
        data = json.loads(record.read_text() or "{}")
    except (OSError, ValueError):
        return ""
    return " ".join(str(a) for a in data.get("argv", [])) if isinstance(data, dict) else ""


def _error_file_time(path: Path | None) -> float | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict):
        return _time(message.get("extraInfo", {}).get("timestamp"))
    return None


def _time(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
