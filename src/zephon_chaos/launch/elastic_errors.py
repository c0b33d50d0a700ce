"""Read what torchelastic says about failed ranks: its failure summary and its error files."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(
    r"rank\s*:\s*(?P<rank>\d+)\s*\(local_rank:\s*(?P<local>\d+)\)\s*\n"
    r"\s*exitcode\s*:\s*(?P<code>-?\d+)\s*\(pid:\s*(?P<pid>\d+)\)[^\n]*\n"
    r"\s*error_file:\s*(?P<efile>[^\n]*)",
)


@dataclass
class ElasticFailure:
    rank: int
    local_rank: int
    exitcode: int
    pid: int
    error_file: Path | None
    root_cause: bool


def parse_summary(text: str) -> list[ElasticFailure]:
    """Failures listed in torchrun's ``ChildFailedError`` summary (root cause flagged).

    Only the last summary counts: with ``--max-restarts`` earlier attempts print their own.
    """
    start = text.rfind("Failures:")
    if start < 0:
        return []
    body = text[start:]
    root_at = body.find("Root Cause")
    found: list[ElasticFailure] = []
    for m in _BLOCK.finditer(body):
        efile = m["efile"].strip()
        found.append(
            ElasticFailure(
                rank=int(m["rank"]),
                local_rank=int(m["local"]),
                exitcode=int(m["code"]),
                pid=int(m["pid"]),
                error_file=None if efile in ("", "<N/A>") else Path(efile),
                root_cause=root_at >= 0 and m.start() > root_at,
            )
        )
    return found


def read_error_file(path: Path) -> tuple[str, str, float | None]:
    """(message, traceback, timestamp) from a torchelastic error file written by ``@record``."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return (f"unreadable torchelastic error file {path}: {exc}", "", None)
    message = data.get("message", {})
    if isinstance(message, str):
        return (message, "", None)
    extra = message.get("extraInfo", {})
    stamp = extra.get("timestamp")
    return (
        str(message.get("message", "")),
        str(extra.get("py_callstack", "")),
        float(stamp) if stamp is not None else None,
    )


_UNPARSED = re.compile(r"Failed to parse reply file: (?P<path>\S+)")


def agent_crash_note(agent_log: str) -> str | None:
    """A note when torchelastic's agent crashed reading a worker's half-written error file.

    The agent SIGTERMs the other workers as soon as one fails; a worker caught while torch's
    ``@record`` writes its error file leaves it empty or cut, and ``ProcessFailure`` re-raises
    the ``JSONDecodeError``: the agent dies and no worker's exit status is reported.
    """
    m = _UNPARSED.search(agent_log)
    if m is None or "JSONDecodeError" not in agent_log[m.end() :]:
        return None
    return (
        f"note: torchelastic's agent crashed reading {m['path']}, an error file that its "
        "worker was still writing when the agent stopped it (a race in torch's @record: "
        "zephon_chaos.workload.error_file.record writes it atomically); the workers' exit "
        "statuses are lost"
    )


_EXC_LINE = re.compile(
    r"^(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*)$"
)


def last_exception_line(stderr_text: str) -> str | None:
    """The final ``SomeError: message`` line of a Python traceback in a rank's stderr."""
    for line in reversed(stderr_text.splitlines()):
        m = _EXC_LINE.match(line.strip())
        if m:
            return m.group(1)
    return None
