"""Counting an ``aggregate_dir`` round's file operations, by rank thread.

``FileCoordinator`` does every file operation through one ``RouterStorageBackend``; while
:func:`counting_file_ops` is active, its methods count each call by kind and by the calling
thread (a rank of the bench), then do the real thing.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FILE_OPS = ("put", "open", "exists", "stat", "delete", "glob", "listdir", "mkdir")


class FileOpCounts:
    """Calls per (thread name, operation); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()

    def add(self, op: str) -> None:
        with self._lock:
            self.calls[(threading.current_thread().name, op)] += 1

    def by_op(self, thread: str | None = None) -> dict[str, int]:
        with self._lock:
            out: Counter[str] = Counter()
            for (name, op), n in self.calls.items():
                if thread is None or name == thread:
                    out[op] += n
            return dict(out)

    def total(self, thread: str | None = None) -> int:
        return sum(self.by_op(thread).values())


@contextmanager
def counting_file_ops() -> Iterator[FileOpCounts]:
    """Count ``RouterStorageBackend`` calls for the duration; the methods are restored after."""
    from zephon._internal.io.storage.router import RouterStorageBackend

    counts = FileOpCounts()
    saved: dict[str, Any] = {}

    def wrap(name: str, original: Any) -> Any:
        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            counts.add(name)
            return original(self, *args, **kwargs)

        return counted

    for name in FILE_OPS:
        original = RouterStorageBackend.__dict__.get(name)
        if original is None:
            continue
        saved[name] = original
        setattr(RouterStorageBackend, name, wrap(name, original))
    try:
        yield counts
    finally:
        for name, original in saved.items():
            setattr(RouterStorageBackend, name, original)
