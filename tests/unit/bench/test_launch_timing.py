"""The side-by-side timing loop: alternated order, bounded rounds, checked options."""

from __future__ import annotations

import pytest

import zephon_chaos.bench.launch_timing as timing
from zephon_chaos.bench.launch_timing import alternate, round_args


def test_each_round_reverses_the_order_so_drift_hits_every_way_alike() -> None:
    calls: list[tuple[str, int]] = []

    def way(name: str):
        def run(i: int) -> float:
            calls.append((name, i))
            return float(i)

        return run

    times = alternate({"a": way("a"), "b": way("b"), "c": way("c")}, rounds=3, max_seconds=60)
    assert [n for n, _ in calls] == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert times == {"a": [0.0, 1.0, 2.0], "b": [0.0, 1.0, 2.0], "c": [0.0, 1.0, 2.0]}


def test_no_round_starts_that_would_end_past_the_bound(monkeypatch) -> None:
    """Rounds of 10 s against a 25 s bound: after two, a third would end at 30 s."""
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(timing.time, "monotonic", lambda: float(next(clock)))
    times = timing.alternate({"a": lambda i: 1.0}, rounds=10, max_seconds=25)
    assert times["a"] == [1.0, 1.0]


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--max-seconds", "0"]])
def test_bad_bounds_are_refused_with_a_usage_error(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        round_args("doc", argv, rounds=2, max_seconds=10)
    assert stop.value.code == 2
    assert "--rounds must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.cpu
def test_the_bare_baseline_runs_the_scenario_itself(tmp_path) -> None:
    """Bare torchrun launches of the workload pass the scenario's oracle, and leave nothing."""
    seconds = timing.bare_workload_scenario(tmp_path, "bare")
    assert seconds > 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.cpu
def test_a_failing_bare_launch_is_an_error_not_a_number(tmp_path) -> None:
    with pytest.raises(timing.LaunchFailed, match="No module named zephon_chaos_missing"):
        timing.bare_torchrun(1, tmp_path, ["-m", "zephon_chaos_missing"])


@pytest.mark.cpu
def test_the_trivial_baseline_runs_both_ways_from_the_installed_package(tmp_path) -> None:
    """The rank program is a module of the package, so a wheel install finds it too."""
    assert timing.bare_torchrun(1, tmp_path) > 0
    assert timing.our_launch(1, tmp_path, "ours") > 0
