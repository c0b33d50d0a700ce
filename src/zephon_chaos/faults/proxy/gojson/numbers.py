"""Numbers as Go's JSON keeps them: float literals for error texts, ``float32`` values."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from decimal import Decimal


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


def format_float32(value: float) -> str:
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
