"""``noop``: passes data through unchanged (Toxiproxy's ``NoopToxic``)."""

from __future__ import annotations

from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes
from zephon_chaos.faults.proxy.toxics.base import Stage
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class NoopToxic(Attributes):
    """No attributes."""


@register("noop", NoopToxic)
class NoopStage(Stage[NoopToxic]):
    """The base stage's pass-through, under its own name."""
