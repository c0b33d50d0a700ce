"""``timeout``: hold all data; close the link ``timeout`` ms after the toxic started on it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, Int64
from zephon_chaos.faults.proxy.toxics.base import Chunk, Emit, Stage, StageHost, Toxic
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class TimeoutToxic(Attributes):
    timeout: Int64 = 0  # ms; 0 holds the data and never closes


@register("timeout", TimeoutToxic)
class TimeoutStage(Stage[TimeoutToxic]):
    """Hold all data; with ``timeout`` > 0 close the link that long after the toxic started.

    With ``timeout`` 0 the connection is never closed by the toxic; held data flows again once
    the toxic is removed, as in Toxiproxy.
    """

    def __init__(self, toxic: Toxic[TimeoutToxic], host: StageHost) -> None:
        super().__init__(toxic, host)
        self._timer: asyncio.TimerHandle | None = None

    def attach(self) -> None:
        timeout = self.attributes.timeout
        if self.live and timeout > 0:
            self._timer = self.host.loop.call_later(timeout / 1000.0, self._expire)

    def detach(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self.live:
            self.toxic.counters.closes += 1
            self.host.close_by_toxic(self, reset=False)

    async def _hold_while_live(self) -> None:
        while self.live:
            await self.hold()

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        await self._hold_while_live()
        await emit(chunk)

    async def on_eof(self) -> None:
        await self._hold_while_live()
