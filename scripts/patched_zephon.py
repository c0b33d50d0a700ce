"""Install Zephon 0.2.0 with some of this suite's proposed fixes applied.

Usage: ``python scripts/patched_zephon.py (--patch NAME [--patch NAME ...] | --all | --none |
--select SPEC) --target DIR-or-ENV [--cache DIR]``. The release wheel comes from the
registry (``pip download --no-deps zephon==0.2.0``, nothing else), is unpacked, gets the
chosen ``patches/zephon-0.2.0/<NAME>.patch`` applied, and is packed again as a wheel of the
same version (the project's constraints pin it) with the names applied listed in its
``dist-info/ZEPHON_PATCHES``; ``pip install --no-deps --force-reinstall`` then puts it into
``--target``: a virtual environment (a folder with ``bin/python``) or a plain folder to put
first on ``PYTHONPATH`` (``pip --target``), which swaps Zephon alone and reuses the rest of
the running environment (torch above all).

Patches are applied with ``git apply --3way`` in a throwaway repository holding the
release: git is already needed to work on this project, it refuses a hunk whose context
does not match (no fuzz) and applies a patch whole or not at all, and its three-way merge
composes patches that touch nearby lines of one file, each written against the release.
The ``patch`` program is not part of a minimal Debian or of every CI image.

``--select`` takes ``all``, ``none`` or names separated by commas (``tox -e patched``
passes ``$ZEPHON_PATCHES`` this way).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

VERSION = "0.2.0"
ROOT = Path(__file__).resolve().parents[1]
PATCH_DIR = ROOT / "patches" / f"zephon-{VERSION}"
DEFECTS = PATCH_DIR / "defects.toml"
MARKER = "ZEPHON_PATCHES"
"""The file in the installed wheel's dist-info that names the patches applied."""
PIP_DEADLINE_S = 300.0
GIT_DEADLINE_S = 60.0
NOT_PATCHES = frozenset({"smoke"})
"""Tables of ``defects.toml`` that are no patch."""


class PatchError(Exception):
    """A patch that cannot be chosen or applied; the message says which and why."""


@dataclass(frozen=True)
class Defect:
    """One pinned Zephon defect and its proposed fix (a table of ``defects.toml``)."""

    name: str
    finding: int
    title: str
    repro: str
    xfails: tuple[str, ...]

    @property
    def patch(self) -> Path:
        return PATCH_DIR / f"{self.name}.patch"


def load_defects(path: Path = DEFECTS) -> dict[str, Defect]:
    """Every defect with a patch, in the file's order."""
    tables = tomllib.loads(path.read_text())
    return {
        name: Defect(name, int(t["finding"]), t["title"], t["repro"], tuple(t["xfails"]))
        for name, t in tables.items()
        if name not in NOT_PATCHES
    }


def smoke_tests(path: Path = DEFECTS) -> tuple[str, ...]:
    return tuple(tomllib.loads(path.read_text())["smoke"]["tests"])


def select(spec: str | list[str], known: list[str]) -> list[str]:
    """The patch names ``spec`` chooses (``all``, ``none``, a comma-separated string or a
    list of names), in ``known``'s order: the order they are applied in."""
    if isinstance(spec, str):
        word = spec.strip().lower()
        if word == "all":
            return list(known)
        if word in ("", "none"):
            return []
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = sorted(set(spec) - set(known))
    if unknown:
        raise PatchError(
            f"unknown patch {', '.join(unknown)}; known patches: {', '.join(known)} "
            f"(files under {PATCH_DIR})"
        )
    return [name for name in known if name in spec]


def _git_env() -> dict[str, str]:
    """The caller's environment without what would point git at another repository."""
    drop = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _git(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(tree), *args],
        capture_output=True,
        text=True,
        timeout=GIT_DEADLINE_S,
        env=_git_env(),
        check=False,
    )


