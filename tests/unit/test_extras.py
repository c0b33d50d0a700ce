"""Without the ``explore`` extra (matplotlib, coverage.py) the plugin, its fixtures, ``run`` and
``replay`` still load, and what needs the extra says how to get it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zephon_chaos.cli import build_parser
from zephon_chaos.extras import INSTALL, Extra, MissingExtra, missing, require

BLOCK = 'raise ModuleNotFoundError("No module named {name!r}", name={name!r})\n'

LOADS_WITHOUT_THE_EXTRA = """
import importlib, pkgutil, sys
import zephon_chaos.fixtures, zephon_chaos.plugin
from zephon_chaos.cli import build_parser
for info in pkgutil.walk_packages(zephon_chaos.fixtures.__path__, "zephon_chaos.fixtures."):
    importlib.import_module(info.name)
for name in ("run", "replay", "explore"):
    importlib.import_module(f"zephon_chaos.commands.{name}")
import zephon_chaos.explore.search, zephon_chaos.explore.summary, zephon_chaos.explore.findings
build_parser()
from zephon_chaos.extras import missing
print(sorted(e.module for e in missing()))
print(sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "coverage")))
"""


def test_the_plugin_fixtures_and_commands_load_with_matplotlib_and_coverage_unimportable(
    tmp_path: Path,
) -> None:
    for extra in Extra:  # a package that raises on import, ahead of the installed one
        (tmp_path / extra.module).mkdir()
        (tmp_path / extra.module / "__init__.py").write_text(BLOCK.format(name=extra.module))
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(tmp_path), str(src), env.get("PYTHONPATH", "")) if p
    )
    probe = subprocess.run(
        [sys.executable, "-c", "import matplotlib"], env=env, capture_output=True, timeout=60
    )
    assert probe.returncode != 0, "the blocking package did not hide matplotlib"
    done = subprocess.run(
        [sys.executable, "-c", LOADS_WITHOUT_THE_EXTRA],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # find_spec sees the blocking packages, so only the imports above prove they loaded;
    # neither module was imported on the way.
    assert done.stdout.splitlines()[-1] == "[]", done.stdout


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails


@pytest.mark.usefixtures("no_matplotlib")
def test_a_blocked_module_counts_as_missing_and_its_line_names_the_install() -> None:
    assert Extra.MATPLOTLIB in missing()
    assert missing(Extra.MATPLOTLIB) == [Extra.MATPLOTLIB]
    assert INSTALL in Extra.MATPLOTLIB.left_out()
    with pytest.raises(MissingExtra, match=r"plots: matplotlib is not installed; pip"):
        require(Extra.MATPLOTLIB, "plots")


@pytest.mark.usefixtures("no_matplotlib")
def test_bench_stops_before_measuring_without_matplotlib_unless_told_no_plots(
    tmp_path: Path,
) -> None:
    from zephon_chaos.commands.bench import _plots_possible

    args = build_parser().parse_args(["bench", "aggregation", "--out", str(tmp_path)])
    with pytest.raises(MissingExtra, match=r"zephon-chaos\[explore\].*--no-plots"):
        _plots_possible(args)
    _plots_possible(argparse.Namespace(no_plots=True))


@pytest.mark.usefixtures("no_matplotlib")
def test_a_timeline_without_matplotlib_is_left_out(tmp_path: Path) -> None:
    from zephon_chaos.explore.picture import plot_timeline
    from zephon_chaos.scenario import Launch, Scenario

    assert plot_timeline(Scenario(launches=(Launch(1, 2),)), tmp_path / "t.png") is None
    assert not (tmp_path / "t.png").exists()
