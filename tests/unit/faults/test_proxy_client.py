"""Our client, the server selection, the CLI, and ``toxiproxy-python`` against the server."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

import zephon_chaos
from zephon_chaos.faults.proxy import (
    EmbeddedToxiproxy,
    ProxyApiError,
    ProxyInfo,
    ProxyServerError,
    ProxyStats,
    ToxicInfo,
    ToxiproxyClient,
    choose_kind,
    start_server,
)
from zephon_chaos.faults.proxy.cli import main as cli_main
from zephon_chaos.fixtures.toxiproxy import EchoServer, listening_ports

# The fixtures (toxiproxy, echo_server) until the plugin registers them itself.

SRC = str(Path(zephon_chaos.__file__).resolve().parents[1])


def exchange(port: int, payload: bytes = b"ping") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(payload)
        data = b""
        while len(data) < len(payload):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


# Our client.
def test_client_covers_the_whole_api(toxiproxy: ToxiproxyClient, echo_server: EchoServer) -> None:
    created = toxiproxy.create_proxy("svc", echo_server.upstream)
    assert created.enabled and created.host == "127.0.0.1" and created.port > 0
    assert exchange(created.port) == b"ping"
    assert toxiproxy.proxies()["svc"] == created
    assert toxiproxy.get_proxy("svc") == created
    toxic = toxiproxy.add_toxic(
        "svc", "latency", stream="upstream", toxicity=0.5, attributes={"latency": 5}
    )
    assert (toxic.name, toxic.stream, toxic.toxicity) == ("latency_upstream", "upstream", 0.5)
    assert toxiproxy.get_toxic("svc", "latency_upstream") == toxic
    updated = toxiproxy.update_toxic("svc", "latency_upstream", attributes={"jitter": 1})
    assert updated.attributes == {"latency": 5, "jitter": 1}
    assert toxiproxy.toxics("svc") == [updated]
    with toxiproxy.toxic("svc", "limit_data", name="cap", attributes={"bytes": 1}):
        assert [t.name for t in toxiproxy.toxics("svc")] == ["latency_upstream", "cap"]
    assert [t.name for t in toxiproxy.toxics("svc")] == ["latency_upstream"]
    with toxiproxy.disabled("svc") as down:
        assert not down.enabled and refuses(created.port)
    assert exchange(created.port) == b"ping"
    toxiproxy.remove_toxic("svc", "latency_upstream")
    populated = toxiproxy.populate(
        [{"name": "other", "listen": "127.0.0.1:0", "upstream": echo_server.upstream}]
    )
    assert [p.name for p in populated] == ["other"]
    toxiproxy.add_toxic("other", "timeout")
    toxiproxy.disable("svc")
    toxiproxy.reset()
    assert all(p.enabled and not p.toxics for p in toxiproxy.proxies().values())
    toxiproxy.delete_proxy("svc")
    assert set(toxiproxy.proxies()) == {"other"}
    assert toxiproxy.version()


@pytest.mark.parametrize(
    ("action", "status", "message"),
    [
        (lambda c, u: c.get_proxy("missing"), 404, "proxy not found"),
        (lambda c, u: c.create_proxy("svc", u), 409, "proxy already exists"),
        (lambda c, u: c.add_toxic("svc", "walrus"), 400, "invalid toxic type"),
        (lambda c, u: c.remove_toxic("svc", "nope"), 404, "toxic not found"),
        (lambda c, u: c.create_proxy("x", u, listen=c.get_proxy("svc").listen), 500,
         "bind: address already in use"),
    ],
    ids=["not-found", "conflict", "bad-toxic", "no-toxic", "bind-failure"],
)  # fmt: skip
def test_non_2xx_raises_proxy_api_error(
    toxiproxy: ToxiproxyClient, echo_server: EchoServer, action, status: int, message: str
) -> None:
    toxiproxy.create_proxy("svc", echo_server.upstream)
    with pytest.raises(ProxyApiError) as caught:
        action(toxiproxy, echo_server.upstream)
    assert caught.value.status == status
    assert message in caught.value.message
    assert f"HTTP {status}" in str(caught.value)


TOXIC = {"name": "t", "type": "latency", "stream": "upstream", "toxicity": 1, "attributes": {}}
COUNTERS = {"bytes_received": 1, "bytes_sent": 2, "writes": 3}


@pytest.mark.parametrize("sent", ["absent", None, {}, []])
def test_a_record_keeps_its_default_where_the_server_sends_nothing(sent: object) -> None:
    toxic = {k: v for k, v in TOXIC.items() if k != "attributes"}
    proxy = {"name": "p", "listen": "127.0.0.1:1", "upstream": "u", "enabled": 1}
    if sent != "absent":
        toxic["attributes"] = proxy["toxics"] = sent
    assert ToxicInfo.from_json(toxic) == ToxicInfo("t", "latency", "upstream", 1.0, {})
    assert ProxyInfo.from_json(proxy) == ProxyInfo("p", "127.0.0.1:1", "u", True, ())


def test_a_record_converts_its_fields_and_requires_those_without_default() -> None:
    toxic = ToxicInfo.from_json({**TOXIC, "toxicity": "0.5", "attributes": {"latency": 7}})
    assert toxic.toxicity == 0.5 and toxic.attributes == {"latency": 7}
    proxy = {"name": "p", "listen": "[::1]:9", "upstream": "u", "enabled": 0, "toxics": [TOXIC]}
    assert ProxyInfo.from_json(proxy) == ProxyInfo(
        "p", "[::1]:9", "u", False, (ToxicInfo.from_json(TOXIC),)
    )
    stats = {
        "name": "p",
        "enabled": True,
        **dict.fromkeys(("connections_accepted", "connections_active", "connections_closed"), 1),
        **dict.fromkeys(
            ("connections_closed_by_toxic", "upstream_connect_failures", "resets_sent"), 0
        ),
        "upstream": COUNTERS,
        "downstream": COUNTERS,
        "toxics": {"t": {"applied": 1, "bypassed": 0, "chunks": 1, "closes": 0}},
    }
    read = ProxyStats.from_json(stats)
    assert read.upstream.writes == 3 and read.toxics["t"].applied == 1
    for missing in ("name", "toxicity"):
        with pytest.raises(KeyError, match=missing):
            ToxicInfo.from_json({k: v for k, v in TOXIC.items() if k != missing})
    with pytest.raises(KeyError, match="resets_sent"):
        ProxyStats.from_json({k: v for k, v in stats.items() if k != "resets_sent"})


def test_a_silent_server_times_out_with_a_clear_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        client = ToxiproxyClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(ProxyApiError) as caught:
            client.proxies()
        client.close()
    assert time.monotonic() - started < 3
    assert caught.value.status == 0 and "no answer within 0.3 s" in str(caught.value)


class _NotEmbedded(http.server.BaseHTTPRequestHandler):
    """Answers like a real toxiproxy-server would for what these tests ask."""

    def do_GET(self) -> None:
        if self.path == "/version":
            body, status = b'{"version": "2.12.0"}\n', 200
        else:
            body, status = b"404 page not found\n", 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def real_like_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotEmbedded)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_proxy_stats_on_a_real_server_explains_itself(real_like_server: str) -> None:
    with ToxiproxyClient(real_like_server) as client:
        assert not client.is_embedded()
        with pytest.raises(ProxyApiError, match=r"extension of the embedded server.*TOXIPROXY_URL"):
            client.proxy_stats("anything")


def test_proxy_stats_on_the_embedded_server(
    toxiproxy: ToxiproxyClient, echo_server: EchoServer
) -> None:
    if not toxiproxy.is_embedded():
        pytest.skip("stats exist on the embedded server only")
    proxy = toxiproxy.create_proxy("svc", echo_server.upstream)
    assert exchange(proxy.port, b"12345") == b"12345"
    stats = toxiproxy.proxy_stats("svc")
    assert stats.connections_accepted == 1
    assert stats.upstream.bytes_received == stats.upstream.bytes_sent == 5


# toxiproxy-python 0.1.1, unmodified, against the server.
def test_toxiproxy_python_works_unmodified(
    toxiproxy: ToxiproxyClient, echo_server: EchoServer
) -> None:
    from toxiproxy.api import APIConsumer

    saved = (APIConsumer.host, APIConsumer.port)
    with toxiproxy.python_client() as server:
        assert server.running()
        assert b"version" in server.version()
        proxy = server.create(upstream=echo_server.upstream, name="py", listen="127.0.0.1:0")
        port = int(proxy.listen.rpartition(":")[2])
        assert exchange(port) == b"ping"
        assert set(server.proxies()) == {"py"}
        assert server.get_proxy("py").upstream == echo_server.upstream
        proxy.add_toxic(type="latency", attributes={"latency": 150})
        assert set(proxy.toxics()) == {"latency_downstream"}
        assert proxy.get_toxic("latency_downstream").attributes == {"latency": 150, "jitter": 0}
        started = time.perf_counter()
        assert exchange(port) == b"ping"
        assert time.perf_counter() - started >= 0.15
        assert proxy.destroy_toxic("latency_downstream")
        assert proxy.toxics() == {}
        proxy.disable()
        assert refuses(port)
        proxy.enable()
        assert exchange(port) == b"ping"
        with proxy.down():
            assert refuses(port)
        proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
        assert server.reset()
        assert proxy.toxics() == {}
        assert proxy.destroy()
        assert server.proxies() == {}
    assert (APIConsumer.host, APIConsumer.port) == saved


# Server selection.
@pytest.mark.parametrize(
    ("env", "with_binary", "kind"),
    [
        ({}, False, "embedded"),
        ({}, True, "binary"),
        ({"TOXIPROXY_URL": "http://127.0.0.1:1"}, True, "url"),
        (
            {"ZEPHON_CHAOS_PROXY_SERVER": "embedded", "TOXIPROXY_URL": "http://x:1"},
            True,
            "embedded",
        ),
        ({"ZEPHON_CHAOS_PROXY_SERVER": "binary"}, True, "binary"),
    ],
)
def test_choose_kind(tmp_path: Path, env: dict[str, str], with_binary: bool, kind: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if with_binary:
        fake = bin_dir / "toxiproxy-server"
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
    assert choose_kind({**env, "PATH": str(bin_dir)}) == kind


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ZEPHON_CHAOS_PROXY_SERVER": "binary"}, "toxiproxy-server is not on PATH"),
        ({"ZEPHON_CHAOS_PROXY_SERVER": "url"}, "needs TOXIPROXY_URL"),
        ({"ZEPHON_CHAOS_PROXY_SERVER": "docker"}, "use auto, url, binary or embedded"),
    ],
)
def test_choose_kind_errors_name_the_way_out(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ProxyServerError, match=message):
        choose_kind({**env, "PATH": str(tmp_path)})


def test_embedded_server_leaves_no_thread_and_no_port(echo_server: EchoServer) -> None:
    threads_before, ports_before = set(threading.enumerate()), listening_ports()
    with start_server({"PATH": ""}) as server:
        assert server.kind == "embedded" and server.owned
        client = ToxiproxyClient(server.url)
        proxy = client.create_proxy("svc", echo_server.upstream)
        held = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        assert client.is_embedded()
        client.close()
    assert set(threading.enumerate()) <= threads_before
    assert listening_ports() <= ports_before
    held.settimeout(5)
    assert held.recv(1) == b""  # the live connection was closed with the server
    held.close()


def test_toxiproxy_url_is_used_as_is_and_left_running() -> None:
    with EmbeddedToxiproxy() as running:
        with start_server({"TOXIPROXY_URL": running.url + "/", "PATH": ""}) as server:
            assert (server.kind, server.url, server.owned) == ("url", running.url, False)
        assert requests.get(running.url + "/version", timeout=5).ok


def test_unreachable_toxiproxy_url_names_the_fix() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with (
        pytest.raises(ProxyServerError, match="unset TOXIPROXY_URL"),
        start_server({"TOXIPROXY_URL": url, "PATH": ""}, deadline_s=0.3),
    ):
        pass


def _fake_binary(bin_dir: Path) -> None:
    """A ``toxiproxy-server`` that takes the real one's flags and serves our embedded API."""
    bin_dir.mkdir()
    script = bin_dir / "toxiproxy-server"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {SRC!r})\n"
        "from zephon_chaos.faults.proxy.cli import main\n"
        "args = sys.argv[1:]\n"
        "host, port = args[args.index('-host') + 1], args[args.index('-port') + 1]\n"
        "raise SystemExit(main(['--host', host, '--port', port]))\n"
    )
    script.chmod(0o755)


