"""A proxy's toxics: requests decoded and checked, chains kept, live links told of changes.

As Toxiproxy's ``toxic_collection.go``: ``add_json`` and ``update_json`` take a request body,
decode it with Go's rules (the ``ToxicWrapper``'s defaults: stream ``downstream``, toxicity 1,
name ``<type>_<stream>``), check it in Go's order and answer Go's errors; the API handlers only
pass bodies in and toxics out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from zephon_chaos.faults.proxy import gojson, toxics
from zephon_chaos.faults.proxy.api_errors import (
    INVALID_STREAM,
    INVALID_TOXIC_TYPE,
    TOXIC_ALREADY_EXISTS,
    TOXIC_NOT_FOUND,
)
from zephon_chaos.faults.proxy.request_json import bad_body, decode_body, decode_fields
from zephon_chaos.faults.proxy.toxics import (
    Attributes,
    Direction,
    Toxic,
    ToxicCounters,
    ToxicKind,
)

if TYPE_CHECKING:
    from zephon_chaos.faults.proxy.link import Link
    from zephon_chaos.faults.proxy.proxies import Proxy

_WRAPPER_FIELDS = {
    "attributes": "toxics.NoopToxic",
    "name": "string",
    "type": "string",
    "stream": "string",
    "toxicity": "float32",
}
_UPDATE_STRUCT = (
    'struct { Attributes interface {} "json:\\"attributes\\""; '
    'Toxicity float32 "json:\\"toxicity\\"" }'
)


def _attributes(value: Any, kind: ToxicKind, base: Attributes) -> Attributes:
    """The body's ``attributes`` member decoded into ``kind``'s struct over ``base``."""
    member = gojson.find_key(value, "attributes") if isinstance(value, dict) else None
    with bad_body():
        return kind.attributes.decode(member, base)


class ToxicCollection:
    """The toxics of one proxy, one ordered chain per direction, applied to live links too."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.chains: dict[Direction, list[Toxic[Any]]] = {d: [] for d in Direction}

    # Requests, as Go's AddToxicJson and UpdateToxicJson.
    def add_json(self, body: bytes) -> Toxic[Any]:
        value = decode_body(body)
        wrapper = decode_fields(
            value,
            _WRAPPER_FIELDS,
            {"name": "", "type": "", "stream": "downstream", "toxicity": 1.0},
            go_type="toxics.ToxicWrapper",
            struct="ToxicWrapper",
        )
        direction = Direction.parse(wrapper["stream"])
        if direction is None:
            raise INVALID_STREAM
        name = wrapper["name"] or f"{wrapper['type']}_{wrapper['stream']}"
        kind = toxics.lookup(wrapper["type"])
        if kind is None:
            raise INVALID_TOXIC_TYPE
        if self.get(name) is not None:
            raise TOXIC_ALREADY_EXISTS
        toxic = Toxic(
            name=name,
            type=kind.type_name,
            stream=wrapper["stream"],
            direction=direction,
            toxicity=gojson.to_float32(wrapper["toxicity"]),
            attributes=_attributes(value, kind, kind.attributes()),
        )
        return self.add(toxic)

    def update_json(self, name: str, body: bytes) -> Toxic[Any]:
        """New toxicity and attributes over the old ones: what the body leaves out stays."""
        toxic = self.get_or_fail(name)
        kind = toxics.lookup(toxic.type)
        assert kind is not None, toxic.type  # it was created from a registered type
        value = decode_body(body)
        fields = decode_fields(
            value,
            {"attributes": f"toxics.{kind.go_struct}", "toxicity": "float32"},
            {"toxicity": toxic.toxicity},
            go_type=_UPDATE_STRUCT,
            struct="",
        )
        updated = Toxic(
            name=toxic.name,
            type=toxic.type,
            stream=toxic.stream,
            direction=toxic.direction,
            toxicity=fields["toxicity"],
            attributes=_attributes(value, kind, toxic.attributes),
        )
        return self.replace(updated)

    def get_or_fail(self, name: str) -> Toxic[Any]:
        toxic = self.get(name)
        if toxic is None:
            raise TOXIC_NOT_FOUND
        return toxic

    # The chains.
    def all(self) -> list[Toxic[Any]]:
        return [t for d in Direction for t in self.chains[d]]

    def get(self, name: str) -> Toxic[Any] | None:
        return next((t for t in self.all() if t.name == name), None)

    def _links(self, direction: Direction) -> Iterable[Link]:
        for conn in list(self.proxy.connections):
            link = conn.links.get(direction)
            if link is not None:
                yield link

    def add(self, toxic: Toxic[Any]) -> Toxic[Any]:
        if self.get(toxic.name) is not None:
            raise TOXIC_ALREADY_EXISTS
        toxic.counters = self.proxy.stats.toxics.setdefault(toxic.name, ToxicCounters())
        self.chains[toxic.direction].append(toxic)
        for link in self._links(toxic.direction):
            link.add_toxic(toxic)
        return toxic

    def replace(self, toxic: Toxic[Any]) -> Toxic[Any]:
        """Swap in new attributes/toxicity for a toxic of the same name and direction."""
        chain = self.chains[toxic.direction]
        index = next(i for i, t in enumerate(chain) if t.name == toxic.name)
        toxic.counters = chain[index].counters
        chain[index] = toxic
        for link in self._links(toxic.direction):
            link.update_toxic(toxic)
        return toxic

    def remove(self, name: str) -> None:
        toxic = self.get(name)
        if toxic is None:
            raise TOXIC_NOT_FOUND
        self.chains[toxic.direction].remove(toxic)
        for link in self._links(toxic.direction):
            link.remove_toxic(name)

    def reset(self) -> None:
        for toxic in self.all():
            self.remove(toxic.name)
