"""Toxics do to the bytes what Toxiproxy's do, measured at the client with lower bounds.

Every timing assertion is a lower bound (a toxic may be late, never early) with a generous
ceiling; nothing sleeps to synchronise: tests wait on sockets or poll a condition. Where the
embedded server runs, its counters are checked too, as the faults suite will check them.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from zephon_chaos.faults.proxy.client import ProxyInfo, ProxyStats, ToxiproxyClient
from zephon_chaos.fixtures.toxiproxy import EchoServer, listening_ports

# The fixtures (toxiproxy, echo_server) until the plugin registers them itself.

SLACK_S = 3.0  # ceiling added to expected delays: loaded CI machines are slow, never early


@pytest.fixture
def proxy(toxiproxy: ToxiproxyClient, echo_server: EchoServer) -> ProxyInfo:
    return toxiproxy.create_proxy(f"echo-{uuid.uuid4().hex[:8]}", echo_server.upstream)


@pytest.fixture
def connect(proxy: ProxyInfo) -> Iterator[Callable[[], socket.socket]]:
    opened: list[socket.socket] = []

    def open_connection() -> socket.socket:
        conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        opened.append(conn)
        return conn

    yield open_connection
    for conn in opened:
        conn.close()


def recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise AssertionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def recv_until_closed(conn: socket.socket) -> bytes:
    data = bytearray()
    while chunk := conn.recv(65536):
        data += chunk
    return bytes(data)


def round_trip(conn: socket.socket, payload: bytes) -> float:
    started = time.perf_counter()
    conn.sendall(payload)
    assert recv_exactly(conn, len(payload)) == payload
    return time.perf_counter() - started


def stats(client: ToxiproxyClient, name: str) -> ProxyStats | None:
    """The proxy's counters on the embedded server; ``None`` on a real one (it has none)."""
    return client.proxy_stats(name) if client.is_embedded() else None


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.005)


@pytest.mark.parametrize(
    "streams", [("downstream",), ("upstream",), ("upstream", "downstream")], ids="+".join
)
def test_latency_adds_at_least_its_delay_per_direction(
    toxiproxy: ToxiproxyClient,
    proxy: ProxyInfo,
    connect: Callable[[], socket.socket],
    streams: tuple[str, ...],
) -> None:
    latency_ms = 120
    for stream in streams:
        toxiproxy.add_toxic(
            proxy.name, "latency", stream=stream, attributes={"latency": latency_ms}
        )
    expected = latency_ms * len(streams) / 1000
    conn = connect()
    for _ in range(3):
        assert expected <= round_trip(conn, b"ping") < expected + SLACK_S


def test_latency_records_when_it_held_data_back(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    toxiproxy.add_toxic(proxy.name, "latency", attributes={"latency": 100})
    conn = connect()
    began = time.monotonic()
    for _ in range(3):
        round_trip(conn, b"ping")
    ended = time.monotonic()
    evidence = stats(toxiproxy, proxy.name)
    if evidence is None:
        pytest.skip("a real toxiproxy-server keeps no counters")
    held = evidence.toxics["latency_downstream"].held
    # Three replies, each held 100 ms, inside the round trips (the ranks' monotonic clock);
    # delays a request's turn-around apart (under a millisecond) merge into one interval.
    assert 1 <= len(held) <= 3, held
    assert all(began <= a < b <= ended for a, b in held), (began, held, ended)
    assert sum(b - a for a, b in held) == pytest.approx(0.3, abs=0.05)


def test_jitter_stays_within_bounds_and_keeps_order(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    toxiproxy.add_toxic(proxy.name, "latency", attributes={"latency": 100, "jitter": 60})
    conn = connect()
    for _ in range(5):
        assert 0.04 <= round_trip(conn, b"x") < 0.16 + SLACK_S
    messages = b"".join(b"%05d;" % k for k in range(300))
    for k in range(0, len(messages), 6):
        conn.sendall(messages[k : k + 6])
    assert recv_exactly(conn, len(messages)) == messages


@pytest.mark.parametrize("stream", ["upstream", "downstream"])
def test_bandwidth_caps_throughput(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket], stream: str
) -> None:
    rate_kb, size, tolerance = 200, 120_000, 0.15
    toxiproxy.add_toxic(proxy.name, "bandwidth", stream=stream, attributes={"rate": rate_kb})
    conn = connect()
    elapsed = round_trip(conn, os.urandom(size))
    assert size / elapsed <= rate_kb * 1000 * (1 + tolerance)
    assert elapsed < size / (rate_kb * 1000) + SLACK_S


@pytest.mark.parametrize("stream", ["upstream", "downstream"])
def test_timeout_zero_holds_data_until_the_toxic_goes(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket], stream: str
) -> None:
    conn = connect()
    assert round_trip(conn, b"warm") < SLACK_S  # a live link: the toxic must reach it too
    toxiproxy.add_toxic(proxy.name, "timeout", stream=stream, attributes={"timeout": 0})
    conn.settimeout(0.4)
    conn.sendall(b"held")
    with pytest.raises(TimeoutError):
        conn.recv(16)
    evidence = stats(toxiproxy, proxy.name)
    if evidence is not None:
        assert evidence.toxics[f"timeout_{stream}"].chunks >= 1
        assert evidence.connections_active == 1
    toxiproxy.remove_toxic(proxy.name, f"timeout_{stream}")
    conn.settimeout(5)
    assert recv_exactly(conn, 4) == b"held"


