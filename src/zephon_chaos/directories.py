"""A directory the user named, made ready for writing, or the reason it cannot be."""

from __future__ import annotations

from pathlib import Path


def make_directory(path: Path) -> str | None:
    """Create ``path`` and its parents unless it is a directory already; why it cannot be
    one (to be told with the option or spec that named it), or None."""
    if path.exists() and not path.is_dir():
        return "exists and is not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create it ({exc.strerror})"
    return None
