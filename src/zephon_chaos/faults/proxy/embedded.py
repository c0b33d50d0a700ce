"""Getting a Toxiproxy server: a configured one, the real binary, or the embedded one.

Selection (:func:`start_server`), in order:

1. ``TOXIPROXY_URL`` set: use that server as it is (it is never started or stopped here).
2. ``toxiproxy-server`` on ``PATH``: start it on a free loopback port, wait for its API within
   a deadline, and kill it at the end.
3. Otherwise the embedded server: asyncio in a daemon thread, loopback only.

``ZEPHON_CHAOS_PROXY_SERVER`` (``auto``, ``url``, ``binary``, ``embedded``) forces one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import requests

from zephon_chaos.errors import HarnessError
from zephon_chaos.faults.proxy.api import serve

ServerKind = Literal["url", "binary", "embedded"]
SELECT_ENV = "ZEPHON_CHAOS_PROXY_SERVER"
URL_ENV = "TOXIPROXY_URL"
BINARY = "toxiproxy-server"
START_DEADLINE_S = 10.0


class ProxyServerError(HarnessError, RuntimeError):
    """A Toxiproxy server could not be started or reached."""


class EmbeddedToxiproxy:
    """The embedded Toxiproxy API server, running its own event loop in a daemon thread."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, allow_non_loopback: bool = False
    ) -> None:
        self.host = host
        self.port = port
        self.allow_non_loopback = allow_non_loopback
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._bound: tuple[str, int] | None = None

    @property
    def url(self) -> str:
        if self._bound is None:
            raise ProxyServerError("the embedded Toxiproxy server is not running; call start()")
        host, port = self._bound
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self, timeout_s: float = START_DEADLINE_S) -> EmbeddedToxiproxy:
        if self._thread is not None:
            raise ProxyServerError("this embedded Toxiproxy server was already started")
        self._thread = threading.Thread(
            target=self._run, name="zephon-chaos-toxiproxy", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise ProxyServerError(
                f"the embedded Toxiproxy server did not start within {timeout_s} s"
            )
        if self._error is not None:
            self._thread.join(timeout_s)
            self._thread = None
            raise ProxyServerError(
                f"the embedded Toxiproxy server could not listen on {self.host}:{self.port}: "
                f"{self._error}"
            ) from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # reported to start() or stop()
            self._error = exc
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()

        def ready(host: str, port: int) -> None:
            self._bound = (host, port)
            self._ready.set()

        await serve(
            self.host,
            self.port,
            allow_non_loopback=self.allow_non_loopback,
            on_ready=ready,
            stop=self._stop,
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close every proxy and connection, stop the loop and join the thread."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already finished
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout_s)
        if thread.is_alive():
            raise ProxyServerError(
                f"the embedded Toxiproxy thread did not stop within {timeout_s} s"
            )
        self._thread = None
        self._bound = None

    def __enter__(self) -> EmbeddedToxiproxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 right now (the binary takes a port, not a socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_api(url: str, deadline: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``GET /version`` until it answers, the deadline passes or the process exits."""
    last: Exception | None = None
    with requests.Session() as session:
        session.trust_env = False  # an HTTP_PROXY in the environment must not reroute us
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise ProxyServerError(f"exited with status {process.returncode}")
            try:
                if session.get(f"{url}/version", timeout=1.0).ok:
                    return
            except requests.RequestException as exc:
                last = exc
            time.sleep(0.02)  # polling a readiness condition, not synchronising on time
    raise ProxyServerError(f"no answer on {url}/version before the deadline ({last})")


@dataclass
class BinaryToxiproxy:
    """A ``toxiproxy-server`` process on a loopback port, killed at :meth:`stop`."""

    binary: str
    host: str = "127.0.0.1"
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    _log: object = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = START_DEADLINE_S, attempts: int = 3) -> BinaryToxiproxy:
        problems: list[str] = []
        for _ in range(attempts):  # another process may take the port between probe and bind
            self.port = free_loopback_port()
            handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept open for the process
                prefix="toxiproxy-server-", suffix=".log", delete=False
            )
            self.log_path = Path(handle.name)
            self._log = handle
            self.process = subprocess.Popen(
                [self.binary, "-host", self.host, "-port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                wait_for_api(self.url, time.monotonic() + timeout_s, self.process)
                return self
            except ProxyServerError as exc:
                problems.append(f"port {self.port}: {exc}; output: {self._output_tail()}")
                self.stop()
        raise ProxyServerError(
            f"{self.binary} did not serve its API on {self.host} within {timeout_s} s "
            f"({attempts} tries): {' | '.join(problems)}. Remove it from PATH to use the "
            f"embedded server, or set {URL_ENV} to a running server."
        )

    def _output_tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-500:].strip()

    def stop(self, timeout_s: float = 5.0) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout_s)
        handle, self._log = self._log, None
        if handle is not None:
            handle.close()  # type: ignore[attr-defined]
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
            self.log_path = None


@dataclass
class ToxiproxyServer:
    """A server to talk to: its URL, what kind it is, and whether we own its lifetime."""

    url: str
    kind: ServerKind
    embedded: EmbeddedToxiproxy | None = None
    binary: BinaryToxiproxy | None = None

    @property
    def owned(self) -> bool:
        """Owned servers are private to us; a ``TOXIPROXY_URL`` server may be shared."""
        return self.kind != "url"

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
        if self.binary is not None:
            self.binary.stop()


def choose_kind(env: Mapping[str, str] | None = None) -> ServerKind:
    """Which server :func:`start_server` would use, without starting anything."""
    env = os.environ if env is None else env
    forced = env.get(SELECT_ENV, "auto").strip().lower() or "auto"
    if forced not in ("auto", "url", "binary", "embedded"):
        raise ProxyServerError(
            f"{SELECT_ENV}={forced!r} is not a server choice; use auto, url, binary or embedded"
        )
    if forced == "url" and not env.get(URL_ENV):
        raise ProxyServerError(f"{SELECT_ENV}=url needs {URL_ENV} set to a running server")
    if forced == "binary" and shutil.which(BINARY, path=env.get("PATH")) is None:
        raise ProxyServerError(f"{SELECT_ENV}=binary but {BINARY} is not on PATH")
    if forced != "auto":
        return forced  # type: ignore[return-value]
    if env.get(URL_ENV):
        return "url"
    if shutil.which(BINARY, path=env.get("PATH")) is not None:
        return "binary"
    return "embedded"


@contextlib.contextmanager
def start_server(
    env: Mapping[str, str] | None = None, *, deadline_s: float = START_DEADLINE_S
) -> Iterator[ToxiproxyServer]:
    """Yield a running server chosen as the module docstring says; stop it on exit if ours."""
    env = os.environ if env is None else env
    kind = choose_kind(env)
    if kind == "url":
        server = ToxiproxyServer(env[URL_ENV].rstrip("/"), "url")
        try:
            wait_for_api(server.url, time.monotonic() + deadline_s)
        except ProxyServerError as exc:
            raise ProxyServerError(
                f"{URL_ENV}={server.url} does not answer ({exc}); start that server, or unset "
                f"{URL_ENV} to use toxiproxy-server from PATH or the embedded server"
            ) from exc
    elif kind == "binary":
        path = shutil.which(BINARY, path=env.get("PATH"))
        assert path is not None
        binary = BinaryToxiproxy(path).start(deadline_s)
        server = ToxiproxyServer(binary.url, "binary", binary=binary)
    else:
        embedded = EmbeddedToxiproxy().start()
        server = ToxiproxyServer(embedded.url, "embedded", embedded=embedded)
    try:
        yield server
    finally:
        server.stop()
