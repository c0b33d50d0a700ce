"""``reset_peer``: both sockets reset (RST) ``timeout`` ms after the first data or close."""

from __future__ import annotations

from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, Int64
from zephon_chaos.faults.proxy.toxics.base import Chunk, CloseLink, Emit, Stage
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class ResetToxic(Attributes):
    timeout: Int64 = 0  # ms


@register("reset_peer", ResetToxic)
class ResetPeerStage(Stage[ResetToxic]):
    """On the first data (or close) seen, wait ``timeout`` ms, then reset both sockets (RST)."""

    async def _reset(self) -> None:
        while self.live:  # an update restarts the wait with the new timeout
            if not await self.sleep(self.attributes.timeout / 1000.0):
                self.toxic.counters.closes += 1
                raise CloseLink(reset=True)

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        await self._reset()
        if not self.live:
            await emit(chunk)

    async def on_eof(self) -> None:
        await self._reset()
