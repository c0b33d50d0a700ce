"""The TCPStore capacity measurement: it measures, and leaves no process or port behind."""

from __future__ import annotations

import os

import pytest

from zephon_chaos.bench.capacity import CapacityConfig, measure_capacity, split
from zephon_chaos.launch.ports import listening_ports


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_tiny_capacity_run_measures_and_reaps_every_client_process() -> None:
    lines: list[str] = []
    result = measure_capacity(CapacityConfig.tiny(), log=lines.append)
    assert [p.error for p in result.points] == [""] * len(result.points)
    assert {(p.op, p.connections) for p in result.points} == {
        ("check", 2), ("check", 4), ("set", 2), ("set", 4), ("get_big", 2)}
    assert all(p.ops_per_s > 0 for p in result.points)
    assert result.service_s() > 0 and result.bytes_per_s() > 0
    assert "load average" in result.load_before and len(lines) == len(result.points)
    assert len(result.client_pids) == 2
    assert not [pid for pid in result.client_pids if _alive(pid)]
    assert result.port not in listening_ports()
    assert os.getpid() not in result.client_pids


def test_connections_are_spread_evenly_over_the_processes() -> None:
    assert split(512, 4) == [128] * 4
    assert split(2, 4) == [1, 1]
    assert split(7, 3) == [3, 2, 2]


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (CapacityConfig(connections=[0]), "connections must be"),
        (CapacityConfig(ops=["scan"]), "operations must be among"),
        (CapacityConfig(processes=64), "client processes must be"),
        (CapacityConfig(duration_s=60), "the window must be"),
    ],
)
def test_bad_capacity_configs_are_refused(config: CapacityConfig, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        config.validate()
