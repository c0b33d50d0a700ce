"""The agent side of a warm launch: torchrun's own code path, with workers forked.

The warm server forks one process per agent. That process becomes what ``python -m
torch.distributed.run ARGV`` would be (its own session, the launch's environment and working
directory, its log on stdout/stderr) and runs ``torch.distributed.run.main(ARGV)`` with two
changes: workers start by fork and run the entry point in-process (``runpy``) instead of
exec'ing a new interpreter, and failed workers are reported as torchrun's subprocess path
reports them. Everything else (argument parsing, c10d/static rendezvous, the TCPStore, the
elastic agent, log files, error files, the failure summary) is torchrun's.

Forked workers skip interpreter start-up, so the sitecustomize spawn hook's start-up record
never runs in them (its at-fork record comes before the rank variables exist): each worker
records itself in the launch's PID directory, in the hook's format.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import runpy
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from zephon_chaos.procs import PID_DIR_VAR, start_ticks
from zephon_chaos.procs._spawnhook.sitecustomize import rank_record
from zephon_chaos.workload.spawn_hook import spawn_hook_call

PR_SET_PDEATHSIG = 1


def record_pid(argv: Sequence[str]) -> None:
    """Write ``<pid>-<start ticks>`` with the rank variables, in the spawn hook's format.

    Replaces the file atomically: the hook's at-fork record of the same process (written
    before the rank variables existed) may already be there.
    """
    pid_dir = os.environ.get(PID_DIR_VAR)
    if not pid_dir:
        return
    pid = os.getpid()
    ticks = start_ticks(pid) or 0
    record = {**rank_record(list(argv)), "forked": True}
    final = os.path.join(pid_dir, f"{pid}-{ticks}")
    partial = os.path.join(pid_dir, f".{pid}-{ticks}.partial")
    with contextlib.suppress(OSError):
        fd = os.open(partial, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        os.write(fd, json.dumps(record).encode())
        os.close(fd)
        os.replace(partial, final)


def _rearm_spawn_hook() -> None:
    """Let the spawn hook record this process and arm its stack dump in the current PID dir.

    The hook ran at fork with the server's environment; after the switch to the launch's
    environment the agent must appear (with its stack file) in the launch's own PID dir.
    """
    spawn_hook_call("_record")


def _split_command(cmd_args: Sequence[str]) -> tuple[bool, str, list[str]]:
    """(module?, entry, args) from torchrun's ``[-u] [-m] ENTRY ARGS...`` command tail."""
    rest = list(cmd_args)
    while rest and rest[0] == "-u":
        rest.pop(0)
    module = bool(rest) and rest[0] == "-m"
    if module:
        rest.pop(0)
    if not rest:
        raise ValueError("the warm lane got no entry point to run")
    return module, rest[0], rest[1:]


def worker_main(python: str, *cmd_args: str) -> None:
    """Run one rank: what ``python -u [-m] ENTRY ARGS`` would do, in this forked process.

    ``python`` is torchrun's interpreter argument, kept only to match its command line.
    A clean ``sys.exit(0)`` is a normal return (the agent needs the return value); any other
    exit status passes on as it is, and an uncaught exception ends the worker as it ends the
    interpreter (:func:`_die_uncaught`), never through torchelastic's fork wrapper.
    """
    try:
        module, entry, args = _split_command(cmd_args)
        _reset_inherited_state()  # before the record: a recorded rank is a signalable rank
        record_pid([python, *cmd_args])
        sys.argv = [entry, *args]
        run: Callable[[], object]
        if module:
            sys.path[0] = os.getcwd()
            run = functools.partial(runpy.run_module, entry, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(entry))
            run = functools.partial(runpy.run_path, entry, run_name="__main__")
        run()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise  # torchelastic's ``record`` passes a failing exit status on, writing nothing
    except BaseException as exc:  # every uncaught exception ends the rank here
        _die_uncaught(exc)
    finally:
        spawn_hook_call("_note_exit")  # the worker ends in os._exit: no atexit runs
        _flush()


