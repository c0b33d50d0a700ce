"""The embedded server answers the Toxiproxy HTTP API as ``toxiproxy-server`` (v2) does.

The cases follow the Go server's ``api_test.go`` and ``api.go``: routes, status codes, JSON
shapes (byte for byte where Go's encoder decides them) and error texts. These run against the
embedded server on purpose: they check its conformance, whatever server the suite would use.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from zephon_chaos.faults.proxy.embedded import EmbeddedToxiproxy
from zephon_chaos.fixtures.toxiproxy import EchoServer, listening_ports

# The fixtures (toxiproxy, echo_server) until the plugin registers them itself.

TEXT_PLAIN = "text/plain; charset=utf-8"


class Api:
    """Plain HTTP against one server, so that every byte of the answers can be checked."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.port = int(url.rpartition(":")[2])
        self.session = requests.Session()
        self.session.trust_env = False

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None):
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        return self.session.request(method, self.url + path, data=data, timeout=5)

    def create(self, name: str, upstream: str, listen: str = "127.0.0.1:0", **extra: Any):
        response = self.call(
            "POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, **extra}
        )
        assert response.status_code == 201, response.text
        return response.json()


@pytest.fixture
def api() -> Iterator[Api]:
    with EmbeddedToxiproxy() as server:
        client = Api(server.url)
        yield client
        client.session.close()


def port_of(listen: str) -> int:
    return int(listen.rpartition(":")[2])


def is_listening(port: int) -> bool:
    return port in listening_ports()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def assert_api_error(response: requests.Response, status: int, message: str) -> None:
    """Go writes errors with ``http.Error``: text/plain, compact JSON, a trailing newline."""
    assert response.status_code == status
    assert response.headers["Content-Type"] == TEXT_PLAIN
    assert (
        response.text
        == json.dumps({"error": message, "status": status}, separators=(",", ":")) + "\n"
    )


# Server-level routes.
def test_version_is_json_with_a_trailing_newline(api: Api) -> None:
    response = api.call("GET", "/version")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json;charset=utf-8"
    assert response.text == '{"version": "2.12.0"}\n'
    assert "X-Toxiproxy-Request-Id" in response.headers


def test_index_of_an_empty_server_is_an_empty_object(api: Api) -> None:
    response = api.call("GET", "/proxies")
    assert (response.status_code, response.text) == (200, "{}")
    assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("method", "path", "status", "body"),
    [
        ("GET", "/nothing", 404, "404 page not found\n"),
        ("GET", "/proxies/", 404, "404 page not found\n"),
        ("PUT", "/proxies", 405, ""),
        ("DELETE", "/version", 405, ""),
        ("GET", "/reset", 405, ""),
    ],
)
def test_unknown_routes_and_methods(
    api: Api, method: str, path: str, status: int, body: str
) -> None:
    response = api.call(method, path)
    assert (response.status_code, response.text) == (status, body)


def test_browsers_are_refused(api: Api) -> None:
    response = api.session.get(
        api.url + "/proxies", headers={"User-Agent": "Mozilla/5.0 (X11)"}, timeout=5
    )
    assert (response.status_code, response.text) == (403, "User agent not allowed\n")


# Proxies.
def test_create_returns_201_with_go_field_order_and_the_bound_port(
    api: Api, echo_server: EchoServer
) -> None:
    response = api.call(
        "POST",
        "/proxies",
        {"name": "mysql_master", "listen": "localhost:0", "upstream": echo_server.upstream},
    )
    assert response.status_code == 201
    assert response.headers["Content-Type"] == "application/json"
    listen = response.json()["listen"]
    assert listen.startswith("127.0.0.1:") and port_of(listen) > 0
    assert response.text == (
        f'{{"name":"mysql_master","listen":"{listen}","upstream":"{echo_server.upstream}",'
        f'"enabled":true,"toxics":[]}}'
    )
    assert is_listening(port_of(listen))
    assert api.call("GET", "/proxies").json() == {"mysql_master": response.json()}
    assert api.call("GET", "/proxies/mysql_master").text == response.text


