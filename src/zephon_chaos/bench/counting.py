"""A KVStore that counts: every TCPStore request (one round trip) and its payload bytes.

Registered as ``counted://host:port``; it is Zephon's own ``TorchKVStore`` with a meter on
its single choke point (``_call``, one per TCPStore request), so the counts are exact and
cost nothing measurable. Where no proxy injects latency, it can also delay each request by
one round trip (``2 x one-way``) itself: the documented fallback for latency.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

SCHEME = "counted"
WRITE_OPS = frozenset({"set", "compare_set", "append"})


@dataclass
class Counts:
    ops: int = 0
    writes: int = 0
    bytes_out: int = 0
    bytes_in: int = 0
    chunk_writes: int = 0
    by_op: dict[str, int] = field(default_factory=dict)

    def minus(self, other: Counts) -> Counts:
        return Counts(
            ops=self.ops - other.ops,
            writes=self.writes - other.writes,
            bytes_out=self.bytes_out - other.bytes_out,
            bytes_in=self.bytes_in - other.bytes_in,
            chunk_writes=self.chunk_writes - other.chunk_writes,
            by_op={k: v - other.by_op.get(k, 0) for k, v in self.by_op.items()},
        )


class Meter:
    """Counts shared by every rank thread of one measurement; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = Counts()
        self.delay_s = 0.0
        """Added before each request (the client-side latency fallback): one round trip."""

    def add(self, op: str, key: object, sent: int, received: int) -> None:
        with self._lock:
            c = self._counts
            c.ops += 1
            c.by_op[op] = c.by_op.get(op, 0) + 1
            c.bytes_out += sent
            c.bytes_in += received
            if op in WRITE_OPS:
                c.writes += 1
                if isinstance(key, str) and "/chunk/" in key:
                    c.chunk_writes += 1

    def snapshot(self) -> Counts:
        with self._lock:
            c = self._counts
            return Counts(c.ops, c.writes, c.bytes_out, c.bytes_in, c.chunk_writes, dict(c.by_op))


METER = Meter()
"""The process's meter: ranks of a bench are threads of one process."""


def _size(value: object) -> int:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, (list, tuple)):
        return sum(_size(v) for v in value)
    return 0


def counting_store_class() -> type:
    """``TorchKVStore`` with a meter (built lazily: zephon imports torch)."""
    from zephon._internal.kvstore import TorchKVStore

    class CountingKVStore(TorchKVStore):  # type: ignore[misc]
        """Zephon's TCPStore client, counting each request (and delaying it, if asked)."""

        meter: Meter = METER
        pending_sent = threading.local()

        def _call(
            self, op: str, key: object, fn: Callable[[Any], Any], *args: Any, **kwargs: Any
        ) -> Any:
            # Whatever else Zephon's _call takes passes through: a fixed signature broke the
            # meter under the proposed stalled-store-link fix, which adds a keyword.
            delay = self.meter.delay_s
            if delay > 0:
                time.sleep(delay)
            result = super()._call(op, key, fn, *args, **kwargs)
            sent = _size(key) + getattr(self.pending_sent, "value", 0)
            self.pending_sent.value = 0
            received = _size(result) if op in ("get", "multi_get", "compare_set") else 0
            self.meter.add(op, key, sent, received)
            return result

        def _set(self, key: str, value: bytes) -> None:
            self.pending_sent.value = len(value)
            super()._set(key, value)

        def _set_if_absent(self, key: str, value: bytes) -> bytes:
            self.pending_sent.value = len(value)
            return super()._set_if_absent(key, value)  # type: ignore[no-any-return]

        def _append(self, key: str, value: bytes) -> None:
            self.pending_sent.value = len(value)
            super()._append(key, value)

    return CountingKVStore


_registered = False
_register_lock = threading.Lock()


def register() -> None:
    """Register ``counted://`` with Zephon once per process."""
    global _registered
    with _register_lock:
        if _registered:
            return
        from zephon._internal.kvstore import register_kv_store

        cls = counting_store_class()

        def factory(uri: str, timeout_s: float) -> Any:
            parsed = urlparse(uri)
            if not parsed.hostname or parsed.port is None:
                raise ValueError(f"{uri!r} must name a host and a port: counted://HOST:PORT")
            return cls(parsed.hostname, parsed.port, timeout_s=timeout_s)

        register_kv_store(SCHEME, factory)
        _registered = True


def open_counted(host: str, port: int, timeout_s: float = 60.0) -> Any:
    """A counting client of the TCPStore at ``host:port`` (for KVStore-level measurements)."""
    register()
    from zephon._internal.kvstore import open_kv_store

    return open_kv_store(f"{SCHEME}://{host}:{port}", timeout_s=timeout_s)
