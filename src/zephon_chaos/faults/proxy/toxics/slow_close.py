"""``slow_close``: the close of the stream delayed by ``delay`` ms."""

from __future__ import annotations

from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, Int64
from zephon_chaos.faults.proxy.toxics.base import Stage
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class SlowCloseToxic(Attributes):
    delay: Int64 = 0  # ms


@register("slow_close", SlowCloseToxic)
class SlowCloseStage(Stage[SlowCloseToxic]):
    """Data passes; the end of the stream waits ``delay`` ms."""

    async def on_eof(self) -> None:
        await self.sleep(self.attributes.delay / 1000.0)