def test_index_is_sorted_by_name(api: Api, echo_server: EchoServer) -> None:
    for name in ("b", "c", "a"):
        api.create(name, echo_server.upstream)
    assert list(json.loads(api.call("GET", "/proxies").text)) == ["a", "b", "c"]


def test_disabled_proxy_keeps_its_listen_text_until_it_starts(
    api: Api, echo_server: EchoServer
) -> None:
    port = free_port()
    created = api.create("p", echo_server.upstream, listen=f"localhost:{port}", enabled=False)
    assert (created["listen"], created["enabled"]) == (f"localhost:{port}", False)
    assert not is_listening(port)
    enabled = api.call("POST", "/proxies/p", {"enabled": True}).json()
    assert (enabled["listen"], enabled["enabled"]) == (f"127.0.0.1:{port}", True)
    assert is_listening(port)
    assert api.call("POST", "/proxies/p", {"enabled": False}).json()["enabled"] is False
    assert not is_listening(port)
    again = api.call("POST", "/proxies/p", {"enabled": True}).json()
    assert again["listen"] == f"127.0.0.1:{port}" and is_listening(port)


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_update_changes_upstream_and_listen(api: Api, echo_server: EchoServer, method: str) -> None:
    created = api.create("p", "127.0.0.1:1")
    new_port = free_port()
    updated = api.call(
        method, "/proxies/p", {"upstream": echo_server.upstream, "listen": f"127.0.0.1:{new_port}"}
    )
    assert updated.status_code == 200
    assert updated.json() == {
        "name": "p",
        "listen": f"127.0.0.1:{new_port}",
        "upstream": echo_server.upstream,
        "enabled": True,
        "toxics": [],
    }
    assert is_listening(new_port) and not is_listening(port_of(created["listen"]))


def test_update_ignores_the_name_and_keeps_omitted_fields(
    api: Api, echo_server: EchoServer
) -> None:
    created = api.create("p", echo_server.upstream)
    updated = api.call("PATCH", "/proxies/p", {"name": "renamed"}).json()
    assert updated == created
    assert api.call("GET", "/proxies/renamed").status_code == 404


def test_delete_closes_the_listener_and_then_404s(api: Api, echo_server: EchoServer) -> None:
    port = port_of(api.create("p", echo_server.upstream)["listen"])
    response = api.call("DELETE", "/proxies/p")
    assert (response.status_code, response.text) == (204, "")
    assert not is_listening(port)
    assert api.call("GET", "/proxies").json() == {}
    assert_api_error(api.call("DELETE", "/proxies/p"), 404, "proxy not found")


