"""Leaving a ``with`` block closes the resource: one definition for the harness's many
closeable things (stores, launchers, clients, servers), each of which defines ``close``."""

from __future__ import annotations

from typing import Self


class Closing:
    """``with thing:`` returns ``thing`` and calls ``thing.close()`` on the way out."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
