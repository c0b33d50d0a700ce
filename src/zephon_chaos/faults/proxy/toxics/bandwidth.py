"""``bandwidth``: at most ``rate`` KB/s through the link."""

from __future__ import annotations

from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, Int64
from zephon_chaos.faults.proxy.toxics.base import Chunk, Emit, Stage, StageHost, Toxic
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class BandwidthToxic(Attributes):
    rate: Int64 = 0  # KB/s, 1 KB = 1000 bytes


@register("bandwidth", BandwidthToxic)
class BandwidthStage(Stage[BandwidthToxic]):
    """At most ``rate`` KB/s (1 KB = 1000 bytes); big chunks go out in 100 ms slices."""

    def __init__(self, toxic: Toxic[BandwidthToxic], host: StageHost) -> None:
        super().__init__(toxic, host)
        self._owed = 0.0  # seconds of sending time not yet slept, carried between chunks

    def update(self, toxic: Toxic[BandwidthToxic]) -> None:
        self._owed = 0.0
        super().update(toxic)

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        rate = self.attributes.rate
        if rate <= 0:
            # Toxiproxy spins on a zero rate; an unlimited pass-through is the useful reading.
            self._owed = 0.0
            await emit(chunk)
            return
        data = chunk.data
        self._owed += len(data) / (rate * 1000.0)
        slice_size = rate * 100
        while len(data) > slice_size:
            if await self.sleep(0.1):
                await emit(Chunk(data, chunk.ts))
                return
            await emit(Chunk(data[:slice_size], chunk.ts))
            data = data[slice_size:]
            self._owed -= 0.1
        started = self.host.loop.time()
        if await self.sleep(self._owed):
            self._owed = 0.0
        else:
            self._owed -= self.host.loop.time() - started
        await emit(Chunk(data, chunk.ts))