def test_port_conflict_is_a_500_with_the_bind_error(api: Api, echo_server: EchoServer) -> None:
    port = port_of(api.create("first", echo_server.upstream)["listen"])
    response = api.call(
        "POST",
        "/proxies",
        {"name": "second", "listen": f"localhost:{port}", "upstream": echo_server.upstream},
    )
    assert_api_error(response, 500, f"listen tcp 127.0.0.1:{port}: bind: address already in use")
    api.call("DELETE", "/proxies/first")
    assert api.create("second", echo_server.upstream, listen=f"localhost:{port}")["listen"] == (
        f"127.0.0.1:{port}"
    )


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({}, 400, "missing required field: name"),
        ({"name": "x"}, 400, "missing required field: upstream"),
        ({"name": "x", "upstream": "127.0.0.1:1", "listen": "local373"}, 500,
         "listen tcp: address local373: missing port in address"),
        ({"name": "x", "upstream": "127.0.0.1:1", "listen": "127.0.0.1:99999"}, 500,
         "listen tcp: address 127.0.0.1:99999: invalid port"),
        ({"name": 1}, 400,
         "bad request body: json: cannot unmarshal number into Go struct field "
         "Proxy.name of type string"),
        ({"name": "x", "upstream": "y", "enabled": "yes"}, 400,
         "bad request body: json: cannot unmarshal string into Go struct field "
         "Proxy.enabled of type bool"),
        ([1], 400,
         "bad request body: json: cannot unmarshal array into Go value of type toxiproxy.Proxy"),
        (b"", 400, "bad request body: EOF"),
        (b"garbage", 400, "bad request body: invalid character 'g' looking for beginning of value"),
        (b'{"name": "x"', 400, "bad request body: unexpected EOF"),
        (b'{"name" "x"}', 400, "bad request body: invalid character '\"' after object key"),
        (b'{"name": tru}', 400,
         "bad request body: invalid character '}' in literal true (expecting 'e')"),
        (b'{"a": 1,}', 400,
         "bad request body: invalid character '}' looking for beginning of object key string"),
    ],
)  # fmt: skip
def test_create_errors_match_go(api: Api, body: Any, status: int, message: str) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    assert_api_error(api.call("POST", "/proxies", raw=raw), status, message)
    assert api.call("GET", "/proxies").json() == {}


def test_trailing_bytes_after_the_json_value_are_ignored_as_in_go(
    api: Api, echo_server: EchoServer
) -> None:
    body = json.dumps({"name": "p", "listen": "127.0.0.1:0", "upstream": echo_server.upstream})
    assert api.call("POST", "/proxies", raw=(body + " trailing junk").encode()).status_code == 201


def test_non_loopback_listen_is_refused_with_the_way_out(api: Api) -> None:
    response = api.call(
        "POST", "/proxies", {"name": "x", "listen": "0.0.0.0:0", "upstream": "127.0.0.1:1"}
    )
    assert response.status_code == 500
    message = response.json()["error"]
    assert "loopback" in message and "--allow-non-loopback" in message


def test_duplicate_proxy_is_a_409(api: Api, echo_server: EchoServer) -> None:
    api.create("p", echo_server.upstream)
    response = api.call(
        "POST", "/proxies", {"name": "p", "listen": "127.0.0.1:0", "upstream": "x:1"}
    )
    assert_api_error(response, 409, "proxy already exists")


# Toxics.
@pytest.fixture
def proxy(api: Api, echo_server: EchoServer) -> dict[str, Any]:
    return api.create("p", echo_server.upstream)


