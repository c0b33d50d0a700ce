"""A directory the user named is made, or the reason it cannot be is given in words."""

from __future__ import annotations

from pathlib import Path

from zephon_chaos.directories import make_directory


def test_a_missing_directory_is_made_with_its_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert make_directory(target) is None
    assert target.is_dir()
    assert make_directory(target) is None, "an existing directory is fine as it is"


def test_a_file_in_the_way_is_named_as_the_reason(tmp_path: Path) -> None:
    file = tmp_path / "report"
    file.write_text("x")
    assert make_directory(file) == "exists and is not a directory"
    assert make_directory(file / "below") is not None
    assert file.read_text() == "x", "nothing was changed"
