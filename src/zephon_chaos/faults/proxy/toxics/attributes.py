"""Typed toxic attributes: a frozen dataclass per toxic, named and typed as Go's struct.

A field's Go type (``int64`` or ``int``) rides on its annotation, so decoding reports Go's
``UnmarshalTypeError`` text (``... Go struct field LatencyToxic.attributes.latency of type
int64``) while the rest of the code reads plain ``int`` attributes. Every field defaults to
Go's zero value.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from zephon_chaos.faults.proxy import gojson


@dataclass(frozen=True)
class GoType:
    """The Go type of an attribute field, as error texts name it."""

    name: str


Int64 = Annotated[int, GoType("int64")]
GoInt = Annotated[int, GoType("int")]

A = TypeVar("A", bound="Attributes")


@dataclass(frozen=True)
class Attributes:
    """Base of every toxic's attributes; the subclass's name is Go's struct name."""

    @classmethod
    def decode(cls: type[A], value: Any, base: A) -> A:
        """The body's ``attributes`` over ``base``: what it leaves out or nulls stays as it is.

        Raises :class:`gojson.GoJSONError` with Go's text for a value of the wrong type.
        """
        fields = gojson.decode_struct(
            value,
            go_fields(cls),
            go_type=f"toxics.{cls.__name__}",
            struct=cls.__name__,
            path="attributes",
            into=dataclasses.asdict(base),
        )
        return cls(**fields)

    def as_json(self) -> dict[str, int]:
        """Go's field order, which is the dataclass's."""
        return dataclasses.asdict(self)


@functools.cache
def go_fields(cls: type[Attributes]) -> dict[str, str]:
    """Each field's JSON name and Go type, in declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    found: dict[str, str] = {}
    for item in dataclasses.fields(cls):
        go_type = next(
            (m for m in getattr(hints[item.name], "__metadata__", ()) if isinstance(m, GoType)),
            None,
        )
        if go_type is None:
            raise TypeError(
                f"{cls.__name__}.{item.name} has no Go type; annotate it Int64 or GoInt"
            )
        found[item.name] = go_type.name
    return found