def test_toxic_create_fills_go_defaults_and_answers_200(api: Api, proxy: dict[str, Any]) -> None:
    response = api.call("POST", "/proxies/p/toxics", {"type": "latency"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.text == (
        '{"attributes":{"latency":0,"jitter":0},"name":"latency_downstream",'
        '"type":"latency","stream":"downstream","toxicity":1}'
    )


@pytest.mark.parametrize(
    ("toxic_type", "attributes"),
    [
        ("noop", {}),
        ("latency", {"latency": 100, "jitter": 10}),
        ("bandwidth", {"rate": 1000}),
        ("slow_close", {"delay": 50}),
        ("timeout", {"timeout": 0}),
        ("reset_peer", {"timeout": 5}),
        ("slicer", {"average_size": 10, "size_variation": 5, "delay": 100}),
        ("limit_data", {"bytes": 1024}),
    ],
)
@pytest.mark.parametrize("stream", ["upstream", "downstream"])
def test_every_toxic_type_round_trips(
    api: Api, proxy: dict[str, Any], toxic_type: str, attributes: dict[str, int], stream: str
) -> None:
    body = {"type": toxic_type, "stream": stream, "toxicity": 0.2, "attributes": attributes}
    created = api.call("POST", "/proxies/p/toxics", body)
    assert created.status_code == 200, created.text
    expected = {
        "attributes": attributes,
        "name": f"{toxic_type}_{stream}",
        "type": toxic_type,
        "stream": stream,
        "toxicity": 0.2,
    }
    assert created.json() == expected
    assert '"toxicity":0.2}' in created.text
    assert api.call("GET", f"/proxies/p/toxics/{toxic_type}_{stream}").json() == expected
    assert api.call("GET", "/proxies/p").json()["toxics"] == [expected]


def test_toxics_are_listed_upstream_first_in_chain_order(api: Api, proxy: dict[str, Any]) -> None:
    for name, stream in [
        ("d1", "downstream"),
        ("u1", "upstream"),
        ("d2", "downstream"),
        ("u2", "upstream"),
    ]:
        api.call("POST", "/proxies/p/toxics", {"name": name, "type": "noop", "stream": stream})
    assert [t["name"] for t in api.call("GET", "/proxies/p/toxics").json()] == [
        "u1",
        "u2",
        "d1",
        "d2",
    ]


def test_stream_is_case_insensitive_and_kept_as_given(api: Api, proxy: dict[str, Any]) -> None:
    toxic = api.call("POST", "/proxies/p/toxics", {"type": "noop", "stream": "UpStream"}).json()
    assert (toxic["name"], toxic["stream"]) == ("noop_UpStream", "UpStream")


def test_attribute_names_match_case_insensitively_as_in_go(api: Api, proxy: dict[str, Any]) -> None:
    toxic = api.call(
        "POST", "/proxies/p/toxics", {"type": "latency", "attributes": {"Latency": 7}}
    ).json()
    assert toxic["attributes"] == {"latency": 7, "jitter": 0}


def test_same_name_on_the_other_stream_conflicts(api: Api, proxy: dict[str, Any]) -> None:
    api.call(
        "POST", "/proxies/p/toxics", {"name": "foobar", "type": "latency", "stream": "upstream"}
    )
    response = api.call(
        "POST", "/proxies/p/toxics", {"name": "foobar", "type": "latency", "stream": "downstream"}
    )
    assert_api_error(response, 409, "toxic already exists")
    defaults = [
        api.call("POST", "/proxies/p/toxics", {"type": "latency", "stream": s}).json()["name"]
        for s in ("upstream", "downstream")
    ]
    assert defaults == ["latency_upstream", "latency_downstream"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"type": "walrus"}, 400, "invalid toxic type"),
        ({"type": "latency", "stream": "walrustream"}, 400,
         "stream was invalid, can be either upstream or downstream"),
        ({"type": "latency", "stream": ""}, 400,
         "stream was invalid, can be either upstream or downstream"),
        ({"type": "latency", "attributes": {"latency": 1.5}}, 400,
         "bad request body: json: cannot unmarshal number 1.5 into Go struct field "
         "LatencyToxic.attributes.latency of type int64"),
        ({"type": "latency", "attributes": {"jitter": "10ms"}}, 400,
         "bad request body: json: cannot unmarshal string into Go struct field "
         "LatencyToxic.attributes.jitter of type int64"),
        ({"type": "slicer", "attributes": {"delay": 1e3}}, 400,
         "bad request body: json: cannot unmarshal number 1000.0 into Go struct field "
         "SlicerToxic.attributes.delay of type int"),
        ({"type": "limit_data", "attributes": {"bytes": 2**64}}, 400,
         "bad request body: json: cannot unmarshal number 18446744073709551616 into Go struct "
         "field LimitDataToxic.attributes.bytes of type int64"),
        ({"type": "latency", "toxicity": "high"}, 400,
         "bad request body: json: cannot unmarshal string into Go struct field "
         "ToxicWrapper.toxicity of type float32"),
        ({"type": "latency", "attributes": 5}, 400,
         "bad request body: json: cannot unmarshal number into Go struct field "
         "ToxicWrapper.attributes of type toxics.NoopToxic"),
        ({"type": "latency", "name": "dup"}, 409, "toxic already exists"),
    ],
)  # fmt: skip
def test_toxic_create_errors_match_go(
    api: Api, proxy: dict[str, Any], body: dict[str, Any], status: int, message: str
) -> None:
    api.call("POST", "/proxies/p/toxics", {"type": "noop", "name": "dup"})
    assert_api_error(api.call("POST", "/proxies/p/toxics", body), status, message)
    assert [t["name"] for t in api.call("GET", "/proxies/p/toxics").json()] == ["dup"]


