"""torchrun's restart path seen from a rank: which triggers a restarted attempt keeps, and
the round it meets of a dead attempt's, read where the aggregation keeps it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from zephon_chaos.faults.restart import met_round, restart_view
from zephon_chaos.nemeses.round_faults import triggers_for
from zephon_chaos.workload.spec import PhaseTrigger, PipelineSpec, RankFault, WorkloadSpec

RESTARTED = {"TORCHELASTIC_RESTART_COUNT": "1"}
SCOPE = "zc-run-0"
"""The namespace of a launch with run id ``zc-run`` that restored nothing."""


def test_a_restarted_attempt_does_not_fire_attempt_zeros_round_point_fault() -> None:
    crash = triggers_for(RankFault(1, 0, "sigkill", restart=0, at="shard"))
    loop = triggers_for(RankFault(1, 0, "sigkill", restart=0, at="ack", attempts=2))
    always = (PhaseTrigger(0, "outcome", "event"),)
    spec = WorkloadSpec(triggers=crash + loop + always)
    assert restart_view(spec, {}).triggers == spec.triggers
    assert restart_view(spec, RESTARTED).triggers == loop + always
    assert restart_view(spec, {"TORCHELASTIC_RESTART_COUNT": "2"}).triggers == always


def restarted_spec(tmp_path: Path, **pipeline: object) -> WorkloadSpec:
    return WorkloadSpec(
        pipeline=PipelineSpec(run_id="zc-run", **pipeline),  # type: ignore[arg-type]
        out_dir=str(tmp_path / "out"),
    )


def test_a_restarted_attempt_meets_the_round_left_open_in_aggregate_dir(tmp_path: Path) -> None:
    agg = tmp_path / "agg" / SCOPE / ".zephon_agg"
    agg.mkdir(parents=True)
    (agg / "round.current").write_text("1234\n")
    spec = replace(restarted_spec(tmp_path, aggregation="dir"), aggregate_dir=str(tmp_path / "agg"))
    assert met_round(spec, {}) is None, "attempt 0 meets no dead attempt"
    met = met_round(spec, RESTARTED)
    assert met is not None
    assert (met["round"], met["failed"], met["scope"]) == ("1234", False, SCOPE)
    (agg / "merged_1234.ckpt").write_bytes(b"")  # a result closes the round
    closed = {"where": "dir", "scope": SCOPE, "attempt": 1, "round": None}
    assert met_round(spec, RESTARTED) == closed


@pytest.fixture
def hosted_store() -> Iterator[tuple[str, int]]:
    pytest.importorskip("torch")
    from zephon_chaos.launch.store_host import StoreHost

    with StoreHost() as host:
        yield host.host, host.port


def test_a_restarted_attempt_meets_the_round_left_open_in_the_agents_store(
    tmp_path: Path, hosted_store: tuple[str, int]
) -> None:
    """``torch://`` is the agent's store at MASTER_ADDR/MASTER_PORT, as torchrun sets them."""
    import torch.distributed as dist

    host, port = hosted_store
    client = dist.TCPStore(host, port, is_master=False, wait_for_workers=False, use_libuv=True)
    client.set(f"zephon/{SCOPE}/round", json.dumps({"round": "77"}))
    env = {**RESTARTED, "MASTER_ADDR": host, "MASTER_PORT": str(port)}
    met = met_round(restarted_spec(tmp_path, aggregation="store"), env)
    assert met is not None and (met["where"], met["round"]) == ("store", "77")
    assert met["namespace"] == f"zephon/{SCOPE}"
    client.set(f"zephon/{SCOPE}/77/outcome", b"done")
    assert met_round(restarted_spec(tmp_path, aggregation="store"), env)["round"] is None  # type: ignore[index]


def test_an_unreadable_store_is_recorded_not_raised(tmp_path: Path) -> None:
    spec = restarted_spec(tmp_path, aggregation="store")
    met = met_round(spec, RESTARTED)  # no MASTER_ADDR: torchrun did not start this rank
    assert met is not None and met["round"] is None and "KeyError" in met["error"]
