"""Measure which pinned Zephon defect each proposed patch fixes: the specificity matrix.

Usage: ``python scripts/patch_matrix.py [--patch NAME ...] [--defect NAME ...] [--baseline |
--only-baseline] [--results FILE] [--out FILE] [--work DIR] [--cache DIR] [--deadline S]
[--render-only]``.

A row is Zephon 0.2.0 with one patch alone (every patch by default; ``--baseline`` adds the
release itself). For each row ``scripts/patched_zephon.py`` installs that build into a
folder of its own, which goes first on ``PYTHONPATH`` (after this checkout's ``src``): only
Zephon is swapped, torch and the rest come from the running environment, and every process
the tests start (torchrun's ranks, the reproduction scripts, MTP children and workers)
inherits the variable. pytest then runs every strict xfail of the chosen defects (slow ones
included) and the smoke tests of ``defects.toml``, with ``-p no:randomly`` and a JUnit
report, whose values give each test's outcome.

A cell is ``flipped`` when every xfail of the defect XPASSed under the row's patch (strict:
the test fails, CI turns red: the fix is seen), ``xfail`` when every one still failed as
pinned, else the outcomes counted. A patch is specific when its own column is ``flipped`` and
every other is ``xfail``. The results accumulate in ``--results`` (JSON: rows measured
earlier are kept, so a matrix can be measured a few rows at a time); ``--out`` gets the
Markdown table, unmeasured cells marked as such. Exits 1 when a measured cell, or a smoke
test, is not what a specific patch gives.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import patched_zephon as pz

ROOT = pz.ROOT
BASELINE = "none"
"""The row of the release as it is."""
SMOKE = "smoke"
"""The column of the smoke tests: they pass under every patch."""
FLIPPED, PINNED, UNMEASURED = "flipped", "xfail", None
DEADLINE_S = 3600.0
"""One row's pytest run: the slow reproductions take up to 10 minutes each under load."""

Matrix = dict[str, dict[str, str | None]]
"""Row (patch name, or BASELINE) -> column (defect name, or SMOKE) -> cell."""


@dataclass(frozen=True)
class Outcome:
    """One test's result, read from a JUnit ``testcase``."""

    file: str
    name: str
    outcome: str  # passed, xfail, xpass, failed, error, skipped


def outcomes(junit_xml: str) -> list[Outcome]:
    """Each testcase of a pytest JUnit report, with its outcome."""
    found = []
    for case in ET.fromstring(junit_xml).iter("testcase"):
        file = case.get("classname", "").replace(".", "/") + ".py"
        name = case.get("name", "")
        if (skipped := case.find("skipped")) is not None:
            outcome = "xfail" if skipped.get("type") == "pytest.xfail" else "skipped"
        elif (failure := case.find("failure")) is not None:
            xpass = (failure.get("message") or "").startswith("[XPASS(strict)]")
            outcome = "xpass" if xpass else "failed"
        elif case.find("error") is not None:
            outcome = "error"
        else:
            outcome = "passed"
        found.append(Outcome(file, name, outcome))
    return found


def _matches(node: str, result: Outcome) -> bool:
    """Whether ``result`` is a run of ``node`` (``path::test``, any parameters)."""
    path, _, test = node.partition("::")
    return result.file == path and result.name.split("[")[0] == test


def cell(nodes: tuple[str, ...], results: list[Outcome]) -> str | None:
    """A column's cell from the outcomes of its tests; None when none of them ran."""
    ran = [r.outcome for r in results if any(_matches(n, r) for n in nodes)]
    if not ran:
        return UNMEASURED
    counts = Counter(ran)
    if set(counts) == {"xpass"}:
        return FLIPPED
    if set(counts) == {"xfail"}:
        return PINNED
    return ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))


def row(results: list[Outcome], defects: dict[str, pz.Defect], smoke: tuple[str, ...]) -> dict:
    """One row of the matrix from one run's outcomes."""
    cells = {name: cell(d.xfails, results) for name, d in defects.items()}
    ran = [r.outcome for r in results if any(_matches(n, r) for n in smoke)]
    cells[SMOKE] = UNMEASURED if not ran else ("passed" if set(ran) == {"passed"} else
                                               ", ".join(sorted(set(ran))))  # fmt: skip
    return cells


def expected(row_name: str, column: str) -> str:
    """The cell a specific patch gives."""
    if column == SMOKE:
        return "passed"
    return FLIPPED if column == row_name else PINNED


def surprises(matrix: Matrix) -> list[tuple[str, str, str]]:
    """Measured cells that are not what a specific patch gives: (row, column, cell)."""
    return [
        (r, c, value)
        for r, cells in matrix.items()
        for c, value in cells.items()
        if value is not UNMEASURED and value != expected(r, c)
    ]