def test_binary_on_path_is_started_on_loopback_and_killed(
    tmp_path: Path, echo_server: EchoServer
) -> None:
    _fake_binary(tmp_path / "bin")
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    with start_server(env) as server:
        assert server.kind == "binary" and server.url.startswith("http://127.0.0.1:")
        assert server.binary is not None and server.binary.process is not None
        process = server.binary.process
        with ToxiproxyClient(server.url) as client:
            proxy = client.create_proxy("svc", echo_server.upstream)
            assert exchange(proxy.port) == b"ping"
        api_port = int(server.url.rpartition(":")[2])
    assert process.poll() is not None
    assert refuses(api_port) and refuses(proxy.port)


# The CLI.
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_cli_serves_prints_its_url_and_stops_cleanly(signum: int) -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    process = subprocess.Popen(
        [sys.executable, "-m", "zephon_chaos.faults.proxy", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.split(" on ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        assert requests.get(url + "/version", timeout=5).json() == {"version": "2.12.0"}
        process.send_signal(signum)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "stopped" in out


def test_cli_refuses_non_loopback_without_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--host", "10.1.2.3"]) == 2
    assert "--allow-non-loopback" in capsys.readouterr().err


def test_cli_reports_a_busy_port(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        assert cli_main(["--port", str(port)]) == 1
    assert f"listen tcp 127.0.0.1:{port}: bind: address already in use" in capsys.readouterr().err


def test_embedded_start_failure_is_reported() -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        server = EmbeddedToxiproxy(port=busy.getsockname()[1])
        with pytest.raises(ProxyServerError, match="address already in use"):
            server.start()
    assert server.thread is None
