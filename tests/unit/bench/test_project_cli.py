"""``bench aggregation --project``: its options become one run's configuration, or exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephon_chaos.bench.project_run import ProjectRun
from zephon_chaos.cli import UsageError, build_parser, main
from zephon_chaos.commands.bench import project_config


def _args(*flags: str):
    return build_parser().parse_args(["bench", "aggregation", "--project", *flags])


def test_project_options_reach_the_run() -> None:
    cfg = project_config(_args(
        "--capacity-connections", "8,32", "--capacity-seconds", "0.5", "--worlds", "2,4",
        "--latencies", "0,3", "--reps", "2", "--modes", "store", "--project-worlds",
        "256,1024", "--project-latencies", "0.1,10", "--fs-ops-per-s", "20000", "--no-plots"))
    assert isinstance(cfg, ProjectRun)
    assert cfg.capacity.connections == [8, 32] and cfg.capacity.duration_s == 0.5
    assert (cfg.validation.worlds, cfg.validation.latencies_ms) == ([2, 4], [0, 3])
    assert cfg.validation.reps == 2 and not cfg.validation.dir_cells
    assert cfg.projection.worlds == [256, 1024] and cfg.projection.one_way_ms == [0.1, 10.0]
    assert cfg.projection.fs_ops_per_s == 20000 and not cfg.plots


def test_project_defaults_span_256_to_16384_ranks_at_three_latencies() -> None:
    cfg = project_config(_args())
    assert isinstance(cfg, ProjectRun)
    assert min(cfg.projection.worlds) == 256 and max(cfg.projection.worlds) == 16384
    assert cfg.projection.one_way_ms == [0.1, 1.0, 10.0]
    assert max(cfg.capacity.connections) == 512 and cfg.capacity.duration_s <= 2


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--capacity-connections", "0"], "connections must be"),
        (["--project-worlds", "1"], "projected worlds must be 2 or more"),
        (["--project-latencies", "5000"], "projected latencies"),
        (["--worlds", "128"], "validation worlds must be"),
    ],
)
def test_bad_project_options_are_refused(flags: list[str], problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        project_config(_args(*flags))


def test_a_bad_project_option_exits_2_before_measuring(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["bench", "aggregation", "--project", "--out", str(out),
                 "--capacity-seconds", "0"]) == 2
    assert "the window must be" in capsys.readouterr().err
    assert not out.exists()
