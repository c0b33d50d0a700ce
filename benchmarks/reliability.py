"""Reliability of the CPU suite: run it N times and count what should always be zero.

    python benchmarks/reliability.py --runs 3 [--workers 2] [--launch warm|cli] [-- pytest args]

Per run it prints failures (from the JUnit report), processes the run left alive (anything
carrying this run's marker variable, or a group tag that was not there before), listening
ports those processes hold (and new listening ports on the machine, for comparison), port
collisions (static-port retries the harness recorded as JUnit properties, and EADDRINUSE in
failure reports), and the leaks the per-test hygiene verdict caught. Leftovers are killed
after each run so that runs stay independent. Exit status 1 if any count is not zero.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from zephon_chaos.launch.ports import EADDRINUSE_MARKERS
from zephon_chaos.procs import PID_DIR_VAR, TAG_VAR, ProcId, proc_id

RUN_VAR = "ZEPHON_CHAOS_RELIABILITY_RUN"
MARKER = "not gpu and not slow"


@dataclass
class RunFacts:
    index: int
    exit_code: int
    seconds: float
    tests: int = 0
    failures: list[str] = field(default_factory=list)
    leaked_processes: list[str] = field(default_factory=list)
    leaked_ports: list[str] = field(default_factory=list)
    new_ports_on_machine: int = 0
    port_retries: int = 0
    eaddrinuse: int = 0
    hygiene_leaks: int = 0
    leftover_entries: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.failures or self.leaked_processes or self.leaked_ports or self.port_retries
            or self.eaddrinuse or self.hygiene_leaks or self.leftover_entries
            or self.exit_code != 0
        )

    def line(self) -> str:
        return (
            f"run {self.index}: {self.tests} tests in {self.seconds:.0f}s, exit {self.exit_code}; "
            f"failures {len(self.failures)}, leaked processes {len(self.leaked_processes)}, "
            f"leaked ports {len(self.leaked_ports)} (new listening ports on the machine: "
            f"{self.new_ports_on_machine}), port collisions {self.port_retries} retries + "
            f"{self.eaddrinuse} EADDRINUSE, hygiene verdicts {self.hygiene_leaks}, "
            f"leftover temp entries {len(self.leftover_entries)}"
        )


def scan(marker: str, temp: Path) -> dict[ProcId, str]:
    """Live processes of this run: carrying its marker variable, or a group tag with spawn
    records under its temp folder."""
    needle = f"{RUN_VAR}={marker}".encode()
    records = f"{PID_DIR_VAR}={temp}".encode()
    found: dict[ProcId, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in env or (f"{TAG_VAR}=".encode() in env and records in env):
            pid = proc_id(int(name))
            if pid is not None and pid.alive():
                found[pid] = " ".join(pid.cmdline().split())[:120]
    for record in temp.glob("**/pids/*-*"):
        pid_text, _, ticks = record.name.partition("-")
        if pid_text.isdigit() and ticks.isdigit():
            pid = ProcId(int(pid_text), int(ticks))
            if pid.alive():
                found.setdefault(pid, " ".join(pid.cmdline().split())[:120])
    return found


def listening() -> dict[tuple[str, int], int | None]:
    return {
        (c.laddr.ip, c.laddr.port): c.pid
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr
    }


def junit_facts(path: Path, facts: RunFacts) -> None:
    if not path.exists():
        facts.failures.append(f"no JUnit report at {path}")
        return
    for case in ET.parse(path).getroot().iter("testcase"):
        facts.tests += 1
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            facts.failures.append(name)
        for prop in case.iter("property"):
            key, value = prop.get("name", ""), prop.get("value", "0")
            if key.endswith(".port_retries") and value.isdigit():
                facts.port_retries += int(value)
            elif key.startswith("hygiene.leaked_") and value.isdigit():
                facts.hygiene_leaks += int(value)


def count_eaddrinuse(folder: Path, log: Path) -> int:
    files = [log, *folder.rglob("report*.txt")] if folder.is_dir() else [log]
    total = 0
    for path in files:
        text = path.read_text(errors="replace") if path.exists() else ""
        total += sum(text.count(m) for m in EADDRINUSE_MARKERS if m != "address already in use")
    return total


def run_once(index: int, args: argparse.Namespace, extra: list[str], out: Path) -> RunFacts:
    marker = uuid.uuid4().hex
    ports_before = listening()
    junit, artifacts = out / f"run{index}.xml", out / f"run{index}-artifacts"
    log, temp = out / f"run{index}.log", out / f"run{index}-tmp"
    temp.mkdir(mode=0o700)
    argv = [
        sys.executable, "-m", "pytest", "-m", MARKER, "-n", str(args.workers),
        "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", f"--chaos-artifacts={artifacts}",
        f"--chaos-launch={args.launch}", *extra,
    ]
    # A temp folder of its own: its ledgers and spawn records are this run's and no one else's.
    env = dict(os.environ, **{RUN_VAR: marker, "TMPDIR": str(temp),
                              "ZEPHON_CHAOS_TMP_BASE": str(temp)})
    started = time.monotonic()
    with open(log, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                cwd=args.repo, start_new_session=True)
        try:
            code = proc.wait(timeout=args.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
    facts = RunFacts(index, code, time.monotonic() - started)
    junit_facts(junit, facts)
    left = scan(marker, temp)
    facts.leaked_processes = [f"{p.pid} ({c})" for p, c in sorted(left.items())]
    ports_after = listening()
    new = {k: v for k, v in ports_after.items() if k not in ports_before}
    facts.new_ports_on_machine = len(new)
    ours = {p.pid for p in left}
    facts.leaked_ports = [f"{ip}:{port} (pid {pid})" for (ip, port), pid in sorted(new.items())
                          if pid in ours]
    facts.eaddrinuse = count_eaddrinuse(artifacts, log)
    for p in left:  # leave nothing for the next run
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, signal.SIGKILL)
    facts.leftover_entries = _leftovers(temp)
    return facts


def _leftovers(temp: Path) -> list[str]:
    """What the run left in its temp folder (the session folders must be gone)."""
    found = []
    for entry in sorted(temp.iterdir()):
        if entry.name == f"zephon-chaos-{os.getuid()}":
            found += [str(s) for s in sorted((entry / "sessions").glob("*"))]
        elif not entry.name.startswith("pytest-of-"):
            found.append(str(entry))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="xdist workers (-n)")
    parser.add_argument(
        "--launch", choices=("cli", "warm"), default="warm",
        help="--chaos-launch of the suite (default: warm, as `tox -e cpu` runs it)",
    )
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="deadline of one run")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--out", type=Path, default=None, help="keep logs and reports here")
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    out = args.out or Path(tempfile.mkdtemp(prefix="zc-reliability-"))
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"suite: pytest -m {MARKER!r} -n {args.workers} --chaos-launch {args.launch} "
        f"{' '.join(extra)}; reports in {out}"
    )
    runs = []
    for i in range(1, args.runs + 1):
        facts = run_once(i, args, extra, out)
        runs.append(facts)
        print(facts.line(), flush=True)
        for label, items in (("failed", facts.failures), ("left alive", facts.leaked_processes),
                             ("port left listening", facts.leaked_ports),
                             ("left in temp", facts.leftover_entries)):
            for item in items[:10]:
                print(f"    {label}: {item}")
    print(
        f"total over {len(runs)} run(s): {sum(r.tests for r in runs)} tests, "
        f"failures {sum(len(r.failures) for r in runs)}, "
        f"leaked processes {sum(len(r.leaked_processes) for r in runs)}, "
        f"leaked ports {sum(len(r.leaked_ports) for r in runs)}, "
        f"port collisions {sum(r.port_retries + r.eaddrinuse for r in runs)}, "
        f"hygiene verdicts {sum(r.hygiene_leaks for r in runs)}"
    )
    return 0 if all(r.clean for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
