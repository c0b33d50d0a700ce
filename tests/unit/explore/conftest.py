"""A private Redis server for the tests of a shared example database.

It listens on a unix socket in a temp folder of its own (no TCP port, so no port race),
persists nothing, and is ready when it says so on its stdout. It is killed (its whole
process group) and its folder removed at teardown. Without ``redis-server`` (Debian's
``redis-server``; ``.ci/run`` installs it) or the ``redis`` package, the tests that need it
skip saying which.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

READY = b"ready to accept connections"
"""Lowercased: 7.0 says "The server is now ready to accept connections at <socket>", 7.2
"Ready to accept connections unix"."""
START_S = 15.0
STOP_S = 10.0


@pytest.fixture
def redis_socket() -> Iterator[Path]:
    """The unix socket of a Redis server of this test's own."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    pytest.importorskip("redis", reason="the redis package is missing: pip install -e '.[shard]'")
    folder = Path(tempfile.mkdtemp(prefix="zc-redis-"))
    sock = folder / "redis.sock"
    proc = subprocess.Popen(
        [
            exe,
            "--port", "0",  # no TCP listener: only the unix socket
            "--unixsocket", str(sock),
            "--unixsocketperm", "700",
            "--dir", str(folder),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--logfile", "",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    drain = threading.Thread(target=_drain, args=(proc,), daemon=True)
    try:
        log = _await_ready(proc, START_S)
        drain.start()
        assert sock.is_socket(), log
        yield sock
    finally:
        _stop(proc, STOP_S)
        if drain.is_alive():
            drain.join(STOP_S)  # the log's end: the server has exited
        if proc.stdout is not None:
            proc.stdout.close()
        shutil.rmtree(folder, ignore_errors=True)


def _await_ready(proc: subprocess.Popen[bytes], deadline_s: float) -> str:
    """Read the server's log until it says it is ready; fail with the log otherwise."""
    assert proc.stdout is not None
    end = time.monotonic() + deadline_s
    seen = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while READY not in seen.lower():
            left = end - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                pytest.fail(f"redis-server not ready within {deadline_s:.0f}s:\n{seen.decode()}")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                pytest.fail(f"redis-server exited ({proc.wait()}):\n{seen.decode()}")
            seen += chunk
    return seen.decode(errors="replace")


def _drain(proc: subprocess.Popen[bytes]) -> None:
    """Keep reading the server's log so a full pipe never blocks it; ends at its exit."""
    assert proc.stdout is not None
    while os.read(proc.stdout.fileno(), 65536):
        pass


def _stop(proc: subprocess.Popen[bytes], deadline_s: float) -> None:
    """SIGTERM the server's process group, SIGKILL it past the deadline."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=deadline_s)
            break
        except subprocess.TimeoutExpired:
            continue
    proc.wait(timeout=deadline_s)
