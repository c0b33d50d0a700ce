"""``latency``: every chunk delayed by ``latency`` ± ``jitter`` ms."""

from __future__ import annotations

import random
from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, Int64
from zephon_chaos.faults.proxy.toxics.base import Chunk, Emit, Stage
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class LatencyToxic(Attributes):
    latency: Int64 = 0  # ms
    jitter: Int64 = 0  # ms, either way


@register("latency", LatencyToxic)
class LatencyStage(Stage[LatencyToxic]):
    """``latency`` ± ``jitter`` ms after the chunk was read; chunks keep their order."""

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        latency, jitter = self.attributes.latency, self.attributes.jitter
        delay_ms = latency
        if jitter > 0:
            delay_ms += random.randrange(jitter * 2) - jitter
        wait = delay_ms / 1000.0 - (self.host.loop.time() - chunk.ts)
        if wait > 0 and not await self.sleep(wait):
            chunk.ts += wait
        await emit(chunk)
