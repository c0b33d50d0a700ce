"""Check the ``tox -e gpu`` environment: it must use the machine's torch, never install its own.

Usage: ``python scripts/gpu_env_check.py ENV_SITE_PACKAGES``. Exits 1, naming them, when
torch or NVIDIA wheels were installed into the environment itself (an unpinned resolution
there downloads a multi-GB CUDA build); otherwise prints which torch the tests will see.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

FORBIDDEN = ("torch", "nvidia", "triton")


def installed_here(site_packages: Path) -> list[str]:
    """Distributions of the forbidden families inside ``site_packages`` itself."""
    found = []
    for dist in sorted(site_packages.glob("*.dist-info")):
        name = dist.name.split("-", 1)[0].lower().replace("_", "-")
        if name == "torch" or name.startswith(FORBIDDEN):
            found.append(dist.name.removesuffix(".dist-info"))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: gpu_env_check.py ENV_SITE_PACKAGES", file=sys.stderr)
        return 2
    site_packages = Path(argv[0])
    if not site_packages.is_dir():
        print(f"gpu env check: {site_packages} is not a directory", file=sys.stderr)
        return 2
    bad = installed_here(site_packages)
    if bad:
        print(
            f"gpu env check: this environment installed {', '.join(bad)}; the GPU tier must "
            "use the machine's own torch (tox sitepackages): remove torch from its deps",
            file=sys.stderr,
        )
        return 1
    spec = importlib.util.find_spec("torch")
    where = spec.origin if spec and spec.origin else None
    print(f"gpu env check: no torch installed in the env; the machine's torch: {where or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
