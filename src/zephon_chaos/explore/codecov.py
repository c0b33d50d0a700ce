"""Zephon's own code reached by an exploration's in-process scenarios, with coverage.py.

Ranks of the in-process tier are threads of this interpreter, so one ``coverage.Coverage``
started before a round's rank threads start (coverage's thread tracing follows threads
started after ``start()``) sees every line and branch of Zephon those ranks run. Only the
modules of Zephon this project checks are measured (:data:`FOCUS`): the store aggregation
and coordination, checkpoint encoding and restore, and the engine's merge.

Tracing costs: Python 3.11's ``sys.settrace`` hook runs on every call of every thread, which
measured 1.5x and more the time of an in-process scenario here; so while a search round is
armed the explorer measures one scenario in :data:`MEASURE_EVERY` (starting and stopping the
tracer between scenarios, when no rank thread runs) and says how many it measured.

coverage.py comes with the ``explore`` extra: without it nothing is measured, and the
summary's coverage section says why (:attr:`NotMeasured.NO_COVERAGE`).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import sys
import tempfile
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from zephon_chaos.extras import INSTALL, Extra

MEASURE_EVERY = 4
"""Measure scenarios 0, MEASURE_EVERY, 2 MEASURE_EVERY, ... of the armed rounds."""
_CHECKPOINT_WORDS = r"checkpoint|restore|state|merge|aggregat|round|coordinat|snapshot|resume"
FOCUS: tuple[tuple[str, str | None], ...] = (
    ("_internal/coordination.py", None),
    ("_internal/kvstore.py", None),
    ("_internal/checkpoint/__init__.py", None),
    ("_internal/checkpoint/_codec.py", None),
    ("_internal/checkpoint/_migrations.py", None),
    ("_internal/checkpoint/_schemas.py", None),
    ("_internal/engine.py", _CHECKPOINT_WORDS),
    ("_internal/pipeline.py", _CHECKPOINT_WORDS),
    ("work/static_mixture.py", _CHECKPOINT_WORDS),
)
"""Zephon modules measured (relative to the package), and which of their functions count
when listing the never-reached ones (a pattern on the name; None: all of them): the large
engine and pipeline modules hold much besides checkpointing."""
JSON_NAME = "zephon-coverage.json"
CSV_NAME = "zephon-coverage.csv"


class NotMeasured(Enum):
    """Why Zephon's code was not measured."""

    NO_ZEPHON = "zephon is not importable here"
    NO_COVERAGE = f"coverage.py is not installed ({INSTALL})"
    TRACER_ACTIVE = "another tracer (a debugger or coverage run) was active"
    NO_INPROC = "no in-process round ran; rank processes of torchrun are not measured"


@dataclass(frozen=True)
class ModuleReach:
    module: str
    """Path inside the zephon package, e.g. ``zephon/_internal/coordination.py``."""
    lines: int
    lines_hit: int
    branches: int
    branches_hit: int
    never: tuple[str, ...]
    """Functions (of the module's focus) none of whose lines ran."""


@dataclass(frozen=True)
class CodeReach:
    scenarios: int
    """Scenarios run while measuring."""
    modules: tuple[ModuleReach, ...]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec("zephon")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