def apply_patches(tree: Path, patches: list[tuple[str, Path]]) -> None:
    """Apply each ``(name, file)`` to the release unpacked in ``tree``, in order; raise
    PatchError naming the first that does not apply, with git's reason."""
    for args in (("init", "--quiet"), ("add", "--all")):
        done = _git(tree, *args)
        if done.returncode != 0:
            raise PatchError(f"git {args[0]} in {tree} failed: {done.stderr.strip()}")
    for i, (name, patch) in enumerate(patches):
        if not patch.is_file():
            raise PatchError(f"patch {name}: no file {patch}")
        done = _git(tree, "apply", "--3way", "--whitespace=nowarn", str(patch))
        if done.returncode != 0:
            after = ", ".join(n for n, _ in patches[:i])
            raise PatchError(
                f"patch {name} ({patch}) does not apply to zephon {VERSION}"
                f"{f' after {after}' if after else ''}: "
                f"{done.stderr.strip() or done.stdout.strip()}"
            )


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pack_wheel(tree: Path, wheel_name: str, out_dir: Path, applied: list[str]) -> Path:
    """A wheel of ``tree`` (an unpacked wheel) named ``wheel_name``, its RECORD rewritten
    for the patched files and with ``MARKER`` naming ``applied``."""
    dist_info = next(tree.glob("*.dist-info"))
    (dist_info / MARKER).write_text("".join(f"{name}\n" for name in applied))
    record_name = f"{dist_info.name}/RECORD"
    files = sorted(
        p
        for p in tree.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(tree).parts and p.suffix != ".orig"
    )
    out = out_dir / wheel_name
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            arc = path.relative_to(tree).as_posix()
            if arc == record_name:
                continue
            data = path.read_bytes()
            zf.writestr(arc, data)
            writer.writerow([arc, _digest(data), len(data)])
        writer.writerow([record_name, "", ""])
        zf.writestr(record_name, rows.getvalue())
    return out


def download(cache: Path) -> Path:
    """The release wheel, from ``cache`` or the registry (``pip download --no-deps``)."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"zephon-{VERSION}-*.whl"))
    if found:
        return found[0]
    argv = [
        sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
        "--no-deps", "--only-binary", ":all:", "--dest", str(cache), f"zephon=={VERSION}",
    ]  # fmt: skip
    try:
        done = subprocess.run(argv, timeout=PIP_DEADLINE_S, check=False)
    except subprocess.TimeoutExpired:
        raise PatchError(
            f"pip did not download zephon {VERSION} within {PIP_DEADLINE_S:.0f} s"
        ) from None
    found = sorted(cache.glob(f"zephon-{VERSION}-*.whl"))
    if done.returncode != 0 or not found:
        raise PatchError(
            f"could not download zephon {VERSION} (pip exited {done.returncode}); the "
            "registry must be reachable, or pass --cache with the wheel in it"
        )
    return found[0]


def build(wheel: Path, names: list[str], out_dir: Path, defects: dict[str, Defect]) -> Path:
    """The release ``wheel`` with ``names`` applied, as a wheel in ``out_dir``."""
    with tempfile.TemporaryDirectory(prefix="zephon-src-") as tmp:
        tree = Path(tmp)
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tree)
        apply_patches(tree, [(n, defects[n].patch) for n in names])
        return pack_wheel(tree, wheel.name, out_dir, names)


def install(wheel: Path, target: Path) -> None:
    """Install ``wheel`` into a virtual environment (``target/bin/python``) or a folder."""
    python = target / "bin" / "python"
    if python.exists():
        argv = [str(python), "-m", "pip", "install"]
    else:
        argv = [sys.executable, "-m", "pip", "install", "--upgrade", "--target", str(target)]
    argv += ["--quiet", "--disable-pip-version-check", "--no-deps", "--force-reinstall"]
    argv += ["--no-compile", str(wheel)]
    try:
        done = subprocess.run(argv, timeout=PIP_DEADLINE_S, check=False)
    except subprocess.TimeoutExpired:
        raise PatchError(
            f"pip did not install {wheel.name} within {PIP_DEADLINE_S:.0f} s"
        ) from None
    if done.returncode != 0:
        raise PatchError(f"pip could not install {wheel} into {target} (exit {done.returncode})")


def installed_patches(site: Path) -> list[str] | None:
    """The patches the Zephon installed in ``site`` was built with; None for no build of
    this script's (the release itself, or none)."""
    for marker in site.glob(f"zephon-{VERSION}.dist-info/{MARKER}"):
        return marker.read_text().split()
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--patch", action="append", metavar="NAME", help="apply NAME")
    choice.add_argument("--all", action="store_true", help="apply every patch")
    choice.add_argument("--none", action="store_true", help="the release as it is")
    choice.add_argument("--select", metavar="SPEC", help="all, none, or NAME,NAME,...")
    parser.add_argument("--target", type=Path, required=True, help="venv or folder")
    parser.add_argument("--cache", type=Path, help="where the release wheel is kept")
    args = parser.parse_args(argv)
    defects = load_defects()
    known = list(defects)
    spec = "all" if args.all else "none" if args.none else args.select or args.patch
    try:
        names = select(spec, known)
        with tempfile.TemporaryDirectory(prefix="zephon-wheel-") as tmp:
            wheel = download(args.cache or Path(tmp) / "release")
            built = build(wheel, names, Path(tmp), defects)
            install(built, args.target)
    except PatchError as exc:
        print(f"patched_zephon: {exc}", file=sys.stderr)
        return 1
    print(f"zephon {VERSION} with {', '.join(names) or 'no patch'} installed in {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
