"""The reproduction scripts print their JSON lines so that ranks sharing one pipe cannot
interleave them: torchrun starts every rank with ``python -u``, where ``print(text)`` is two
writes (the text, then the newline), and another rank's line can land between them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SCRIPTS = sorted(
    p
    for p in Path(__file__).parent.glob("*.py")
    if not p.name.startswith(("test_", "__")) and p.name != "launch.py"
)


def split_json_prints(source: str) -> list[int]:
    """Lines where ``print(json.dumps(...))`` leaves its newline to a second write."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"):
            continue
        first = node.args[0] if node.args else None
        dumps = (
            isinstance(first, ast.Call)
            and isinstance(first.func, ast.Attribute)
            and first.func.attr == "dumps"
        )
        end = next((k.value for k in node.keywords if k.arg == "end"), None)
        whole = isinstance(end, ast.Constant) and end.value == ""
        if dumps and not whole:
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_json_line_is_printed_in_one_write(script: Path) -> None:
    assert split_json_prints(script.read_text()) == [], (
        f"{script.name}: print the JSON line with its newline in one write: "
        'print(json.dumps(x) + "\\n", end="", flush=True)'
    )


def test_the_check_finds_the_form_that_interleaved() -> None:
    split = 'import json\nprint(json.dumps({"a": 1}), flush=True)\n'
    whole = 'import json\nprint(json.dumps({"a": 1}) + "\\n", end="", flush=True)\n'
    assert (split_json_prints(split), split_json_prints(whole)) == ([2], [])
