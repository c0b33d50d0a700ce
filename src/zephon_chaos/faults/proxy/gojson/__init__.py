"""JSON read and written the way Go's ``encoding/json`` does it inside ``toxiproxy-server``.

Clients of the real server parse its error strings and its number formats (``"toxicity":1``,
not ``1.0``), so the embedded server must reproduce them: the scanner below reports syntax
errors with Go's wording, and :func:`decode_struct` reports type errors as Go's
``UnmarshalTypeError`` does. Like ``json.Decoder.Decode``, only the first value of a body is
read; trailing bytes are ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from zephon_chaos.faults.proxy.gojson.encode import encode
from zephon_chaos.faults.proxy.gojson.numbers import Float32, RawFloat, to_float32
from zephon_chaos.faults.proxy.gojson.scanner import MAX_DEPTH, GoJSONError, Scanner

__all__ = [
    "MAX_DEPTH",
    "Float32",
    "GoJSONError",
    "RawFloat",
    "convert",
    "decode",
    "decode_struct",
    "encode",
    "find_key",
    "kind_of",
    "to_float32",
    "type_error",
]

# Python's own parser recurses; deeper documents are refused before it is reached.
_PY_SAFE_DEPTH = 500
_FLOAT32_MAX = 3.4028234663852886e38
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def decode(body: bytes) -> Any:
    """Decode the first JSON value of ``body`` with Go's acceptance rules and messages."""
    scanner = Scanner(body)
    start, end = scanner.scan()
    if scanner.max_depth > _PY_SAFE_DEPTH:
        raise GoJSONError("exceeded max depth")
    text = body[start:end].decode("utf-8", errors="replace")
    return json.loads(text, parse_float=RawFloat)


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _literal_of(value: int | float) -> str:
    if isinstance(value, RawFloat):
        return value.raw
    return str(value)


def type_error(kind: str, go_type: str, struct: str | None, path: str | None) -> GoJSONError:
    """Go's ``UnmarshalTypeError`` text: for a struct field when ``path`` is set, else a value."""
    if path is None:
        return GoJSONError(f"json: cannot unmarshal {kind} into Go value of type {go_type}")
    return GoJSONError(
        f"json: cannot unmarshal {kind} into Go struct field "
        f"{struct or ''}.{path} of type {go_type}"
    )


def convert(value: Any, go_type: str, struct: str | None, path: str | None) -> Any:
    """Check one decoded value against a Go scalar type; return the value Go would store."""
    if go_type == "string":
        if not isinstance(value, str):
            raise type_error(kind_of(value), go_type, struct, path)
        return value
    if go_type == "bool":
        if not isinstance(value, bool):
            raise type_error(kind_of(value), go_type, struct, path)
        return value
    if go_type in ("int64", "int"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise type_error(kind_of(value), go_type, struct, path)
        if isinstance(value, float) or not _INT64_MIN <= value <= _INT64_MAX:
            raise type_error(f"number {_literal_of(value)}", go_type, struct, path)
        return int(value)
    if go_type == "float32":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise type_error(kind_of(value), go_type, struct, path)
        as_float = float(value)
        if math.isinf(as_float) or abs(as_float) > _FLOAT32_MAX:
            raise type_error(f"number {_literal_of(value)}", go_type, struct, path)
        return to_float32(as_float)
    if go_type.startswith("toxics."):
        # A nested struct (a toxic's attributes): only its being an object is checked here.
        if not isinstance(value, dict):
            raise type_error(kind_of(value), go_type, struct, path)
        return value
    raise AssertionError(f"no Go type {go_type!r} is modelled")


def _match_field(key: str, names: Iterable[str]) -> str | None:
    """Go matches JSON keys to fields exactly first, then case-insensitively."""
    names = list(names)
    if key in names:
        return key
    folded = key.casefold()
    for name in names:
        if name.casefold() == folded:
            return name
    return None


def decode_struct(
    value: Any,
    fields: Mapping[str, str],
    *,
    go_type: str,
    struct: str | None,
    into: dict[str, Any],
    path: str | None = None,
    outer: str | None = None,
) -> dict[str, Any]:
    """Fill ``into`` from a decoded object as Go fills a struct; unknown keys are ignored.

    ``fields`` maps each JSON name to its Go type. A ``null`` leaves a field alone, as in Go.
    ``go_type`` names the struct when the value is not an object; ``struct`` and ``path`` name
    its fields in errors; ``outer`` is the struct holding it when it is itself a field.
    """
    if value is None:
        return into
    if not isinstance(value, dict):
        raise type_error(kind_of(value), go_type, outer, path)
    for key, item in value.items():
        name = _match_field(key, fields)
        if name is None or item is None:
            continue
        into[name] = convert(item, fields[name], struct, name if path is None else f"{path}.{name}")
    return into


def find_key(value: dict[str, Any], name: str) -> Any:
    """The value Go would decode into the field ``name`` (the last case-insensitive match)."""
    found = None
    for key, item in value.items():
        if _match_field(key, [name]) is not None:
            found = item
    return found
