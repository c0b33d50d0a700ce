"""Scenario files as older versions wrote them, for the tests that load old files."""

from __future__ import annotations

from typing import Any


def written_as(raw: dict[str, Any], version: int) -> dict[str, Any]:
    """``raw``, a file of this version, with the keys it had in ``version`` and that version's
    number: before version 4 the launches were ``phases`` and a launch named its launch path
    ``launch`` (now ``launches`` and ``path``). Fields added since stay; a test drops those it
    needs gone."""
    old = dict(raw, version=version)
    if version < 4:
        old["phases"] = [_launch_path_named_launch(p) for p in old.pop("launches")]
    return old


def _launch_path_named_launch(launch: dict[str, Any]) -> dict[str, Any]:
    old = dict(launch)
    old["launch"] = old.pop("path")
    return old
