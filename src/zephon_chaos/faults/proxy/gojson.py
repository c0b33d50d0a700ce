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
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MAX_DEPTH = 10_000
# Python's own parser recurses; deeper documents are refused before it is reached.
_PY_SAFE_DEPTH = 500
_FLOAT32_MAX = 3.4028234663852886e38
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_WHITESPACE = b" \t\r\n"
_ESCAPES = b'"\\/bfnrtu'
_HEX = b"0123456789abcdefABCDEF"
_DIGITS = b"0123456789"


class GoJSONError(ValueError):
    """A body Go's decoder would refuse; ``str()`` is Go's message."""


class RawFloat(float):
    """A JSON number with a fraction or exponent, keeping its literal for Go's error text."""

    raw: str

    def __new__(cls, literal: str) -> RawFloat:
        obj = super().__new__(cls, literal)
        obj.raw = literal
        return obj


@dataclass(frozen=True)
class Float32:
    """A float that is written as Go writes a ``float32`` (shortest form, ``1`` not ``1.0``)."""

    value: float


def to_float32(value: float) -> float:
    """Round ``value`` to the nearest float32, as Go stores ``toxicity``."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _quote_char(c: int) -> str:
    """Go's ``quoteChar``: how a byte is shown inside a syntax error."""
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 0x5C: "\\\\"}
    if c in named:
        return f"'{named[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    if 0x80 <= c <= 0xA0 or c == 0xAD:
        return f"'\\u{c:04x}'"
    return f"'{chr(c)}'"


def _syntax(c: int, context: str) -> GoJSONError:
    return GoJSONError(f"invalid character {_quote_char(c)} {context}")


class _Scanner:
    """An iterative copy of Go's JSON scanner: finds the end of the first value or fails."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0
        self.max_depth = 0

    def _peek_nonspace(self) -> int | None:
        data, n = self.data, len(self.data)
        while self.i < n and data[self.i] in _WHITESPACE:
            self.i += 1
        return data[self.i] if self.i < n else None

    def _need(self) -> int:
        c = self._peek_nonspace()
        if c is None:
            raise GoJSONError("unexpected EOF")
        return c

    def scan(self) -> tuple[int, int]:
        """Return ``(start, end)`` of the first value; ``EOF`` when there is none."""
        if self._peek_nonspace() is None:
            raise GoJSONError("EOF")
        start = self.i
        # Each open container is "o" (object) or "a" (array); "k" marks an expected key.
        stack: list[str] = []
        expect_value = True
        while True:
            if expect_value:
                c = self._need()
                if c == 0x7B:  # {
                    self.i += 1
                    stack.append("o")
                    self._check_depth(c, len(stack))
                    c = self._need()
                    if c == 0x7D:
                        self.i += 1
                        stack.pop()
                        expect_value = False
                    else:
                        self._object_key(c)
                        expect_value = True
                    if not stack and not expect_value:
                        return start, self.i
                    continue
                if c == 0x5B:  # [
                    self.i += 1
                    stack.append("a")
                    self._check_depth(c, len(stack))
                    c = self._need()
                    if c == 0x5D:
                        self.i += 1
                        stack.pop()
                        expect_value = False
                        if not stack:
                            return start, self.i
                    continue
                self._scalar(c)
                expect_value = False
                if not stack:
                    return start, self.i
                continue
            # After a value inside a container.
            c = self._need()
            top = stack[-1]
            if top == "o":
                if c == 0x2C:  # ,
                    self.i += 1
                    self._object_key(self._need())
                    expect_value = True
                    continue
                if c == 0x7D:
                    self.i += 1
                    stack.pop()
                else:
                    raise _syntax(c, "after object key:value pair")
            else:
                if c == 0x2C:
                    self.i += 1
                    expect_value = True
                    continue
                if c == 0x5D:
                    self.i += 1
                    stack.pop()
                else:
                    raise _syntax(c, "after array element")
            if not stack:
                return start, self.i

    def _check_depth(self, c: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _syntax(c, "exceeded max depth")
        self.max_depth = max(self.max_depth, depth)

    def _object_key(self, c: int) -> None:
        if c != 0x22:
            raise _syntax(c, "looking for beginning of object key string")
        self._string()
        c = self._need()
        if c != 0x3A:
            raise _syntax(c, "after object key")
        self.i += 1

    def _scalar(self, c: int) -> None:
        if c == 0x22:
            self._string()
        elif c == 0x2D or c in _DIGITS:
            self._number()
        elif c in (0x74, 0x66, 0x6E):
            self._literal({0x74: b"true", 0x66: b"false", 0x6E: b"null"}[c])
        else:
            raise _syntax(c, "looking for beginning of value")

    def _string(self) -> None:
        data, n = self.data, len(self.data)
        self.i += 1
        while self.i < n:
            c = data[self.i]
            if c == 0x22:
                self.i += 1
                return
            if c == 0x5C:
                self.i += 1
                if self.i >= n:
                    break
                e = data[self.i]
                if e not in _ESCAPES:
                    raise _syntax(e, "in string escape code")
                self.i += 1
                if e == 0x75:
                    for _ in range(4):
                        if self.i >= n:
                            raise GoJSONError("unexpected EOF")
                        if data[self.i] not in _HEX:
                            raise _syntax(data[self.i], "in \\u hexadecimal character escape")
                        self.i += 1
                continue
            if c < 0x20:
                raise _syntax(c, "in string literal")
            self.i += 1
        raise GoJSONError("unexpected EOF")

    def _digits(self) -> int:
        data, n, start = self.data, len(self.data), self.i
        while self.i < n and data[self.i] in _DIGITS:
            self.i += 1
        return self.i - start

    def _number(self) -> None:
        data, n = self.data, len(self.data)
        if data[self.i] == 0x2D:
            self.i += 1
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if data[self.i] not in _DIGITS:
                raise _syntax(data[self.i], "in numeric literal")
        if data[self.i] == 0x30:
            self.i += 1
        else:
            self._digits()
        if self.i < n and data[self.i] == 0x2E:
            self.i += 1
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if not self._digits():
                raise _syntax(data[self.i], "after decimal point in numeric literal")
        if self.i < n and data[self.i] in b"eE":
            self.i += 1
            if self.i < n and data[self.i] in b"+-":
                self.i += 1
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if not self._digits():
                raise _syntax(data[self.i], "in exponent of numeric literal")

    def _literal(self, word: bytes) -> None:
        data, n = self.data, len(self.data)
        for expected in word:
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if data[self.i] != expected:
                raise _syntax(
                    data[self.i],
                    f"in literal {word.decode()} (expecting {_quote_char(expected)})",
                )
            self.i += 1


def decode(body: bytes) -> Any:
    """Decode the first JSON value of ``body`` with Go's acceptance rules and messages."""
    scanner = _Scanner(body)
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