def render(matrix: Matrix, defects: dict[str, pz.Defect], command: str) -> str:
    """The matrix as Markdown: columns numbered (legend below), unmeasured cells named."""
    columns = [*defects, SMOKE]
    head = ["patch \\ defect", *(f"D{i}" for i in range(1, len(defects) + 1)), SMOKE]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = [r for r in [BASELINE, *defects] if r in matrix]
    for r in order:
        cells = []
        for c in columns:
            value = matrix[r].get(c)
            text = "not measured" if value is UNMEASURED else value
            if value is not UNMEASURED and value != expected(r, c) and r != BASELINE:
                text = f"**{text}**"
            cells.append(text)
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    legend = [f"- D{i}: `{name}`" for i, name in enumerate(defects, 1)]
    missing = [r for r in defects if r not in matrix]
    notes = [
        "",
        *legend,
        "",
        "`flipped`: every strict xfail of the defect XPASSed (the test fails: the fix is "
        "seen); `xfail`: every one still failed as pinned; a bold cell is not what a "
        "specific patch gives. The `none` row is the release itself.",
    ]
    if missing:
        notes.append(f"Rows not measured: {', '.join(missing)}.")
    notes += ["", f"Made by: `{command}`"]
    return "\n".join(lines + notes) + "\n"


def run_row(
    name: str,
    nodes: list[str],
    work: Path,
    cache: Path,
    deadline_s: float,
    defects: dict[str, pz.Defect],
) -> list[Outcome]:
    """Install the row's build into ``work/<name>`` and run ``nodes`` against it."""
    target = work / name
    names = [] if name == BASELINE else [name]
    with tempfile.TemporaryDirectory(prefix="zephon-wheel-") as tmp:
        wheel = pz.download(cache)
        pz.install(pz.build(wheel, names, Path(tmp), defects), target)
    if pz.installed_patches(target) != names:
        raise pz.PatchError(f"{target} does not hold zephon with {names or 'no patch'}")
    junit = work / f"{name}.xml"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(target), *filter(None, [env.get("PYTHONPATH")])]
    )
    argv = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider"]
    argv += ["-q", "-o", "junit_family=xunit1", f"--junitxml={junit}", *nodes]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True)
    try:
        proc.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"patch_matrix: row {name} passed its {deadline_s:.0f} s deadline", file=sys.stderr)
    return outcomes(junit.read_text()) if junit.exists() else []


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patch", action="append", metavar="NAME", help="rows (default all)")
    parser.add_argument("--defect", action="append", metavar="NAME", help="columns run")
    parser.add_argument("--baseline", action="store_true", help="add the release's row")
    parser.add_argument("--only-baseline", action="store_true", help="the release's row alone")
    parser.add_argument("--results", type=Path, help="JSON results, kept across runs")
    parser.add_argument("--out", type=Path, help="write the Markdown matrix here")
    parser.add_argument("--work", type=Path, help="builds and reports (default: temporary)")
    parser.add_argument("--cache", type=Path, help="where the release wheel is kept")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="per row, s")
    parser.add_argument("--render-only", action="store_true", help="run nothing: render --results")
    args = parser.parse_args(argv)
    defects = pz.load_defects()
    try:
        rows = pz.select(args.patch or "all", list(defects))
        columns = pz.select(args.defect or "all", list(defects))
    except pz.PatchError as exc:
        print(f"patch_matrix: {exc}", file=sys.stderr)
        return 2
    if args.baseline:
        rows.insert(0, BASELINE)
    if args.only_baseline:
        rows = [BASELINE]
    if args.render_only:
        rows = []
    smoke = pz.smoke_tests()
    nodes = [n for c in columns for n in defects[c].xfails] + list(smoke)
    matrix: Matrix = json.loads(args.results.read_text()) if args.results and \
        args.results.exists() else {}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="patch-matrix-") as tmp:
        work = args.work or Path(tmp)
        cache = args.cache or work / "release"
        for name in rows:
            began = time.monotonic()
            try:
                results = run_row(name, nodes, work, cache, args.deadline, defects)
            except pz.PatchError as exc:
                print(f"patch_matrix: row {name}: {exc}", file=sys.stderr)
                return 1
            measured = row(results, {c: defects[c] for c in columns}, smoke)
            matrix[name] = {**matrix.get(name, {}), **measured}
            print(f"patch_matrix: row {name} in {time.monotonic() - began:.0f} s: {measured}")
            if args.results:
                args.results.write_text(json.dumps(matrix, indent=1, sort_keys=True) + "\n")
    command = "python scripts/patch_matrix.py " + " ".join(argv)
    text = render(matrix, defects, command.strip())
    if args.out:
        args.out.write_text(text)
    print(text)
    wrong = surprises({r: c for r, c in matrix.items() if r != BASELINE})
    for r, c, value in wrong:
        print(f"patch_matrix: under {r}, {c} is {value}, not {expected(r, c)}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
