"""What a launch produced: per-rank outcomes in words, logs, the first failure, stacks."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from zephon_chaos.errors import Violation
from zephon_chaos.launch.exitcodes import describe


@dataclass
class RankOutcome:
    rank: int
    local_rank: int
    node: int
    pid: int | None
    exitcode: int | None
    stdout: Path | None = None
    stderr: Path | None = None
    error: str | None = None
    traceback: str | None = None
    killed_by_harness: bool = False
    self_signal: str | None = None
    """The scheduled fault this rank fired on itself (``workload.self_faults``), if any."""
    unknown_because: str | None = None
    """Why no exit status is known for a rank that did start (its agent died silent)."""
    kernel_note: str | None = field(default=None, repr=False, compare=False)
    """The kernel log's word on an unexplained SIGKILL, read once (see ``diagnostics.kernel``)."""

    @property
    def error_type(self) -> str | None:
        """The exception type of ``error``, which torchelastic's error file (and the in-process
        tier) write as ``Type: message``; None if it names none."""
        return error_type(self.error)

    @property
    def unexplained_sigkill(self) -> bool:
        return (
            self.exitcode == -signal.SIGKILL
            and not self.killed_by_harness
            and self.self_signal is None
        )

    @property
    def status(self) -> str:
        """The exit status in words; a SIGKILL the harness did not send comes with the
        kernel's evidence for (or against) an OOM kill."""
        if self.exitcode is None and self.unknown_because is not None:
            return f"exit status unknown ({self.unknown_because})"
        text = describe(self.exitcode)
        if self.self_signal == "kill_agent":
            text += " (it killed its own agent: a scheduled fault)"
        elif self.self_signal is not None:
            text += f" (sent by the rank itself: scheduled fault {self.self_signal!r})"
        if self.unexplained_sigkill:
            if self.kernel_note is None:
                self.kernel_note = self._kernel_note()
            text += (
                " (not sent by the harness: possibly the kernel's OOM killer; "
                f"{self.kernel_note})"
            )
        return text

    def _kernel_note(self) -> str:
        if self.pid is None:
            return "no PID recorded to look up in the kernel log"
        from zephon_chaos.diagnostics.kernel import oom_evidence

        return oom_evidence(self.pid).describe()

    def tail(self, stream: str = "stderr", lines: int = 30) -> str:
        path = self.stderr if stream == "stderr" else self.stdout
        return read_tail(path, lines)


@dataclass(frozen=True)
class CutShort:
    """A launch ended before its deadline because its stacks showed a hang already known
    (``launch.hangwatch``): still a hang (``timed_out``), judged as that hang alone."""

    defect: str
    """The known hang's id (a known defect of the code under test)."""
    at_s: float
    """Seconds into the launch when it was recognised."""
    quiet_s: float
    """How long the launch had made no progress then."""

    def describe(self) -> str:
        return f"cut short: known hang {self.defect} recognised after {self.quiet_s:.0f}s quiet"


