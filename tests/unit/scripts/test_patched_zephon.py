"""scripts/patched_zephon.py: choosing patches, applying them, packing the wheel; and
defects.toml, the one map of every strict xfail of a Zephon defect to its patch."""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import io
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.unit.scripts.conftest import load_script

pz = load_script("patched_zephon")
KNOWN = ["a", "b", "c"]


@pytest.mark.parametrize(
    ("spec", "chosen"),
    [
        ("all", KNOWN),
        ("none", []),
        ("", []),
        ("c, a", ["a", "c"]),
        (["b"], ["b"]),
        (["c", "a", "c"], ["a", "c"]),
    ],
)
def test_a_selection_is_applied_in_the_known_order(spec: str | list[str], chosen: list[str]):
    assert pz.select(spec, KNOWN) == chosen


def test_an_unknown_patch_is_named_with_the_known_ones() -> None:
    with pytest.raises(pz.PatchError, match=r"unknown patch nope; known patches: a, b, c"):
        pz.select(["a", "nope"], KNOWN)


def _tree(folder: Path, text: str) -> Path:
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "mod.py").write_text(text)
    (folder / "pkg-1.0.dist-info").mkdir()
    (folder / "pkg-1.0.dist-info" / "RECORD").write_text("stale\n")
    return folder


def _patch(tmp_path: Path, name: str, before: str, after: str) -> Path:
    """A unified diff from ``before`` to ``after`` of pkg/mod.py, with a header as the
    project's patches have, made by git."""
    a, b = _tree(tmp_path / f"{name}-a", before), _tree(tmp_path / f"{name}-b", after)
    done = subprocess.run(
        ["git", "diff", "--no-index", "--", f"{a.name}/pkg", f"{b.name}/pkg"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    diff = done.stdout.replace(f"{a.name}/", "").replace(f"{b.name}/", "")
    patch = tmp_path / f"{name}.patch"
    patch.write_text(f"What {name} changes, and why.\n\n{diff}")
    return patch


BASE = "".join(f"line {i}\n" for i in range(20))


def test_patches_written_against_one_release_compose(tmp_path: Path) -> None:
    first = _patch(tmp_path, "first", BASE, BASE.replace("line 2\n", "line two\n"))
    second = _patch(tmp_path, "second", BASE, BASE.replace("line 9\n", "line nine\n"))
    tree = _tree(tmp_path / "release", BASE)
    pz.apply_patches(tree, [("first", first), ("second", second)])
    text = (tree / "pkg" / "mod.py").read_text()
    assert "line two\n" in text and "line nine\n" in text


def test_a_patch_that_does_not_apply_is_named_with_the_ones_before_it(tmp_path: Path) -> None:
    first = _patch(tmp_path, "first", BASE, BASE.replace("line 2\n", "line two\n"))
    other = _patch(tmp_path, "other", "x\ny\n", "x\nz\n")
    tree = _tree(tmp_path / "release", BASE)
    with pytest.raises(pz.PatchError, match=r"patch other \(.*\) does not apply .* after first"):
        pz.apply_patches(tree, [("first", first), ("other", other)])


def test_the_packed_wheel_records_every_file_and_the_patches_applied(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "release", BASE)
    wheel = pz.pack_wheel(tree, "pkg-1.0-py3-none-any.whl", tmp_path, ["first", "second"])
    with zipfile.ZipFile(wheel) as zf:
        record = list(csv.reader(io.StringIO(zf.read("pkg-1.0.dist-info/RECORD").decode())))
        for path, digest, size in record[:-1]:
            data = zf.read(path)
            sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert (digest, int(size)) == (f"sha256={sha.decode()}", len(data)), path
        assert record[-1] == ["pkg-1.0.dist-info/RECORD", "", ""]
        assert {r[0] for r in record} == set(zf.namelist())
        zf.extractall(tmp_path / "site")
    assert (tmp_path / "site" / "pkg-1.0.dist-info" / pz.MARKER).read_text() == "first\nsecond\n"


def test_installed_patches_reads_the_marker_and_knows_the_release(tmp_path: Path) -> None:
    dist_info = tmp_path / f"zephon-{pz.VERSION}.dist-info"
    dist_info.mkdir()
    assert pz.installed_patches(tmp_path) is None
    (dist_info / pz.MARKER).write_text("a\nb\n")
    assert pz.installed_patches(tmp_path) == ["a", "b"]


# ---- defects.toml against the suite ---------------------------------------------------


def _strict_xfails(root: Path) -> set[str]:
    """``path::test`` of every test under ``root`` marked with a strict xfail."""
    found = set()
    for path in sorted(root.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if (
                    isinstance(dec, ast.Call)
                    and ast.unparse(dec.func) == "pytest.mark.xfail"
                    and any(
                        k.arg == "strict" and ast.literal_eval(k.value) is True
                        for k in dec.keywords
                    )
                ):
                    found.add(f"{path.relative_to(pz.ROOT).as_posix()}::{node.name}")
    return found


def test_every_strict_xfail_of_a_zephon_defect_is_mapped_to_one_patch() -> None:
    defects = pz.load_defects()
    mapped = [node for d in defects.values() for node in d.xfails]
    assert len(mapped) == len(set(mapped)), "an xfail mapped to two defects"
    assert set(mapped) == _strict_xfails(pz.ROOT / "tests" / "zephon")


def test_every_defect_has_its_patch_its_reproduction_and_a_header() -> None:
    for defect in pz.load_defects().values():
        text = defect.patch.read_text()
        header = text[: text.index("diff --git")]
        assert header.strip(), defect.name
        assert all(f"a/zephon/{p}" for p in text.split("diff --git a/zephon/")[1:]), defect.name
        assert (pz.ROOT / defect.repro).is_file(), defect.repro
    for node in pz.smoke_tests():
        path, _, name = node.partition("::")
        assert f"def {name}(" in (pz.ROOT / path).read_text(), node
