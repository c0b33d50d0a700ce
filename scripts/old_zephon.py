"""Install the previous Zephon release into a folder of its own, beside the tested one.

Usage: ``python scripts/old_zephon.py DIR``. ``tests/zephon/test_across_versions.py`` takes
a checkpoint with it (``PYTHONPATH=DIR``) and resumes it with the Zephon under test, as a
trainer does after an upgrade. Two versions cannot share one environment, so this one lives
in ``DIR`` alone: ``--no-deps`` (0.1.0 needs nothing 0.2.0 does not already install, and no
resolution may touch torch) and without the project's constraints, which pin the tested
version. Does nothing when ``DIR`` already holds it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

VERSION = "0.1.0"
"""The release before ``aggregate_store``: its recipes aggregated through ``aggregate_dir``."""
DEADLINE_S = 300.0


def installed(folder: Path) -> str | None:
    """The version of the Zephon in ``folder``, read from its metadata; None if there is none."""
    for meta in folder.glob("zephon-*.dist-info/METADATA"):
        for line in meta.read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: old_zephon.py DIR", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    if installed(folder) == VERSION:
        print(f"zephon {VERSION} is in {folder}")
        return 0
    env = {k: v for k, v in os.environ.items() if k != "PIP_CONSTRAINT"}
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-compile",
        "--upgrade",
        "--target",
        str(folder),
        f"zephon=={VERSION}",
    ]
    try:
        done = subprocess.run(argv, env=env, timeout=DEADLINE_S, check=False)
    except subprocess.TimeoutExpired:
        print(
            f"old_zephon: pip did not install zephon {VERSION} within {DEADLINE_S:.0f} s",
            file=sys.stderr,
        )
        return 1
    if done.returncode != 0 or installed(folder) != VERSION:
        print(
            f"old_zephon: could not install zephon {VERSION} into {folder} (pip exited "
            f"{done.returncode}); the across-versions test needs it",
            file=sys.stderr,
        )
        return 1
    print(f"zephon {VERSION} installed in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
