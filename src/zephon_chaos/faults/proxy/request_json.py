"""Request bodies decoded as ``toxiproxy-server`` decodes them, with its error texts.

Every decoding error becomes ``bad request body: <Go's json error>`` (400). Proxy bodies are
decoded here into a typed :class:`ProxyInput`; toxic bodies by the toxic collection, which
knows each toxic's attributes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from zephon_chaos.faults.proxy import gojson
from zephon_chaos.faults.proxy.api_errors import BAD_REQUEST_BODY, MISSING_FIELD

PROXY_FIELDS = {"name": "string", "listen": "string", "upstream": "string", "enabled": "bool"}
_POPULATE_ITEM = 'struct { toxiproxy.Proxy; Enabled *bool "json:\\"enabled\\"" }'


@contextlib.contextmanager
def bad_body() -> Iterator[None]:
    """Go's JSON errors inside become ``bad request body: <Go's text>`` (400)."""
    try:
        yield
    except gojson.GoJSONError as exc:
        raise BAD_REQUEST_BODY.joined(str(exc)) from None


def decode_body(body: bytes) -> Any:
    """The first JSON value of a body, or Go's syntax error as a 400."""
    with bad_body():
        return gojson.decode(body)


def decode_fields(
    value: Any,
    fields: Mapping[str, str],
    into: dict[str, Any],
    *,
    go_type: str,
    struct: str | None,
    path: str | None = None,
) -> dict[str, Any]:
    """``gojson.decode_struct`` with its errors answered as a 400."""
    with bad_body():
        return gojson.decode_struct(
            value, fields, go_type=go_type, struct=struct, path=path, into=into
        )


@dataclass(frozen=True)
class ProxyInput:
    """A proxy as a request gives it; ``enabled`` None means "not given" (populate)."""

    name: str = ""
    listen: str = ""
    upstream: str = ""
    enabled: bool | None = True

    def _decoded(self, value: Any, go_type: str, struct: str) -> ProxyInput:
        into = vars(self).copy()
        fields = decode_fields(value, PROXY_FIELDS, into, go_type=go_type, struct=struct)
        return ProxyInput(**fields)

    def check(self, where: str = "") -> ProxyInput:
        """Go's ``missing required field`` checks, ``where`` naming the populate entry."""
        if not self.name:
            raise MISSING_FIELD.joined(f"name{where}")
        if not self.upstream:
            raise MISSING_FIELD.joined(f"upstream{where}")
        return self


def proxy_create(body: bytes) -> ProxyInput:
    """``POST /proxies``: name and upstream required, enabled by default."""
    return ProxyInput()._decoded(decode_body(body), "toxiproxy.Proxy", "Proxy").check()


def proxy_update(body: bytes, current: ProxyInput) -> ProxyInput:
    """``POST``/``PATCH /proxies/{name}``: what the body leaves out stays as it is."""
    return current._decoded(decode_body(body), "toxiproxy.Proxy", "Proxy")


def populate(body: bytes) -> list[ProxyInput]:
    """``POST /populate``: a JSON array (or null) of proxies, every one checked first."""
    value = decode_body(body)
    if value is None:
        return []
    if not isinstance(value, list):
        error = gojson.type_error(gojson.kind_of(value), f"[]{_POPULATE_ITEM}", None, None)
        raise BAD_REQUEST_BODY.joined(str(error))
    items = [ProxyInput(enabled=None)._decoded(entry, _POPULATE_ITEM, "") for entry in value]
    for index, item in enumerate(items, start=1):
        item.check(f" at proxy {index}")
    return items