@pytest.mark.parametrize(
    ("method", "path", "message"),
    [
        ("GET", "/proxies/nope", "proxy not found"),
        ("GET", "/proxies/nope/toxics", "proxy not found"),
        ("POST", "/proxies/nope/toxics", "proxy not found"),
        ("POST", "/proxies/nope", "proxy not found"),
        ("GET", "/proxies/p/toxics/nope", "toxic not found"),
        ("PATCH", "/proxies/p/toxics/nope", "toxic not found"),
        ("DELETE", "/proxies/p/toxics/nope", "toxic not found"),
    ],
)
def test_not_found(api: Api, proxy: dict[str, Any], method: str, path: str, message: str) -> None:
    assert_api_error(api.call(method, path, {"type": "latency"}), 404, message)


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_toxic_update_merges_attributes_and_keeps_toxicity_unless_given(
    api: Api, proxy: dict[str, Any], method: str
) -> None:
    api.call(
        "POST",
        "/proxies/p/toxics",
        {"type": "latency", "attributes": {"latency": 100, "jitter": 10}},
    )
    first = api.call(
        method,
        "/proxies/p/toxics/latency_downstream",
        {"toxicity": 0.5, "attributes": {"latency": 1000}},
    )
    assert first.status_code == 200
    assert first.json()["attributes"] == {"latency": 1000, "jitter": 10}
    assert first.json()["toxicity"] == 0.5
    second = api.call(
        method, "/proxies/p/toxics/latency_downstream", {"attributes": {"latency": 500}}
    ).json()
    assert (second["attributes"], second["toxicity"]) == ({"latency": 500, "jitter": 10}, 0.5)
    assert api.call("GET", "/proxies/p/toxics").json() == [second]


def test_toxic_update_rejects_bad_attributes(api: Api, proxy: dict[str, Any]) -> None:
    api.call("POST", "/proxies/p/toxics", {"type": "latency"})
    response = api.call(
        "POST", "/proxies/p/toxics/latency_downstream", {"attributes": {"latency": "x"}}
    )
    assert_api_error(
        response,
        400,
        "bad request body: json: cannot unmarshal string into Go struct field "
        "LatencyToxic.attributes.latency of type int64",
    )


def test_toxic_delete_answers_204(api: Api, proxy: dict[str, Any]) -> None:
    api.call("POST", "/proxies/p/toxics", {"type": "latency"})
    response = api.call("DELETE", "/proxies/p/toxics/latency_downstream")
    assert (response.status_code, response.text) == (204, "")
    assert api.call("GET", "/proxies/p/toxics").text == "[]"


def test_reset_enables_every_proxy_and_removes_every_toxic(
    api: Api, echo_server: EchoServer
) -> None:
    port = port_of(api.create("a", echo_server.upstream)["listen"])
    api.create("b", echo_server.upstream)
    api.call("POST", "/proxies/a/toxics", {"type": "latency", "attributes": {"latency": 100}})
    api.call("POST", "/proxies/b/toxics", {"type": "timeout", "stream": "upstream"})
    api.call("POST", "/proxies/a", {"enabled": False})
    response = api.call("POST", "/reset")
    assert (response.status_code, response.text) == (204, "")
    proxies = api.call("GET", "/proxies").json()
    assert all(p["enabled"] and p["toxics"] == [] for p in proxies.values())
    assert proxies["a"]["listen"] == f"127.0.0.1:{port}" and is_listening(port)


