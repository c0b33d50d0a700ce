"""Hosts as network namespaces: addresses, isolation, partitions, heals, and no leftovers."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.hygiene.snapshot import Resources, Snapshot, find_and_remove_leaks
from zephon_chaos.launch import LaunchSpec, TorchrunGroup
from zephon_chaos.launch.netns import (
    IFNAME,
    TEST_RANGE,
    CutKind,
    Direction,
    HostNetwork,
    NetnsError,
    _nft_rules,
    named_namespaces,
    netns_unavailable,
    processes_in,
)
from zephon_chaos.launch.netns_group import RDZV_PORT, NetnsGroup
from zephon_chaos.scenario import Launch, Scenario, ScenarioError

pytestmark = pytest.mark.cpu

needs_netns = pytest.mark.skipif(
    netns_unavailable() is not None, reason=str(netns_unavailable())
)
SERVE = (
    "import socket,sys\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', 5000)); s.listen(8); print('ready', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); c.close()\n"
)
CONNECT = (
    "import socket,sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], 5000), timeout=float(sys.argv[2])).close()\n"
    "    print('connected')\n"
    "except TimeoutError: print('timeout')\n"
    "except ConnectionRefusedError: print('refused')\n"
    "except OSError as e: print(type(e).__name__)\n"
)


def _connect(net: HostNetwork, src: int, dst: int, timeout_s: float = 1.0) -> str:
    """What a TCP connect from host ``src`` to host ``dst`` ends in, in words."""
    argv = [*net.host(src).exec_prefix(), sys.executable, "-c", CONNECT]
    done = subprocess.run(
        [*argv, net.host(dst).address, str(timeout_s)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def served() -> Iterator[HostNetwork]:
    """A network of 2 hosts with a TCP server on host 0 (ready when its line arrives)."""
    net = HostNetwork(2).create()
    server = subprocess.Popen(
        [*net.host(0).exec_prefix(), sys.executable, "-c", SERVE],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        yield net
    finally:
        server.kill()
        server.wait(timeout=10)
        assert net.close() == []


# ---- without root: names, addresses, rules, launch arguments --------------------------------
def test_each_network_draws_host_addresses_from_the_test_range() -> None:
    a, b = HostNetwork(3), HostNetwork(3)
    assert a.token != b.token and not set(a.names) & set(b.names)
    for net in (a, b):
        addrs = [h.address for h in net.hosts]
        assert all(ipaddress.ip_address(x) in TEST_RANGE for x in addrs)
        assert addrs == sorted(addrs)  # c10d ranks nodes by address: host k is node k
        assert all(name.startswith(f"zc-{os.getpid()}.") for name in net.names)


def test_nft_rules_cut_the_peers_in_the_directions_asked() -> None:
    both = _nft_rules(CutKind.DROP, Direction.BOTH, "198.18.0.10")
    assert "hook input" in both and "hook output" in both and both.count(" drop") == 2
    inbound = _nft_rules(CutKind.DROP, Direction.INBOUND, "198.18.0.10")
    assert "hook input" in inbound and "hook output" not in inbound
    reject = _nft_rules(CutKind.REJECT, Direction.OUTBOUND, "198.18.0.10")
    assert "reject with tcp reset" in reject and "hook input" not in reject
    assert f'oifname "{IFNAME}"' in reject  # resets looped back on lo pass


def test_agents_dial_host_zero_from_their_own_namespaces(tmp_path: Path) -> None:
    net = HostNetwork(2)
    spec = LaunchSpec(entry="x", module=True, nproc=2, nnodes=2, hosts=2, path="c10d")
    group = NetnsGroup(spec, tmp_path / "g", net)
    for node in (0, 1):
        argv = group.agent_argv(node)
        assert argv[:4] == ["ip", "netns", "exec", net.host(node).netns]
        assert argv[argv.index("--local-addr") + 1] == net.host(node).address
        assert argv[argv.index("--rdzv-endpoint") + 1] == f"{net.host(0).address}:{RDZV_PORT}"
        assert f"is_host={'true' if node == 0 else 'false'}" in argv[argv.index("--rdzv-conf") + 1]
    assert group.env()["GLOO_SOCKET_IFNAME"] == IFNAME
    assert group.ranks_on(1) == [2, 3] and group.host_of_rank(3) == 1


def test_hosts_need_one_agent_each_and_a_namespaced_launcher(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nnodes=2"):
        LaunchSpec(entry="x", module=True, nnodes=1, hosts=2, path="c10d").validate()
    with pytest.raises(ValueError, match="NetnsGroup"):
        TorchrunGroup(
            LaunchSpec(entry="x", module=True, nnodes=2, hosts=2, path="c10d"), tmp_path
        )
    with pytest.raises(ScenarioError, match="hosts"):
        Scenario(launches=(Launch(3, 1, path="c10d", hosts=2),)).validate()
    with pytest.raises(ScenarioError, match="hosts"):
        Scenario(launches=(Launch(2, 1, hosts=2),)).validate()  # standalone
    Scenario(launches=(Launch(4, 1, path="static", hosts=2),)).validate()


# ---- as root: real namespaces ----------------------------------------------------------------
@needs_netns
def test_a_network_is_isolated_and_leaves_nothing_when_closed() -> None:
    root_links = set(os.listdir("/sys/class/net"))
    net = HostNetwork(2).create()
    try:
        assert set(net.names) <= named_namespaces()
        routes = subprocess.run(
            ["ip", "-n", net.host(1).netns, "route"], capture_output=True, text=True, check=True
        ).stdout
        assert "default" not in routes and str(net.subnet) in routes
        assert set(os.listdir("/sys/class/net")) == root_links  # nothing in our namespace
        assert _connect(net, 1, 0) == "refused"  # reachable: nothing listens there
    finally:
        assert net.close() == []
    assert not set(net.names) & named_namespaces()


@needs_netns
def test_a_link_cut_silences_a_host_and_a_heal_brings_it_back(served: HostNetwork) -> None:
    assert _connect(served, 1, 0) == "connected"
    cut = served.partition(1)
    assert cut.kind is CutKind.LINK and cut.peers == (0,)
    assert _connect(served, 1, 0) == "timeout"  # packets vanish: no error, only silence
    served.heal(1)
    assert _connect(served, 1, 0, timeout_s=5.0) == "connected"


@needs_netns
def test_nftables_cuts_one_direction_or_resets(served: HostNetwork) -> None:
    reason = served.nft_unavailable()
    if reason is not None:
        pytest.skip(reason)
    served.partition(1, CutKind.DROP, Direction.OUTBOUND)
    assert _connect(served, 1, 0) == "timeout"
    served.heal(1)
    served.partition(1, CutKind.REJECT)
    assert _connect(served, 1, 0) == "refused"  # a reset at once, not a timeout
    served.heal(1)
    assert _connect(served, 1, 0, timeout_s=5.0) == "connected"


@needs_netns
def test_netem_is_used_only_where_the_kernel_has_it() -> None:
    with HostNetwork(1) as net:
        reason = net.netem_unavailable()
        if reason is None:
            net.delay(0, 5)
        else:
            assert "netem" in reason
            with pytest.raises(NetnsError, match="netem"):
                net.delay(0, 5)


@needs_netns
def test_a_process_left_in_a_namespace_is_reported_by_close() -> None:
    net = HostNetwork(1).create()
    stay = subprocess.Popen(
        [*net.host(0).exec_prefix(), sys.executable, "-c", "print('in', flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stay.stdout is not None and stay.stdout.readline().strip() == "in"  # inside now
        problems = net.close()
        assert any(str(stay.pid) in p for p in problems)
        assert processes_in(set(net.inodes.values()))  # the namespace lives on in it
    finally:
        stay.kill()
        stay.wait(timeout=10)


@needs_netns
def test_the_leak_check_fails_a_namespace_left_behind() -> None:
    before = Snapshot.take()
    net = HostNetwork(1).create()
    resources = Resources(networks=[net])
    leaks = find_and_remove_leaks(before, resources)
    assert [f"namespace {name}" for name in net.names] == leaks.networks
    assert f"network namespace {net.names[0]}" in leaks.describe()
    assert not set(net.names) & named_namespaces()  # removed by the check
