"""Toxics: one module per toxic type, each a typed attributes class and a registered stage.

Importing this package registers the built-in types, in Toxiproxy's order; ``TOXIC_TYPES`` is
that order. To add a toxic, see ``docs/proxy-toxics.md``: one module here, its ``@register``,
its name in ``BUILTIN`` below, and a test.
"""

import importlib

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, GoInt, Int64
from zephon_chaos.faults.proxy.toxics.base import (
    Chunk,
    CloseLink,
    Direction,
    Emit,
    Stage,
    StageHost,
    Toxic,
    ToxicCounters,
)
from zephon_chaos.faults.proxy.toxics.registry import (
    ToxicKind,
    kinds,
    lookup,
    make_stage,
    register,
)

#: The built-in toxic modules, imported (so registered) in Toxiproxy's order.
BUILTIN = (
    "noop",
    "latency",
    "bandwidth",
    "slow_close",
    "timeout",
    "reset_peer",
    "slicer",
    "limit_data",
)
for _module in BUILTIN:
    importlib.import_module(f"{__name__}.{_module}")

TOXIC_TYPES: tuple[str, ...] = tuple(kind.type_name for kind in kinds())

__all__ = [
    "TOXIC_TYPES",
    "Attributes",
    "Chunk",
    "CloseLink",
    "Direction",
    "Emit",
    "GoInt",
    "Int64",
    "Stage",
    "StageHost",
    "Toxic",
    "ToxicCounters",
    "ToxicKind",
    "kinds",
    "lookup",
    "make_stage",
    "register",
]
