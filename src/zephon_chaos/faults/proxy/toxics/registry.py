"""The toxic types by API name, filled by ``@register`` as Go's ``toxics.Register`` does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from zephon_chaos.faults.proxy.toxics.attributes import Attributes
from zephon_chaos.faults.proxy.toxics.base import Stage, StageHost, Toxic

S = TypeVar("S", bound=type[Stage[Any]])


@dataclass(frozen=True)
class ToxicKind:
    """A toxic type: its API name, its attributes (Go's struct) and its behaviour."""

    type_name: str
    attributes: type[Attributes]
    stage: type[Stage[Any]]

    @property
    def go_struct(self) -> str:
        return self.attributes.__name__


_KINDS: dict[str, ToxicKind] = {}


def register(type_name: str, attributes: type[Attributes]) -> Callable[[S], S]:
    """Class decorator: ``stage`` runs toxics of ``type_name``, configured by ``attributes``."""

    def add(stage: S) -> S:
        if type_name in _KINDS:
            raise ValueError(
                f"toxic type {type_name!r} is registered twice ({_KINDS[type_name].stage.__name__}"
                f" and {stage.__name__}); give the new toxic another name"
            )
        _KINDS[type_name] = ToxicKind(type_name, attributes, stage)
        return stage

    return add


def lookup(type_name: str) -> ToxicKind | None:
    return _KINDS.get(type_name)


def kinds() -> tuple[ToxicKind, ...]:
    """Every registered type, in registration order."""
    return tuple(_KINDS.values())


def make_stage(toxic: Toxic[Any], host: StageHost) -> Stage[Any]:
    return _KINDS[toxic.type].stage(toxic, host)
