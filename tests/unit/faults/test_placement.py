"""Store-proxy placements, in this process: per-rank proxies, the rank-side upstream switch,
the rendezvous proxy, the restart view, and the spec fields that carry them.

The store is a real TCPStore this process hosts; the proxies live on the test's Toxiproxy
server; the evidence is the proxy's link counters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.faults.placement import (
    PLACEHOLDER_UPSTREAM,
    PlacementError,
    place_store_proxy,
)
from zephon_chaos.faults.proxy.client import ToxiproxyClient
from zephon_chaos.faults.restart import attempt_dir, latest_checkpoint, restart_view
from zephon_chaos.nemeses.scenario_proxy import ProxyFaultError, parse_at, triggers_for
from zephon_chaos.nemeses.store_proxies import DOWN, RendezvousProxy, StoreProxies
from zephon_chaos.scenario import ProxyFault
from zephon_chaos.workload.spec import PhaseTrigger, RankFault, WorkloadSpec


@pytest.fixture
def hosted_store() -> Iterator[tuple[str, int]]:
    pytest.importorskip("torch")
    from zephon_chaos.launch.store_host import StoreHost

    with StoreHost() as host:
        yield host.host, host.port


def test_each_rank_gets_its_own_proxy_with_a_placeholder_upstream(
    toxiproxy: ToxiproxyClient,
) -> None:
    proxies = StoreProxies(toxiproxy, 3)
    listed = toxiproxy.proxies()
    assert {listed[n].upstream for n in proxies.names.values()} == {PLACEHOLDER_UPSTREAM}
    assert len(set(proxies.ports.values())) == 3
    fields = proxies.spec_fields()
    spec = WorkloadSpec.from_json(WorkloadSpec(**fields).to_json())
    assert spec.store_proxy_ports == {
        "0": proxies.ports[0],
        "1": proxies.ports[1],
        "2": proxies.ports[2],
    }
    proxies.close()
    assert not set(proxies.names) & set(toxiproxy.proxies())


def test_a_rank_points_its_proxy_at_the_store_and_talks_through_it(
    toxiproxy: ToxiproxyClient, hosted_store: tuple[str, int]
) -> None:
    from zephon._internal.kvstore import TorchKVStore

    host, port = hosted_store
    proxies = StoreProxies(toxiproxy, 2)
    spec = WorkloadSpec(**proxies.spec_fields())
    env = {"MASTER_ADDR": host, "MASTER_PORT": str(port)}
    placement = place_store_proxy(spec, 1, env)
    assert placement is not None
    assert placement.upstream == f"{host}:{port}"
    assert placement.store_uri == f"torch://127.0.0.1:{proxies.ports[1]}"
    kv = TorchKVStore("127.0.0.1", placement.listen_port, timeout_s=5.0)
    kv.set("zephon/probe", b"through the proxy")
    assert kv.get("zephon/probe") == b"through the proxy"
    moved = proxies.stats(1)
    assert moved.upstream.bytes_received > 0 and moved.downstream.bytes_sent > 0
    assert proxies.stats(0).connections_accepted == 0
    assert proxies.upstream(0) == PLACEHOLDER_UPSTREAM


def test_a_proxy_down_before_the_launch_stays_down(
    toxiproxy: ToxiproxyClient, hosted_store: tuple[str, int]
) -> None:
    host, port = hosted_store
    proxies = StoreProxies(toxiproxy, 1)
    proxies.add_toxic(0, DOWN)
    placement = place_store_proxy(
        WorkloadSpec(**proxies.spec_fields()), 0, {"MASTER_ADDR": host, "MASTER_PORT": str(port)}
    )
    assert placement is not None and not placement.enabled
    assert toxiproxy.get_proxy(proxies.names[0]).upstream == f"{host}:{port}"


@pytest.mark.parametrize(
    ("env", "fragment"),
    [({}, "MASTER_ADDR/MASTER_PORT are not set"), ({"MASTER_ADDR": "h", "MASTER_PORT": "1"}, "")],
)
def test_placement_errors_name_the_cause(
    toxiproxy: ToxiproxyClient, env: dict[str, str], fragment: str
) -> None:
    spec = WorkloadSpec(
        store_proxy_ports={"0": 1},
        store_proxy_names={"0": "no-such-proxy"},
        proxy_api_url=toxiproxy.url,
    )
    with pytest.raises(PlacementError, match=fragment or "no-such-proxy"):
        place_store_proxy(spec, 0, env)


def test_a_rank_without_a_proxy_is_left_alone() -> None:
    assert place_store_proxy(WorkloadSpec(), 0, {}) is None


def test_the_rendezvous_proxy_is_made_once_with_its_toxics(toxiproxy: ToxiproxyClient) -> None:
    rdzv = RendezvousProxy(toxiproxy, toxics=({"type": "latency", "attributes": {"latency": 5}},))
    first = rdzv.endpoint_for("127.0.0.1", 4000)
    assert rdzv.endpoint_for("127.0.0.1", 4000) == first
    assert [t.type for t in toxiproxy.toxics(rdzv.name)] == ["latency"]
    with pytest.raises(RuntimeError, match="one proxy serves one launch"):
        rdzv.endpoint_for("127.0.0.1", 4001)
    rdzv.close()
    assert rdzv.name not in toxiproxy.proxies()


def test_a_restarted_rank_writes_apart_and_restores_the_latest_checkpoint(tmp_path: Path) -> None:
    spec = WorkloadSpec(out_dir=str(tmp_path), resume_on_restart=True)
    for index in (0, 1):
        spec.checkpoint_path(index).write_bytes(b"x")
    attempt_dir(tmp_path, 1).mkdir()
    (attempt_dir(tmp_path, 1) / "ckpt-0.pkl").write_bytes(b"y")
    assert latest_checkpoint(tmp_path, 1, "pkl") == tmp_path / "ckpt-1.pkl"
    view = restart_view(spec, {"TORCHELASTIC_RESTART_COUNT": "2"})
    assert view.out_dir == str(tmp_path / "restart2")
    assert view.restore_from == str(tmp_path / "restart1" / "ckpt-0.pkl")
    assert restart_view(spec, {}) is spec
    assert restart_view(
        WorkloadSpec(out_dir=str(tmp_path)), {"TORCHELASTIC_RESTART_COUNT": "1"}
    ).out_dir == str(tmp_path)


def test_new_spec_fields_round_trip_and_old_specs_still_load() -> None:
    spec = WorkloadSpec(
        triggers=(PhaseTrigger(1, "ack", "toxic", 2, toxic="latency", attributes={"latency": 5}),),
        faults=(RankFault(1, 2, "exit", restart=0),),
        retry="lockstep",
        retry_attempts=3,
        resume_on_restart=True,
        pg_timeout_s=30.0,
    )
    assert WorkloadSpec.from_json(spec.to_json()) == spec
    old = json.loads(WorkloadSpec().to_json())
    for name in ("triggers", "retry", "store_proxy_ports", "resume_on_restart", "control"):
        old.pop(name)
    old["faults"] = [{"rank": 0, "at_step": 1, "action": "sigkill"}]
    loaded = WorkloadSpec.from_json(json.dumps(old))
    assert loaded.retry == "none" and loaded.faults[0].restart is None


@pytest.mark.parametrize(
    ("at", "parsed"), [("start", ("start", 0)), ("shard", ("shard", 1)), ("ack#2", ("ack", 2))]
)
def test_a_proxy_faults_point_is_start_or_a_round_phase(at: str, parsed: tuple[str, int]) -> None:
    assert parse_at(at) == parsed


@pytest.mark.parametrize("at", ["commit", "shard#0", "start#1", "ack#x"])
def test_an_unknown_point_is_refused(at: str) -> None:
    with pytest.raises(ProxyFaultError, match="'at'"):
        parse_at(at)


def test_phase_timed_proxy_faults_become_interposer_triggers() -> None:
    triggers = triggers_for(
        (
            ProxyFault(1, DOWN, at="shard#2"),
            ProxyFault(0, "latency", {"latency": 9}, at="outcome"),
            ProxyFault(1, "latency", at="start"),
        )
    )
    assert [(t.rank, t.phase, t.action, t.occurrence, t.toxic) for t in triggers] == [
        (1, "shard", "cut", 2, ""),
        (0, "outcome", "toxic", 1, "latency"),
    ]
