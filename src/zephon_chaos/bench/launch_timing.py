"""Wall times of launches measured side by side: ours (CLI, warm) against bare torchrun.

Shared by ``benchmarks/launch.py``, ``launch_overhead.py`` and ``scenario.py``. Every run
has a deadline and is reaped; the trivial rank program is ``trivial_rank``, a gloo all-reduce
shipped in the package (found whatever the install mode). "Bare" is what a person types:
``python -m torch.distributed.run --standalone --nproc-per-node N -m MODULE``, with no log
directory, no spawn hook, no PID records.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from zephon_chaos.errors import HarnessError
from zephon_chaos.launch import LaunchSpec, TorchrunGroup
from zephon_chaos.launch.result import GroupResult
from zephon_chaos.runner import Launcher, ScenarioRunner, cli_launcher
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, DataSpec, PipelineSpec

TRIVIAL_MODULE = "zephon_chaos.bench.trivial_rank"
DEADLINE_S = 120.0
SCENARIO_WORLDS = (2, 2, 3)
"""The launches of the 3-phase scenario: reference at 2, save at 2, resume at 3."""


class LaunchFailed(HarnessError, RuntimeError):
    """A timed launch did not succeed; the numbers would be meaningless."""


def three_phase_scenario() -> Scenario:
    """Reference (W=2), save at step 2 (W=2), resume (W=3): three launches."""
    return Scenario(
        data=DataSpec(),
        pipeline=PipelineSpec(canonical_replicas=6),
        launches=(Launch(2, 3, (CheckpointAt(2),)), Launch(3, 2)),
        name="bench-3-phase",
    )


@contextlib.contextmanager
def private_root(prefix: str = "zc-bench-") -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, 0o700)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bare_env(tmpdir: Path) -> dict[str, str]:
    ours = ("ZEPHON_CHAOS_", "TORCHELASTIC")
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    env.update({"TMPDIR": str(tmpdir), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    return env


def bare_torchrun(nproc: int, root: Path, entry: Sequence[str] = ("-m", TRIVIAL_MODULE)) -> float:
    """Seconds for one bare ``torchrun --standalone ENTRY...`` on ``nproc`` ranks."""
    tmp = Path(tempfile.mkdtemp(prefix="bare-", dir=root))
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(nproc), *entry]
    began = time.monotonic()
    proc = subprocess.Popen(argv, env=bare_env(tmp), cwd=tmp, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise LaunchFailed(f"bare torchrun on {nproc} ranks passed {DEADLINE_S} s") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    elapsed = time.monotonic() - began
    if proc.returncode != 0:
        raise LaunchFailed(f"bare torchrun failed ({proc.returncode}):\n{out.decode()[-2000:]}")
    shutil.rmtree(tmp, ignore_errors=True)
    return elapsed


def our_launch(nproc: int, root: Path, name: str) -> float:
    """Seconds for one launch of the trivial rank program through our CLI path (start to
    reaped)."""
    began = time.monotonic()
    spec = LaunchSpec(entry=TRIVIAL_MODULE, module=True, nproc=nproc, name=name)
    with TorchrunGroup(spec, root / name) as group:
        result = group.run()
    elapsed = time.monotonic() - began
    if not result.ok:
        raise LaunchFailed(result.report())
    shutil.rmtree(root / name, ignore_errors=True)
    return elapsed


def bare_scenario(root: Path) -> float:
    """Seconds for three bare launches of the trivial script with the scenario's rank counts."""
    return sum(bare_torchrun(n, root) for n in SCENARIO_WORLDS)


def bare_workload_scenario(root: Path, name: str) -> float:
    """Seconds of the scenario's own three launches, each typed as a person would:
    ``torchrun --standalone -m zephon_chaos.rank SPEC``. The runner writes the specs and
    judges the records (so the bare launches provably did the scenario's work); only the
    launches' own seconds count."""
    work = root / name
    seconds: list[float] = []

    def launch(spec: LaunchSpec) -> GroupResult:
        entry = ["-m", str(spec.entry)] if spec.module else [str(spec.entry)]
        took = bare_torchrun(spec.nproc, work, [*entry, *spec.args])
        seconds.append(took)
        return GroupResult(name=spec.name, agent_returncodes=[0], ranks=[], timed_out=False,
                           duration_s=took, workdir=work, agent_logs=[])

    work.mkdir()
    outcome = ScenarioRunner(work, launcher=launch, deadline_s=DEADLINE_S).run(
        three_phase_scenario()
    )
    if not outcome.ok:
        raise LaunchFailed(outcome.report())
    shutil.rmtree(work, ignore_errors=True)
    return sum(seconds)


def scenario_seconds(launcher: Callable[[Path], Launcher], root: Path, name: str) -> float:
    """Seconds for the 3-phase scenario through ``launcher`` (fresh runner: no cached reference)."""
    work = root / name
    began = time.monotonic()
    runner = ScenarioRunner(work, launcher=launcher(work), deadline_s=DEADLINE_S)
    outcome = runner.run(three_phase_scenario())
    elapsed = time.monotonic() - began
    if not outcome.ok:
        raise LaunchFailed(outcome.report())
    shutil.rmtree(work, ignore_errors=True)
    return elapsed


def cli(work: Path) -> Launcher:
    return cli_launcher(work)


def round_args(doc: str, argv: list[str] | None, rounds: int, max_seconds: float,
               nproc: int | None = None) -> argparse.Namespace:
    """The options every side-by-side script takes: rounds, a time bound, maybe ``--nproc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--max-seconds", type=float, default=max_seconds)
    if nproc is not None:
        parser.add_argument("--nproc", type=int, default=nproc)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.max_seconds <= 0:
        parser.error("--rounds must be at least 1 and --max-seconds above 0")
    return args


def alternate(ways: dict[str, Callable[[int], float]], rounds: int,
              max_seconds: float) -> dict[str, list[float]]:
    """Seconds of each way per round, the order reversed every other round so that drift in
    the machine's load hits every way alike; stops starting rounds past ``max_seconds``."""
    times: dict[str, list[float]] = {who: [] for who in ways}
    began = time.monotonic()
    for i in range(rounds):
        if not fits(began, max_seconds, i):
            print(f"  stopped after {i} rounds (--max-seconds {max_seconds:.0f})")
            break
        for who in list(ways) if i % 2 == 0 else list(reversed(ways)):
            times[who].append(ways[who](i))
    return times


def fits(began: float, max_seconds: float, rounds_done: int) -> bool:
    """Whether one more round (as long as the average so far) ends within ``max_seconds``."""
    if rounds_done == 0:
        return True
    elapsed = time.monotonic() - began
    return elapsed + elapsed / rounds_done <= max_seconds


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def line(label: str, values: list[float]) -> str:
    runs = ", ".join(f"{v:.2f}" for v in values)
    return f"  {label:34s} median {median(values):6.2f} s   ({runs})"


def verdict(name: str, value: float, target: str, ok: bool) -> str:
    return f"  {name:34s} {value:6.2f}   target {target:8s} {'met' if ok else 'MISSED'}"