# Populate.
def test_populate_creates_proxies_with_enabled_by_default(
    api: Api, echo_server: EchoServer
) -> None:
    body = [
        {"name": "one", "listen": "127.0.0.1:0", "upstream": echo_server.upstream},
        {
            "name": "two",
            "listen": f"localhost:{free_port()}",
            "upstream": echo_server.upstream,
            "enabled": False,
        },
    ]
    response = api.call("POST", "/populate", body)
    assert response.status_code == 201
    assert response.headers["Content-Type"] == "application/json"
    proxies = response.json()["proxies"]
    assert [(p["name"], p["enabled"]) for p in proxies] == [("one", True), ("two", False)]
    assert is_listening(port_of(proxies[0]["listen"]))
    assert not is_listening(port_of(proxies[1]["listen"]))


def test_populate_keeps_an_identical_proxy_and_replaces_a_changed_one(
    api: Api, echo_server: EchoServer
) -> None:
    one = api.create("one", echo_server.upstream, listen=f"localhost:{free_port()}")
    api.create("two", echo_server.upstream)
    api.call("POST", "/proxies/one/toxics", {"type": "latency"})
    new_two = f"127.0.0.1:{free_port()}"
    response = api.call(
        "POST",
        "/populate",
        [
            {"name": "one", "listen": one["listen"], "upstream": echo_server.upstream},
            {"name": "two", "listen": new_two, "upstream": echo_server.upstream},
        ],
    )
    assert response.status_code == 201
    one_after, two_after = response.json()["proxies"]
    assert [t["type"] for t in one_after["toxics"]] == ["latency"]
    assert two_after["listen"] == new_two and is_listening(port_of(new_two))


@pytest.mark.parametrize(
    ("second", "status", "message", "created"),
    [
        ({"name": "", "listen": "", "upstream": ""}, 400,
         "missing required field: name at proxy 2", []),
        ({"name": "two"}, 400, "missing required field: upstream at proxy 2", []),
        ({"name": "two", "listen": "local373", "upstream": "127.0.0.1:1"}, 500,
         "listen tcp: address local373: missing port in address", ["one"]),
    ],
)  # fmt: skip
def test_populate_errors_carry_status_error_and_the_applied_proxies(
    api: Api,
    echo_server: EchoServer,
    second: dict[str, Any],
    status: int,
    message: str,
    created: list[str],
) -> None:
    first = {"name": "one", "listen": "127.0.0.1:0", "upstream": echo_server.upstream}
    response = api.call("POST", "/populate", [first, second])
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert list(body) == ["error", "status", "proxies"]
    assert (body["error"], body["status"]) == (message, status)
    assert [p["name"] for p in body["proxies"] or []] == created
    assert sorted(api.call("GET", "/proxies").json()) == created


@pytest.mark.parametrize(
    ("raw", "status", "text"),
    [
        (b"[]", 201, '{"proxies":null}'),
        (b"null", 201, '{"proxies":null}'),
        (b"{}", 400,
         '{"error":"bad request body: json: cannot unmarshal object into Go value of type '
         '[]struct { toxiproxy.Proxy; Enabled *bool \\"json:\\\\\\"enabled\\\\\\"\\" }",'
         '"status":400,"proxies":null}'),
    ],
)  # fmt: skip
def test_populate_edge_bodies(api: Api, raw: bytes, status: int, text: str) -> None:
    response = api.call("POST", "/populate", raw=raw)
    assert (response.status_code, response.text) == (status, text)


