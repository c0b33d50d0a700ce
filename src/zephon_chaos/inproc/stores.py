"""TCPStores for rank threads, closed only once the pipelines that used them are gone.

A Zephon engine deletes its last checkpoint result from the store when it is collected, and
engines sit in reference cycles, so they go at the next full garbage collection, not when
their thread ends. Closing a launch's store at once would make that late delete fail (and
c10d log it); a full ``gc.collect()`` per launch costs ~0.3 s with torch loaded. So a
finished launch's store is retired, and retired stores close after the interpreter's next
full collection, or after a forced one once ``MAX_RETIRED`` have piled up.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Any

from zephon_chaos.launch.store_host import StoreHost

MAX_RETIRED = 24


class _QuietHost(StoreHost):
    """A hosted store whose close drops the server without a full collection."""

    def close(self) -> None:
        self._store = None


class StorePool:
    """Opens stores for launches, retires them, closes them when nothing can still use them."""

    def __init__(self, max_retired: int = MAX_RETIRED) -> None:
        self.max_retired = max_retired
        self._full_collections = 0
        self._retired: list[tuple[int, _QuietHost]] = []
        self._lock = threading.Lock()
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            self._full_collections += 1

    def open(self) -> StoreHost:
        self._close_collected()
        return _QuietHost()

    def hang_up(self, host: StoreHost) -> None:
        """Stop ``host``'s server, which ends every call blocked on it, and serve its port
        again from an empty store, retired at once: a rank that connects only now (c10d
        retries a refused connect until the rank's own timeout) finds a store and walks on to
        its next step, where its group's teardown stops it."""
        with contextlib.suppress(Exception):
            host.close()
        try:
            successor = _QuietHost(port=host.port)
        except OSError:  # the old server still holds the port: its blocked calls stay blocked
            return
        self.retire(successor)

    def retire(self, host: StoreHost) -> None:
        """Keep ``host`` serving until a full collection has run since now."""
        with self._lock:
            self._retired.append((self._full_collections, host))  # type: ignore[arg-type]
            crowded = len(self._retired) > self.max_retired
        if crowded:
            gc.collect()
            self._close_collected()

    def _close_collected(self) -> None:
        with self._lock:
            done = [h for seen, h in self._retired if seen < self._full_collections]
            self._retired = [(s, h) for s, h in self._retired if s >= self._full_collections]
        for host in done:
            with contextlib.suppress(Exception):
                host.close()

    def close(self) -> None:
        """Collect, then close every store (at the end of a run of many launches)."""
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        gc.collect()
        with self._lock:
            hosts = [h for _, h in self._retired]
            self._retired = []
        for host in hosts:
            with contextlib.suppress(Exception):
                host.close()

    @property
    def open_count(self) -> int:
        return len(self._retired)