@dataclass
class GroupResult:
    name: str
    agent_returncodes: list[int | None]
    ranks: list[RankOutcome]
    timed_out: bool
    duration_s: float
    workdir: Path
    agent_logs: list[Path]
    first_failure: RankOutcome | None = None
    stacks: dict[str, str] = field(default_factory=dict)
    attempts: int = 1
    notes: list[str] = field(default_factory=list)
    torn_down_at: float | None = None
    """When the harness began ending a failed group (``time.monotonic()`` of the rank clock),
    where it knows: the in-process tier. A rank's call that ended after it ended by the
    teardown, as torchrun's SIGTERM would have ended it, not by anything Zephon did."""
    cut_short: CutShort | None = None
    """Set on a hang ended before its deadline because it was recognised as a known one
    (``timed_out`` is then True as well: every reading of a hang holds)."""
    formed_s: float | None = None
    """Seconds from the start until the group formed, where the launch awaited it
    (``LaunchSpec.formation``); None: not awaited, or it never formed."""

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(rc == 0 for rc in self.agent_returncodes)

    def rank(self, rank: int) -> RankOutcome:
        for outcome in self.ranks:
            if outcome.rank == rank:
                return outcome
        raise KeyError(f"no rank {rank} in {self.name} (ranks: {[r.rank for r in self.ranks]})")

    def summary(self) -> str:
        """A few lines a person can act on: who failed, how, and why."""
        lines = [f"group {self.name!r}: " + self._verdict()]
        for outcome in sorted(self.ranks, key=lambda r: r.rank):
            lines.append(f"  rank {outcome.rank} (pid {outcome.pid}): {outcome.status}")
        if self.first_failure is not None and self.first_failure.error:
            ff = self.first_failure
            lines.append(f"first failure: rank {ff.rank}: {ff.error}")
        stuck = self.stuck_frames()
        if stuck:
            when = "when cut short" if self.cut_short else "at the deadline"
            lines.append(f"stuck {when} (innermost frame of the program's main thread):")
            lines += [f"  {who}: {where}" for who, where in stuck.items()]
        lines.extend(self.notes)
        return "\n".join(lines)

    def stuck_frames(self) -> dict[str, str]:
        """``{"rank 1 (pid 123)": "busy_loop (hang.py:7)"}`` for every captured stack."""
        from zephon_chaos.diagnostics.frames import describe_stuck

        out: dict[str, str] = {}
        for who, stack in self.stacks.items():
            pid = _pid_of_label(who)
            where = describe_stuck(stack, pid)
            if where is None:
                first = stack.strip().splitlines()[0] if stack.strip() else ""
                where = (
                    first[:160]
                    if first.startswith("no stack")
                    else "no Python frame in its main thread (native code, or shutting down)"
                )
            out[who] = where
        return out

    def report(self, tail_lines: int = 30) -> str:
        """The summary, the first failure's traceback, every rank's log tail, and stacks."""
        parts = [self.summary()]
        ff = self.first_failure
        if ff is not None and ff.traceback:
            parts.append(f"--- rank {ff.rank} traceback ---\n{ff.traceback.rstrip()}")
        for outcome in sorted(self.ranks, key=lambda r: r.rank):
            for stream in ("stdout", "stderr"):
                text = outcome.tail(stream, tail_lines)
                if text.strip():
                    parts.append(f"--- rank {outcome.rank} {stream} (last lines) ---\n{text}")
        for i, path in enumerate(self.agent_logs):
            text = read_tail(path, tail_lines)
            if text.strip():
                parts.append(f"--- agent {i} log (last lines) ---\n{text}")
        for who, stack in self.stacks.items():
            parts.append(f"--- stacks of {who} ---\n{stack.rstrip()}")
        return "\n\n".join(parts)

    def raise_for_status(self) -> GroupResult:
        if not self.ok:
            raise GroupFailed(self)
        return self

    @property
    def stacks_note(self) -> str:
        """Whether a timed-out group left its stacks: said only where it is so."""
        return "stacks captured" if self.stacks else "no stacks captured"

    def _verdict(self) -> str:
        if self.cut_short is not None:
            return f"{self.cut_short.describe()}; {self.stacks_note} and the whole tree killed"
        if self.timed_out:
            return f"passed its deadline; {self.stacks_note} and the whole tree killed"
        if self.ok:
            return f"succeeded in {self.duration_s:.1f}s"
        codes = ", ".join(describe(rc) for rc in self.agent_returncodes)
        return f"failed (agents: {codes})"


class GroupFailed(Violation, AssertionError):
    """A group that was expected to succeed did not; the message is the group's report."""

    def __init__(self, result: GroupResult) -> None:
        super().__init__(result.report())
        self.result = result


def error_type(error: str | None) -> str | None:
    """The exception type an error written as ``Type: message`` names (the workload's records
    and torchelastic's error files write them so); None if it names none."""
    head, sep, _ = (error or "").partition(": ")
    name = head.rsplit(".", 1)[-1]
    return name if sep and name.isidentifier() else None


def _pid_of_label(label: str) -> int | None:
    """The PID in a stack label such as ``rank 1 (pid 123)``."""
    _, _, rest = label.rpartition("(pid ")
    digits = rest.rstrip(")")
    return int(digits) if digits.isdigit() else None


def read_tail(path: Path | None, lines: int) -> str:
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 64 * 1024))
        data = f.read().decode(errors="replace")
    return "\n".join(data.splitlines()[-lines:])
