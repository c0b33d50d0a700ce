"""A real torchrun group (``python -m torch.distributed.run``) with a deadline and no leftovers.

The agents run in their own sessions, each Python process of the group records its PID at
start-up, and at the end (success, failure, deadline or test teardown) every recorded process
is killed and verified gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from zephon_chaos.launch.deathwatch import DeathWatch
from zephon_chaos.launch.elastic_errors import (
    ElasticFailure,
    agent_crash_note,
    last_exception_line,
    parse_summary,
    read_error_file,
)
from zephon_chaos.launch.exitcodes import describe
from zephon_chaos.launch.first_failure import FailedRank, first_failure
from zephon_chaos.launch.hangwatch import Cut, HangWatcher, progress_mark
from zephon_chaos.launch.launch_env import launch_env
from zephon_chaos.launch.launch_spec import LaunchSpec
from zephon_chaos.launch.ports import LOOPBACK, candidate_port, is_bind_failure
from zephon_chaos.launch.result import GroupResult, RankOutcome, read_tail
from zephon_chaos.launch.spawner import AgentProcess, AgentSpawner, CliSpawner
from zephon_chaos.procs import (
    ProcessRegistry,
    ProcId,
    exit_notes,
    raise_notes,
    recorded_procs,
)
from zephon_chaos.workload.self_faults import self_signals

STATIC_PORT_ATTEMPTS = 5

StackCollector = Callable[["TorchrunGroup"], dict[str, str]]


class TorchrunGroup:
    """One launch: start it, watch it, fault it, wait for it with a deadline, reap it."""

    places_hosts = False
    """Whether this launcher puts agents on hosts of their own (``LaunchSpec.hosts``)."""

    def __init__(
        self,
        spec: LaunchSpec,
        workdir: Path,
        registry: ProcessRegistry | None = None,
        on_deadline: StackCollector | None = None,
        python: str = sys.executable,
        spawner: AgentSpawner | None = None,
    ) -> None:
        spec.validate()
        if spec.hosts > 1 and not self.places_hosts:
            raise ValueError(
                f"{spec.name!r} asks for {spec.hosts} hosts; this launcher runs every agent "
                "here: launch it with launch.netns_group.NetnsGroup (fixture chaos_hosts)"
            )
        if not spec.module:
            # torchrun runs in the group's own directory: a relative script path would break.
            spec = replace(spec, entry=Path(spec.entry).resolve())
        self.spec = spec
        self.workdir = Path(workdir).absolute()  # agents and the warm server run elsewhere
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.tmpdir = self.workdir / "tmp"
        self.tmpdir.mkdir(mode=0o700, exist_ok=True)
        pid_dir = self.workdir / "pids"
        pid_dir.mkdir(mode=0o700, exist_ok=True)
        self.registry = registry or ProcessRegistry(f"zc-{uuid.uuid4().hex[:12]}", pid_dir)
        if registry is not None:
            self.registry.pid_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.on_deadline = on_deadline
        self.python = python
        self.spawner: AgentSpawner = spawner or CliSpawner(python)
        self.agents: list[AgentProcess] = []
        self.agent_logs: list[Path] = []
        self.master_port: int | None = None
        self._store_host: object | None = None
        self._started_at = 0.0
        self._result: GroupResult | None = None
        self._attempt = 0
        self._death_watch = DeathWatch(self.registry.pid_dir)
        self._cut: Cut | None = None
        self._formed_s: float | None = None

    # ---- starting -------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        return launch_env(self.tmpdir, self.registry, self.spec.env)

    def _torchrun_args(self, node: int) -> list[str]:
        """torchrun's own arguments for agent ``node``: what every spawner receives."""
        spec = self.spec
        log_dir = self.workdir / "logs" / f"agent{node}"
        args = ["--nproc-per-node", str(spec.nproc), "--log-dir", str(log_dir)]
        args += ["--redirects", "3", "--max-restarts", str(spec.max_restarts)]
        args += ["--monitor-interval", "0.1", *self._rendezvous_args(node)]
        args += ["-m", str(spec.entry)] if spec.module else [str(spec.entry)]
        return args + list(spec.args)

    def agent_argv(self, node: int) -> list[str]:
        """Agent ``node``'s whole command line on the CLI lane (its own spawner's, if CLI)."""
        cli = self.spawner if isinstance(self.spawner, CliSpawner) else CliSpawner(self.python)
        return cli.command(node) + self._torchrun_args(node)

    def _rendezvous_args(self, node: int) -> list[str]:
        """How agent ``node`` finds the others (``--standalone``, master or rendezvous)."""
        spec = self.spec
        argv: list[str] = []
        if spec.path == "standalone":
            argv += ["--standalone", "--nnodes", "1"]
        elif spec.path == "static":
            assert self.master_port is not None
            argv += [
                "--nnodes",
                str(spec.nnodes),
                "--node-rank",
                str(node),
                "--master-addr",
                LOOPBACK,
                "--master-port",
                str(self.master_port),
            ]
        else:
            host, port = self._rdzv_endpoint()
            argv += [
                "--nnodes",
                str(spec.nnodes),
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                f"{host}:{port}",
                "--rdzv-id",
                self.registry.tag,
                "--rdzv-conf",
                "is_host=false,join_timeout=60",
            ]
        return argv

    def _rdzv_endpoint(self) -> tuple[str, int]:
        if self._store_host is None:
            from zephon_chaos.launch.store_host import StoreHost

            self._store_host = StoreHost()
        host, port = self._store_host.host, self._store_host.port  # type: ignore[attr-defined]
        if self.spec.rdzv_endpoint_for is not None:
            return self.spec.rdzv_endpoint_for(host, port)
        return host, port

    def start(self) -> TorchrunGroup:
        if self.agents:
            raise RuntimeError(f"group {self.spec.name!r} was already started")
        self._started_at = time.monotonic()
        self._death_watch.start()
        self._spawn_agents()
        return self

    def _spawn_agents(self) -> None:
        self._attempt += 1
        if self.spec.path == "static":
            self.master_port = candidate_port()
        env = self.env()
        self.agents, self.agent_logs = [], []
        for node in range(self.spec.nnodes):
            log = self.workdir / f"agent{node}-attempt{self._attempt}.log"
            agent = self.spawner.spawn(node, self._torchrun_args(node), env, self.workdir, log)
            self.registry.add(agent.pid)
            self.agents.append(agent)
            self.agent_logs.append(log)

    # ---- watching and faulting -------------------------------------------------------------
    def worker_records(self) -> dict[ProcId, dict[str, object]]:
        """Spawn records of this group's processes (rank variables, parent, argv)."""
        records: dict[ProcId, dict[str, object]] = {}
        for proc in sorted(recorded_procs(self.registry.pid_dir)):
            entry = self.registry.pid_dir / f"{proc.pid}-{proc.ticks}"
            try:
                records[proc] = json.loads(entry.read_text() or "{}")
            except (OSError, ValueError):
                records[proc] = {}
        return records

    def workers(self) -> dict[int, ProcId]:
        """Global rank → the latest worker process of that rank (direct children of agents)."""
        agent_pids = {a.pid for a in self.agents}
        latest: dict[int, tuple[int, ProcId]] = {}
        for pid_id, rec in self.worker_records().items():
            if rec.get("ppid") not in agent_pids or rec.get("rank") is None:
                continue
            rank = int(str(rec["rank"]))
            restart = int(str(rec.get("restart") or 0))
            if rank not in latest or restart >= latest[rank][0]:
                latest[rank] = (restart, pid_id)
        return {rank: pid_id for rank, (_, pid_id) in latest.items()}

    def signal_rank(self, rank: int, sig: int) -> ProcId:
        """Send ``sig`` to the worker of ``rank``; raise if it is not running."""
        target = self.workers().get(rank)
        if target is None or not self.registry.signal(target, sig):
            raise RuntimeError(f"rank {rank} of {self.spec.name!r} is not running; cannot signal")
        return target

    def signal_agent(self, node: int, sig: int) -> None:
        agent = self.agents[node]
        if agent.poll() is not None:
            raise RuntimeError(f"agent {node} of {self.spec.name!r} already exited")
        agent.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.registry.killed_by_us[agent.pid] = sig

    def remaining_s(self) -> float:
        return self._deadline_s() - (time.monotonic() - self._started_at)

    def _forming(self) -> bool:
        """The spec counts its deadline from a formation not seen yet."""
        return self.spec.formation is not None and self._formed_s is None

    def _deadline_s(self) -> float:
        """The deadline from the start as known now: the formation's own while awaited."""
        formation = self.spec.formation
        return formation.to_form_s if formation and self._forming() else self.spec.deadline_s

    def _look_for_formation(self) -> None:
        """Once the group formed, its deadline counts from then (``LaunchSpec.formation``)."""
        formation = self.spec.formation
        if formation is None or not self._forming() or not formation.formed():
            return
        self._formed_s = time.monotonic() - self._started_at
        later = max(self.spec.deadline_s, self._formed_s + formation.after_s)
        self.spec = replace(self.spec, deadline_s=min(formation.ceiling_s, later))

    def deadline_in(self, seconds: float) -> None:
        """Move the deadline to ``seconds`` from now (after a logical event, say)."""
        self.spec = replace(
            self.spec,
            deadline_s=time.monotonic() - self._started_at + seconds,
            formation=None,
        )

    @property
    def result(self) -> GroupResult | None:
        """The result once :meth:`wait` has returned; None while the group runs."""
        return self._result

    # ---- ending ---------------------------------------------------------------------------
    def wait(self) -> GroupResult:
        if self._result is not None:
            return self._result
        if not self.agents:
            self.start()
        timed_out = False
        stacks: dict[str, str] = {}
        while True:
            timed_out = not self._wait_agents()
            if timed_out or not self._static_bind_failed():
                break
            if self._attempt >= STATIC_PORT_ATTEMPTS:
                break
            self.registry.kill_all()
            self._spawn_agents()
        if self._cut is not None:
            stacks = self._cut.stacks  # taken when the hang was recognised
        elif timed_out and self.on_deadline is not None:
            stacks = self._stacks()
        self.kill()
        self._result = self._collect(timed_out, stacks)
        return self._result

    def run(self) -> GroupResult:
        return self.start().wait()

    def _stacks(self) -> dict[str, str]:
        assert self.on_deadline is not None
        try:
            return self.on_deadline(self)
        except Exception as exc:  # diagnostics must never hide the timeout itself
            return {"stack capture": f"failed: {exc!r}"}

    def _watcher(self) -> HangWatcher | None:
        """The spec's hang watch over this group's files, capturing as at the deadline
        (none without a capture to take: nothing to recognise a hang by)."""
        watch = self.spec.hang_watch
        if watch is None or self.on_deadline is None:
            return None
        folders = (*watch.watched, self.registry.pid_dir)
        return HangWatcher(
            watch, lambda: progress_mark(folders), self._stacks, started_at=self._started_at
        )

    def _wait_agents(self) -> bool:
        """Wait for every agent until the deadline, or until the hang watch recognises a
        known hang (``self._cut``); False if either came first."""
        watcher = self._watcher()
        for agent in self.agents:
            while True:
                self._look_for_formation()
                remaining = self.remaining_s()
                if remaining <= 0:
                    return all(a.poll() is not None for a in self.agents)
                step = min(remaining, *self._poll_intervals(watcher))
                try:
                    agent.wait(timeout=step)
                    break
                except subprocess.TimeoutExpired:
                    if watcher is None or step >= remaining:
                        continue  # the loop's head ends it at the deadline
                    self._cut = watcher.poll()
                    if self._cut is not None:
                        return False
        return True

    def _poll_intervals(self, watcher: HangWatcher | None) -> list[float]:
        """How often the wait must look up from the agents: for the hang watch, and for the
        group's formation while it is awaited (none: one wait to the deadline)."""
        formation = self.spec.formation
        intervals = [] if watcher is None else [watcher.poll_s]
        if formation is not None and self._forming():
            intervals.append(formation.poll_s)
        return intervals or [float("inf")]

    def _static_bind_failed(self) -> bool:
        if self.spec.path != "static" or all(a.returncode == 0 for a in self.agents):
            return False
        return any(is_bind_failure(read_tail(log, 60)) for log in self.agent_logs)

    def kill(self) -> list[ProcId]:
        """Kill every process of the group (agents, workers, their children); return survivors."""
        self._death_watch.stop()  # deaths from here on are the harness's doing
        for alive in self.registry.survivors():
            # Workers may die of their agent's death (PDEATHSIG): still the harness's doing.
            self.registry.killed_by_us.setdefault(alive.pid, signal.SIGKILL)
        for agent in self.agents:
            if agent.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(agent.pid, signal.SIGKILL)
                self.registry.killed_by_us.setdefault(agent.pid, signal.SIGKILL)
        survivors = self.registry.kill_all()
        for agent in self.agents:
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.wait(timeout=5)
        if self._store_host is not None:
            self._store_host.close()  # type: ignore[attr-defined]
            self._store_host = None
        return survivors

    def _collect(self, timed_out: bool, stacks: dict[str, str]) -> GroupResult:
        failures = {}
        silent: dict[int, str] = {}  # node -> why its agent's word on its ranks is missing
        notes: list[str] = []
        for node, log in enumerate(self.agent_logs):
            tail = read_tail(log, 400)
            summary = parse_summary(tail)
            for f in summary:
                failures[f.rank] = f
            if not summary and self._agent_failed(node):
                code_of_agent = self.agents[node].returncode
                silent[node] = f"its agent ended ({describe(code_of_agent)}) without reporting it"
                crash = agent_crash_note(tail)
                if crash is not None:
                    notes.append(crash)
        workers = self.workers()
        records = self.worker_records()
        fired = self_signals(self.registry.pid_dir)
        exited_at = exit_notes(self.registry.pid_dir)
        raised_at = raise_notes(self.registry.pid_dir)
        died = self._death_watch.stop()
        ranks: list[RankOutcome] = []
        failed: list[FailedRank] = []
        for rank in range(self.spec.world_size):
            pid_id = workers.get(rank)
            rec = records.get(pid_id, {}) if pid_id else {}
            local = int(str(rec.get("local_rank") or rank % self.spec.nproc))
            node = self._node_of(pid_id)
            restart = int(str(rec.get("restart") or 0))
            rank_dir = self._rank_log_dir(node, restart, local)
            failure = failures.get(rank)
            code, unknown = self._rank_exit(failure, timed_out, pid_id, node, silent, exited_at)
            outcome = RankOutcome(
                rank=rank,
                local_rank=local,
                node=node,
                pid=pid_id.pid if pid_id else None,
                exitcode=code,
                stdout=rank_dir / "stdout.log" if rank_dir else None,
                stderr=rank_dir / "stderr.log" if rank_dir else None,
                killed_by_harness=bool(pid_id and pid_id.pid in self.registry.killed_by_us),
                self_signal=fired.get(pid_id) if pid_id else None,
                unknown_because=unknown,
            )
            stamp = float("inf")
            error_file = failure.error_file if failure else None
            if error_file is None and rank_dir is not None and (rank_dir / "error.json").exists():
                error_file = rank_dir / "error.json"
            if error_file is not None:
                path = error_file if error_file.is_absolute() else self.workdir / error_file
                outcome.error, outcome.traceback, when = read_error_file(path)
                stamp = when if when is not None else stamp
            elif code not in (0, None):
                outcome.error = last_exception_line(outcome.tail("stderr", 200))
            ranks.append(outcome)
            if code not in (0, None):
                failed.append(
                    FailedRank(
                        outcome,
                        reported=failure is not None,
                        root_cause=bool(failure is not None and failure.root_cause),
                        stamp=stamp,
                        exited_at=exited_at.get(pid_id) if pid_id else None,
                        died_at=died.get(pid_id) if pid_id else None,
                        raised_at=raised_at.get(pid_id) if pid_id else None,
                    )
                )
        first = first_failure(failed)
        notes += self.spawner.notes()
        if self._attempt > 1:
            notes.append(f"note: static port was busy; launched {self._attempt} times")
        return GroupResult(
            name=self.spec.name,
            agent_returncodes=[a.returncode for a in self.agents],
            ranks=ranks,
            timed_out=timed_out,
            duration_s=time.monotonic() - self._started_at,
            workdir=self.workdir,
            agent_logs=list(self.agent_logs),
            first_failure=first,
            stacks=stacks,
            attempts=self._attempt,
            notes=notes,
            cut_short=None if self._cut is None else self._cut.cut_short,
            formed_s=self._formed_s,
        )

    def _rank_exit(
        self,
        failure: ElasticFailure | None,
        timed_out: bool,
        pid_id: ProcId | None,
        node: int,
        silent: dict[int, str],
        exited_at: dict[ProcId, float],
    ) -> tuple[int | None, str | None]:
        """A rank's exit code, from the best evidence there is, and why it is unknown (None:
        known). ``silent``: the nodes whose agent failed and said nothing of its ranks."""
        if failure is not None:
            return failure.exitcode, None
        if timed_out:
            return -signal.SIGKILL, None
        if pid_id is None:
            return None, None
        if pid_id.pid in self.registry.killed_by_us:
            # An orphan of a dead agent, killed in teardown: no agent saw it end.
            return -self.registry.killed_by_us[pid_id.pid], None
        if node in silent:
            return None, silent[node]  # its agent failed and said nothing of it
        if self._agent_failed(node) and pid_id not in exited_at:
            # Its agent listed failures but not this rank, and the rank noted no exit of its
            # own (every normal exit is noted): no evidence of a success.
            return None, "its agent's failure summary omits it, and it noted no exit of its own"
        return 0, None

    def _agent_failed(self, node: int) -> bool:
        return node < len(self.agents) and self.agents[node].returncode not in (0, None)

    def _node_of(self, pid_id: ProcId | None) -> int:
        if pid_id is None:
            return 0
        ppid = self.worker_records().get(pid_id, {}).get("ppid")
        for node, agent in enumerate(self.agents):
            if agent.pid == ppid:
                return node
        return 0

    def _rank_log_dir(self, node: int, restart: int, local: int) -> Path | None:
        base = self.workdir / "logs" / f"agent{node}"
        matches = sorted(base.glob(f"*/attempt_{restart}/{local}"))
        return matches[-1] if matches else None

    def __enter__(self) -> TorchrunGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