class ZephonCoverage:
    """coverage.py over :data:`FOCUS` while started; data stays in memory (no data file)."""

    def __init__(self) -> None:
        self.package = _package_dir()
        self.scenarios = 0
        """Scenarios run while measuring."""
        self.seen = 0
        """Scenarios run while armed."""
        self.armed = False
        self.skipped: NotMeasured | None = (
            NotMeasured.NO_ZEPHON
            if self.package is None
            else NotMeasured.NO_COVERAGE
            if not Extra.COVERAGE.present
            else None
        )
        self._cov: Any = None
        self._running = False

    def arm(self) -> None:
        """From now on measure one scenario in MEASURE_EVERY (the next one first if due)."""
        self.armed = True
        self._toggle()

    def disarm(self) -> None:
        self.armed = False
        self.stop()

    def _toggle(self) -> None:
        if self.seen % MEASURE_EVERY == 0:
            self.start()
        else:
            self.stop()

    def start(self) -> bool:
        """Start measuring (before rank threads start); False if it cannot, with ``skipped``."""
        if self._running:
            return True
        if self.package is None or self.skipped is not None:
            return False
        if sys.gettrace() is not None:
            self.skipped = NotMeasured.TRACER_ACTIVE  # taking it over would break its owner
            return False
        if _rank_threads_alive():
            # A rank thread that outlived its launch (torn down, still unwinding) may be
            # starting a thread of Zephon's: installing thread tracing then once spun the
            # explorer forever (docs/explore.md). This scenario goes unmeasured instead.
            return False
        if self._cov is None:
            import coverage

            self._cov = coverage.Coverage(
                data_file=None,
                include=[str(self.package / rel) for rel, _ in FOCUS],
                branch=True,
                concurrency=["thread"],
            )
            self._cov.set_option("run:disable_warnings", ["no-data-collected"])
        self._cov.start()
        self._running = True
        return True

    def stop(self) -> None:
        if self._running:
            self._cov.stop()
            self._running = False

    @property
    def running(self) -> bool:
        return self._running

    def saw_scenario(self) -> None:
        """After each run: count it, and choose whether the next one is measured."""
        if self._running:
            self.scenarios += 1
        if self.armed:
            self.seen += 1
            self._toggle()

    def reach(self) -> CodeReach | None:
        """Lines, branches and never-reached functions of each focus module; None if nothing
        was measured."""
        self.stop()
        if self._cov is None or self.package is None:
            return None
        with tempfile.TemporaryDirectory(prefix="zc-cov-") as tmp:
            out = Path(tmp) / "coverage.json"
            try:
                self._cov.json_report(outfile=str(out))
            except Exception as exc:  # coverage's NoDataError: no focus file ran
                if type(exc).__name__ != "NoDataError":
                    raise
                return CodeReach(self.scenarios, ())
            files: dict[str, Any] = json.loads(out.read_text())["files"]
        by_path = {Path(k).resolve(): v for k, v in files.items()}
        modules = []
        for rel, pattern in FOCUS:
            data = by_path.get((self.package / rel).resolve())
            name = f"zephon/{rel}"
            if data is None:
                modules.append(_unmeasured(self._cov, self.package / rel, name, pattern))
                continue
            s = data["summary"]
            modules.append(
                ModuleReach(
                    module=name,
                    lines=s["num_statements"],
                    lines_hit=s["covered_lines"],
                    branches=s.get("num_branches", 0),
                    branches_hit=s.get("covered_branches", 0),
                    never=_never(data.get("functions", {}), pattern),
                )
            )
        return CodeReach(self.scenarios, tuple(modules))


def _never(functions: dict[str, Any], pattern: str | None) -> tuple[str, ...]:
    return tuple(
        name
        for name, f in functions.items()
        if name
        and f["summary"]["num_statements"] > 0
        and f["summary"]["covered_lines"] == 0
        and (pattern is None or re.search(pattern, name, re.IGNORECASE))
    )


def _unmeasured(cov: Any, path: Path, name: str, pattern: str | None) -> ModuleReach:
    """A focus module none of whose lines ran: its statements (coverage's count) and its
    functions (from its source)."""
    import ast

    statements = cov.analysis2(str(path))[1]
    names: list[str] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                names.append(prefix + child.name)

    walk(ast.parse(path.read_text()), "")
    return ModuleReach(
        module=name,
        lines=len(statements),
        lines_hit=0,
        branches=0,
        branches_hit=0,
        never=tuple(n for n in names if pattern is None or re.search(pattern, n, re.IGNORECASE)),
    )


def write_files(reach: CodeReach, folder: Path) -> tuple[Path, Path]:
    """``zephon-coverage.json`` (everything) and ``.csv`` (one row a module) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / JSON_NAME
    json_path.write_text(reach.to_json() + "\n")
    csv_path = folder / CSV_NAME
    with csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["module", "lines", "lines_hit", "branches", "branches_hit", "never_reached"])
        for m in reach.modules:
            w.writerow([m.module, m.lines, m.lines_hit, m.branches, m.branches_hit, len(m.never)])
    return json_path, csv_path


def _rank_threads_alive() -> bool:
    """Whether a rank thread of the in-process tier (named ``zc-<launch>-rank<r>``) lives."""
    import threading

    return any(t.name.startswith("zc-s") and "-rank" in t.name for t in threading.enumerate())