# The embedded-only counters endpoint.
def test_stats_endpoint_counts_connections_and_bytes(api: Api, echo_server: EchoServer) -> None:
    port = port_of(api.create("p", echo_server.upstream)["listen"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"ping")
        assert conn.recv(4) == b"ping"
    deadline = time.monotonic() + 5
    while (stats := api.call("GET", "/proxies/p/stats").json())["connections_active"]:
        assert time.monotonic() < deadline, stats
    assert stats["connections_accepted"] == stats["connections_closed"] == 1
    assert stats["upstream"]["bytes_sent"] == stats["downstream"]["bytes_sent"] == 4
    assert_api_error(api.call("GET", "/proxies/nope/stats"), 404, "proxy not found")


# Malformed requests never take the server down.
def raw_exchange(port: int, payload: bytes, *, half_close: bool = False) -> bytes:
    """Send bytes on a fresh connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        try:
            conn.sendall(payload)
            if half_close:
                conn.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        try:
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


@pytest.mark.parametrize(
    ("payload", "half_close", "status_line"),
    [
        (b"garbage\r\n\r\n", False, b"HTTP/1.1 400 Bad Request"),
        (b"\x00\xff\xfe binary junk \x01\r\n\r\n", False, b"HTTP/1.1 400 Bad Request"),
        (b"GET /version HTTP/9.9\r\n\r\n", False, b"HTTP/1.1 505 HTTP Version Not Supported"),
        (b"GET /version HTTP/1.1\r\nBad Header\r\n\r\n", False, b"HTTP/1.1 400 Bad Request"),
        (b"GET /version HTTP/1.1\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n\r\n", False,
         b"HTTP/1.1 431 Request Header Fields Too Large"),
        (b"GET /version HTTP/1.1\r\n" + b"X-Many: b\r\n" * 120_000 + b"\r\n", False,
         b"HTTP/1.1 431 Request Header Fields Too Large"),
        (b"POST /proxies HTTP/1.1\r\nContent-Length: nope\r\n\r\n", False,
         b"HTTP/1.1 400 Bad Request"),
        (b"POST /proxies HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", False,
         b"HTTP/1.1 413 Request Entity Too Large"),
        (b"POST /proxies HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", False,
         b"HTTP/1.1 501 Not Implemented"),
        (b"GET /vers", True, b""),
        (b"POST /proxies HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"na", True, b""),
        (b"GET /version HTTP/1.1\r\nHost: x\r\n", True, b""),
        (b"", True, b""),
        (b"GET /version HTTP/1.1\r\nConnection: close\r\n\r\n", True, b"HTTP/1.1 200 OK"),
    ],
)  # fmt: skip
def test_malformed_requests_get_go_answers_and_the_server_survives(
    api: Api, payload: bytes, half_close: bool, status_line: bytes
) -> None:
    answer = raw_exchange(api.port, payload, half_close=half_close)
    assert answer.split(b"\r\n", 1)[0] == status_line
    assert api.call("GET", "/version").status_code == 200


def test_many_abandoned_connections_do_not_stall_the_server(api: Api) -> None:
    conns = [socket.create_connection(("127.0.0.1", api.port), timeout=5) for _ in range(50)]
    try:
        for k, conn in enumerate(conns):
            conn.sendall(
                b"POST /proxies HTTP/1.1\r\nContent-Length: 10\r\n\r\n{" if k % 2 else b"GET /"
            )
        assert api.call("GET", "/version").status_code == 200
    finally:
        for conn in conns:
            conn.close()
    assert api.call("GET", "/proxies").json() == {}


def test_keep_alive_chunked_and_expect_continue(api: Api, echo_server: EchoServer) -> None:
    body = json.dumps(
        {"name": "p", "listen": "127.0.0.1:0", "upstream": echo_server.upstream}
    ).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    request = (
        b"POST /proxies HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
        + chunked
        + b"\r\nGET /proxies/p HTTP/1.1\r\nConnection: close\r\n\r\n"
    )
    answer = raw_exchange(api.port, request)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n")
    assert answer.count(b"HTTP/1.1 200 OK") == 1


def test_http_1_0_closes_after_the_response(api: Api) -> None:
    with socket.create_connection(("127.0.0.1", api.port), timeout=5) as conn:
        conn.sendall(b"GET /version HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b'{"version": "2.12.0"}\n')