@pytest.mark.parametrize("stream", ["upstream", "downstream"])
def test_timeout_closes_the_connection_after_its_delay(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket], stream: str
) -> None:
    toxiproxy.add_toxic(proxy.name, "timeout", stream=stream, attributes={"timeout": 200})
    started = time.perf_counter()
    conn = connect()
    conn.sendall(b"never answered")
    assert recv_until_closed(conn) == b""
    assert 0.2 <= time.perf_counter() - started < 0.2 + SLACK_S
    if stats(toxiproxy, proxy.name) is not None:
        wait_for(
            lambda: toxiproxy.proxy_stats(proxy.name).connections_closed_by_toxic == 1,
            "the close to be counted",
        )


@pytest.mark.parametrize("timeout_ms", [0, 150])
@pytest.mark.parametrize("stream", ["upstream", "downstream"])
def test_reset_peer_resets_the_client(
    toxiproxy: ToxiproxyClient,
    proxy: ProxyInfo,
    connect: Callable[[], socket.socket],
    stream: str,
    timeout_ms: int,
) -> None:
    toxiproxy.add_toxic(proxy.name, "reset_peer", stream=stream, attributes={"timeout": timeout_ms})
    conn = connect()
    started = time.perf_counter()
    conn.sendall(b"hello")
    with pytest.raises(ConnectionResetError):
        recv_until_closed(conn)
    assert timeout_ms / 1000 <= time.perf_counter() - started < timeout_ms / 1000 + SLACK_S
    if stats(toxiproxy, proxy.name) is not None:
        wait_for(lambda: toxiproxy.proxy_stats(proxy.name).resets_sent == 2, "two RSTs counted")
        evidence = toxiproxy.proxy_stats(proxy.name)
        assert evidence.connections_closed_by_toxic == 1
        assert evidence.toxics[f"reset_peer_{stream}"].closes == 1


