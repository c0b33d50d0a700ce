"""Durations on the command line: ``90s``, ``10m``, ``1h30m``, or plain seconds."""

from __future__ import annotations

import re

_NUMBER = r"\d+(?:\.\d+)?"
_PARTS = re.compile(rf"^(?:(?P<h>{_NUMBER})h)?(?:(?P<m>{_NUMBER})m)?(?:(?P<s>{_NUMBER})s?)?$")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming the accepted forms otherwise."""
    value = text.strip().lower()
    m = _PARTS.match(value)
    if not value or m is None or not any(m.group(k) for k in "hms"):
        raise ValueError(f"{text!r} is not a duration: use seconds (300), 90s, 10m or 1h30m")
    seconds = (
        float(m.group("h") or 0) * 3600 + float(m.group("m") or 0) * 60 + float(m.group("s") or 0)
    )
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


def format_duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"
