"""Files that appear whole or not at all: a rank may be killed at any instruction."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def replacing(path: Path | str) -> Iterator[BinaryIO]:
    """A file to write whose bytes replace ``path`` once the block ends; on an error, or a
    kill mid-write, ``path`` keeps what it had (a hidden temporary sits beside it at most)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