def _die_uncaught(exc: BaseException) -> NoReturn:
    """End as ``python ENTRY`` ends on an uncaught exception: its traceback on stderr, then
    exit status 1; a ``KeyboardInterrupt`` ends in death by SIGINT, and a signal the agent's
    inherited handler turned into torchelastic's ``SignalException`` (one arriving before
    :func:`_reset_inherited_state`) in death by that signal, as it would kill an exec'd rank.

    Letting it escape instead would reach torchelastic's fork wrapper, ``_wrap``, whose
    ``record`` rewrites the rank's error file *in place* (torch's ``ErrorHandler`` opens it
    with "w", truncating the workload's whole file, then dumps). A rank the agent stops inside
    that write (it SIGTERMs the others as soon as one fails) leaves the file empty, and
    ``ProcessFailure`` re-raises the ``JSONDecodeError``: the agent crashes and every rank's
    exit status and message are lost. An exec'd rank has no such second writer.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException

    sig: int | None = None
    if isinstance(exc, SignalException):
        sig = int(exc.sigval)
    else:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        if isinstance(exc, KeyboardInterrupt):
            sig = signal.SIGINT
            spawn_hook_call("_note_exit")  # the interpreter runs atexit before that kill
    if sig is not None:
        _flush()
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    raise SystemExit(1) from None


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _reset_inherited_state() -> None:
    """Undo what a fresh interpreter would not have: cached temp dir, handlers, threads.

    The agent's handlers (torchelastic turns SIGTERM/SIGINT/SIGHUP/SIGQUIT into a
    ``SignalException``; the death clock watches SIGCHLD) must not survive the fork: a rank
    the agent stops with SIGTERM dies of it, as an exec'd interpreter would. Nor may the
    parent-death signal torch's multiprocessing arms in the child: torchrun's exec'd workers
    outlive a killed agent (the harness reaps them), and so must these.
    """
    _clear_parent_death_signal()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tempfile.tempdir = None
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))


def _clear_parent_death_signal() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)


def run_agent(request: dict[str, Any]) -> int:
    """Become one torchrun agent for ``request`` (called in a freshly forked process).

    ``request``: ``argv`` (torchrun's arguments), ``env``, ``cwd``, ``log``. Returns the exit
    status torchrun would return; the caller ``os._exit``\\ s with it.
    """
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    _redirect_stdio(str(request["log"]))
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})
    tempfile.tempdir = None
    argv = [str(a) for a in request["argv"]]
    sys.argv = ["torch.distributed.run", *argv]
    _rearm_spawn_hook()
    record_pid(sys.argv)
    import torch.distributed.run as torchrun
    from torch.distributed.launcher.api import elastic_launch

    def launch_forked(config: Any, entrypoint: Any) -> Any:
        config.start_method = "fork"
        python = entrypoint if isinstance(entrypoint, str) else sys.executable
        return elastic_launch(config=config, entrypoint=_bound(worker_main, python))

    torchrun.elastic_launch = launch_forked  # type: ignore[assignment]
    _report_every_failed_worker()
    try:
        torchrun.main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        _flush()
    return 0


class DeathClock:
    """When each worker died, to the millisecond, without reaping it.

    A SIGCHLD handler peeks at the watched workers with ``waitid(WNOWAIT)`` (the zombie stays
    for multiprocessing to reap) and stamps the first time each is seen exited. With two
    ranks dying within one monitor interval, the stamps say which died first.
    """

    def __init__(self) -> None:
        self.watched: set[int] = set()
        self.died: dict[int, float] = {}

    def install(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: self.look())

    def watch(self, pids: list[int]) -> None:
        self.watched.update(pids)
        self.look()

    def look(self) -> None:
        now = time.time()
        for pid in list(self.watched - self.died.keys()):
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None  # already reaped: multiprocessing saw it first
                self.died.setdefault(pid, now)
            if info is not None:
                self.died[pid] = now

    def when(self, pid: int) -> float:
        self.look()
        return self.died.get(pid, time.time())


def _report_every_failed_worker() -> None:
    """Report failed workers as torchrun's subprocess path does: all of them, in death order.

    torchelastic's fork path reports only the first failed index it sees, so when one rank
    dies and its peer fails right after (gloo: connection reset), the peer could be named
    the root cause. The subprocess path lists every rank that has failed by the poll, stops
    the rest and lists those too; the root cause is the earliest failure. Here each failure
    carries its death time (``DeathClock``) and they are listed in that order, so the
    earliest is the one that died first even within one monitor interval.
    """
    from torch.distributed.elastic.multiprocessing.api import (
        MultiprocessContext,
        ProcessFailure,
        RunProcsResult,
    )

    clock = DeathClock()
    clock.install()
    original_poll = MultiprocessContext._poll
    original_start = MultiprocessContext._start

    def start(ctx: Any) -> None:
        original_start(ctx)
        clock.watch([p.pid for p in ctx._pc.processes])

    def failures(ctx: Any, into: dict[int, Any]) -> None:
        for local_rank, proc in enumerate(ctx._pc.processes if ctx._pc else ()):
            code = proc.exitcode
            if local_rank not in into and code not in (None, 0):
                failure = ProcessFailure(
                    local_rank=local_rank,
                    pid=proc.pid,
                    exitcode=code,
                    error_file=ctx.error_files[local_rank],
                )
                failure.timestamp = int(clock.when(proc.pid))
                into[local_rank] = failure

    def in_death_order(found: dict[int, Any]) -> dict[int, Any]:
        order = sorted(found, key=lambda r: (clock.when(found[r].pid), r))
        return {r: found[r] for r in order}

    def poll(ctx: Any) -> Any:
        failed: dict[int, Any] = {}
        failures(ctx, failed)
        if failed:
            ctx.close()
        else:
            result = original_poll(ctx)
            if result is None or not result.is_failed():
                return result
            # A worker failed between our look and torchelastic's own: its path has stopped
            # the rest and names that one alone.
        failures(ctx, failed)  # every worker has ended now, the stopped ones too
        return RunProcsResult(
            failures=in_death_order(failed), stdouts=ctx.stdouts, stderrs=ctx.stderrs
        )

    MultiprocessContext._start = start  # type: ignore[method-assign]
    MultiprocessContext._poll = poll  # type: ignore[method-assign]


def _bound(fn: Any, first: str) -> Any:
    """``fn`` with its first argument fixed, keeping a name torchelastic can print."""

    def entry(*args: str) -> None:
        fn(first, *args)

    entry.__name__ = entry.__qualname__ = "warm_worker"
    return entry


def _redirect_stdio(log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(devnull)