def test_slicer_delivers_the_same_bytes_in_many_small_chunks(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    average, variation, size = 64, 32, 16_384
    toxiproxy.add_toxic(
        proxy.name,
        "slicer",
        attributes={"average_size": average, "size_variation": variation, "delay": 300},
    )
    payload = os.urandom(size)
    conn = connect()
    conn.sendall(payload)
    chunks: list[bytes] = []
    while sum(map(len, chunks)) < size:
        chunk = conn.recv(65536)
        assert chunk, "closed early"
        chunks.append(chunk)
    assert b"".join(chunks) == payload
    assert len(chunks) >= 16
    evidence = stats(toxiproxy, proxy.name)
    if evidence is not None:
        assert evidence.downstream.writes >= size // (average + variation)


@pytest.mark.parametrize("limit", [1, 100, 5000])
@pytest.mark.parametrize("stream", ["upstream", "downstream"])
def test_limit_data_closes_after_exactly_n_bytes(
    toxiproxy: ToxiproxyClient,
    proxy: ProxyInfo,
    connect: Callable[[], socket.socket],
    echo_server: EchoServer,
    stream: str,
    limit: int,
) -> None:
    toxiproxy.add_toxic(proxy.name, "limit_data", stream=stream, attributes={"bytes": limit})
    conn = connect()
    payload = os.urandom(10_000)
    conn.sendall(payload)
    received = recv_until_closed(conn)
    if stream == "downstream":
        assert received == payload[:limit]
    else:
        # The proxy closes the upstream socket after N bytes (as Toxiproxy does), so the
        # upstream saw exactly N bytes; what it echoed before the close may or may not return.
        wait_for(lambda: echo_server.closed == 1, "the upstream connection to close")
        assert echo_server.received == limit
        assert payload.startswith(received)
    evidence = stats(toxiproxy, proxy.name)
    if evidence is not None:
        assert evidence.direction(stream).bytes_sent == limit
        assert evidence.toxics[f"limit_data_{stream}"].closes == 1


def test_slow_close_delays_the_close(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    toxiproxy.add_toxic(proxy.name, "slow_close", attributes={"delay": 300})
    conn = connect()
    assert round_trip(conn, b"hi") < SLACK_S
    started = time.perf_counter()
    conn.shutdown(socket.SHUT_WR)
    assert recv_until_closed(conn) == b""
    assert 0.3 <= time.perf_counter() - started < 0.3 + SLACK_S


def test_disabled_proxy_refuses_new_and_drops_live_connections(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    live = connect()
    assert round_trip(live, b"before") < SLACK_S
    toxiproxy.disable(proxy.name)
    live.settimeout(5)
    with contextlib.suppress(ConnectionResetError):  # a close or a reset both drop it
        assert live.recv(16) == b""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5).close()
    evidence = stats(toxiproxy, proxy.name)
    if evidence is not None:
        assert evidence.connections_active == 0
    assert toxiproxy.enable(proxy.name).port == proxy.port
    assert round_trip(connect(), b"after") < SLACK_S


def test_toxicity_zero_never_applies(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    toxiproxy.add_toxic(proxy.name, "latency", toxicity=0.0, attributes={"latency": 2000})
    for _ in range(20):
        conn = connect()
        assert round_trip(conn, b"quick") < 2.0  # below the toxic's latency: never applied
        conn.close()
    evidence = stats(toxiproxy, proxy.name)
    if evidence is not None:
        activity = evidence.toxics["latency_downstream"]
        assert (activity.applied, activity.bypassed, activity.chunks) == (0, 20, 0)


def test_toxicity_is_a_probability_per_connection(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    if not toxiproxy.is_embedded():
        pytest.skip("counts the toxicity draws through the embedded server's counters")
    toxiproxy.add_toxic(proxy.name, "noop", toxicity=0.5)
    for _ in range(200):
        conn = connect()
        round_trip(conn, b"x")
        conn.close()
    activity = toxiproxy.proxy_stats(proxy.name).toxics["noop_downstream"]
    assert activity.applied + activity.bypassed == 200
    assert 60 <= activity.applied <= 140  # mean 100, sd 7: outside is a > 5 sd event


def test_changes_reach_live_connections(
    toxiproxy: ToxiproxyClient, proxy: ProxyInfo, connect: Callable[[], socket.socket]
) -> None:
    conn = connect()
    assert round_trip(conn, b"a") < 0.1 + SLACK_S
    toxiproxy.add_toxic(proxy.name, "latency", name="lag", attributes={"latency": 150})
    assert 0.15 <= round_trip(conn, b"b") < 0.15 + SLACK_S
    toxiproxy.update_toxic(proxy.name, "lag", attributes={"latency": 300})
    assert 0.3 <= round_trip(conn, b"c") < 0.3 + SLACK_S
    toxiproxy.remove_toxic(proxy.name, "lag")
    assert round_trip(conn, b"d") < 0.3  # below the removed latency: the toxic is gone


def test_tcpstore_through_the_proxy(toxiproxy: ToxiproxyClient) -> None:
    dist = pytest.importorskip("torch.distributed")
    listener = socket.create_server(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    timeout = datetime.timedelta(seconds=10)
    server = dist.TCPStore(
        "127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timeout,
        master_listen_fd=listener.detach(),  # the store owns the loopback socket from here
    )  # fmt: skip
    try:
        proxy = toxiproxy.create_proxy("tcpstore", f"127.0.0.1:{port}")
        store = dist.TCPStore("127.0.0.1", proxy.port, is_master=False, timeout=timeout)
        store.set("key", b"value")
        assert store.get("key") == b"value"
        assert store.check(["key"])
        assert not store.check(["absent"])
        assert store.add("counter", 2) == 2
        assert store.add("counter", 3) == 5
        store.wait(["key"])
        toxiproxy.add_toxic(proxy.name, "latency", attributes={"latency": 100})
        started = time.perf_counter()
        assert store.get("key") == b"value"
        assert 0.1 <= time.perf_counter() - started < 0.1 + SLACK_S
        evidence = stats(toxiproxy, proxy.name)
        if evidence is not None:
            assert evidence.connections_accepted >= 1
            assert evidence.upstream.bytes_sent > 0 and evidence.downstream.bytes_sent > 0
            assert evidence.toxics["latency_downstream"].chunks >= 1
        del store
    finally:
        del server
    wait_for(lambda: port not in listening_ports(), "the TCPStore server to stop listening")
