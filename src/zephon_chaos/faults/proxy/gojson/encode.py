"""JSON written as Go's ``json.Marshal`` writes it: compact, HTML-safe, Go's float32 form."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zephon_chaos.faults.proxy.gojson.numbers import Float32, format_float32

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
        parts.append(format_float32(value.value))
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
