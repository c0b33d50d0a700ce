"""``limit_data``: the link closed once ``bytes`` bytes have passed."""

from __future__ import annotations

from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, Int64
from zephon_chaos.faults.proxy.toxics.base import Chunk, CloseLink, Emit, Stage, StageHost, Toxic
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class LimitDataToxic(Attributes):
    bytes: Int64 = 0


@register("limit_data", LimitDataToxic)
class LimitDataStage(Stage[LimitDataToxic]):
    """Pass ``bytes`` bytes in total on this link, then close it."""

    def __init__(self, toxic: Toxic[LimitDataToxic], host: StageHost) -> None:
        super().__init__(toxic, host)
        self.transmitted = 0  # kept across updates, like Toxiproxy's per-link state

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        remaining = max(0, self.attributes.bytes - self.transmitted)
        data = chunk.data[:remaining] if remaining < len(chunk.data) else chunk.data
        if data:
            await emit(Chunk(data, chunk.ts))
            self.transmitted += len(data)
        if self.attributes.bytes - self.transmitted <= 0:
            self.toxic.counters.closes += 1
            raise CloseLink(reset=False)