def _format_float32(value: float) -> str:
    """Go's ``strconv.FormatFloat(f, 'f' or 'e', -1, 32)`` as ``encoding/json`` chooses it."""
    value32 = to_float32(value)
    if value32 == 0:
        return "0" if math.copysign(1.0, value32) > 0 else "-0"
    for precision in range(1, 10):
        text = f"{value32:.{precision}g}"
        if to_float32(float(text)) == value32:
            break
    magnitude = abs(value32)
    if magnitude < 1e-6 or magnitude >= 1e21:
        mantissa, _, exponent = f"{float(text):.{precision - 1}e}".partition("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        sign = exponent[0]
        digits = exponent[1:].lstrip("0") or "0"
        if len(digits) < 2:
            digits = "0" + digits
        return f"{mantissa}e{sign}{digits}"
    return format(Decimal(text), "f")


_HTML_SAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _encode_str(text: str) -> str:
    out = json.dumps(text, ensure_ascii=False)
    for raw, escaped in _HTML_SAFE.items():
        out = out.replace(raw, escaped)
    return out


def encode(value: Any) -> str:
    """Compact JSON as Go's ``json.Marshal`` writes it; dicts keep their insertion order."""
    parts: list[str] = []
    _encode_into(value, parts)
    return "".join(parts)


def _encode_into(value: Any, parts: list[str]) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, Float32):
        parts.append(_format_float32(value.value))
    elif isinstance(value, int):
        parts.append(str(value))
    elif isinstance(value, float):
        parts.append(repr(value) if not value.is_integer() else str(int(value)))
    elif isinstance(value, str):
        parts.append(_encode_str(value))
    elif isinstance(value, Mapping):
        parts.append("{")
        for k, (key, item) in enumerate(value.items()):
            if k:
                parts.append(",")
            parts.append(_encode_str(str(key)))
            parts.append(":")
            _encode_into(item, parts)
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for k, item in enumerate(value):
            if k:
                parts.append(",")
            _encode_into(item, parts)
        parts.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")
