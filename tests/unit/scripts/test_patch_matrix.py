"""scripts/patch_matrix.py: outcomes read from a JUnit report, cells, rows, the Markdown."""

from __future__ import annotations

from tests.unit.scripts.conftest import load_script

pm = load_script("patch_matrix")
pz = load_script("patched_zephon")

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.zephon.test_a" name="test_x[p1]"><skipped type="pytest.xfail"
 message="pinned"/></testcase>
<testcase classname="tests.zephon.test_a" name="test_x[p2]"><failure
 message="[XPASS(strict)] pinned"/></testcase>
<testcase classname="tests.zephon.test_a" name="test_y"><skipped type="pytest.xfail"
 message="pinned"/></testcase>
<testcase classname="tests.zephon.test_b" name="test_z"><failure message="assert 0"/>
</testcase>
<testcase classname="tests.zephon.test_b" name="test_w"><error message="fixture"/></testcase>
<testcase classname="tests.zephon.test_b" name="test_s"><skipped type="pytest.skip"
 message="no toxiproxy"/></testcase>
<testcase classname="tests.zephon.test_b" name="test_ok"/>
</testsuite></testsuites>"""

DEFECTS = {
    "one": pz.Defect("one", 1, "t", "r", ("tests/zephon/test_a.py::test_x",)),
    "two": pz.Defect("two", 2, "t", "r", ("tests/zephon/test_a.py::test_y",)),
    "three": pz.Defect("three", 3, "t", "r", ("tests/zephon/test_c.py::test_never_ran",)),
}


def test_each_testcase_outcome_is_read_from_the_report_values() -> None:
    got = {(o.file, o.name): o.outcome for o in pm.outcomes(JUNIT)}
    assert got == {
        ("tests/zephon/test_a.py", "test_x[p1]"): "xfail",
        ("tests/zephon/test_a.py", "test_x[p2]"): "xpass",
        ("tests/zephon/test_a.py", "test_y"): "xfail",
        ("tests/zephon/test_b.py", "test_z"): "failed",
        ("tests/zephon/test_b.py", "test_w"): "error",
        ("tests/zephon/test_b.py", "test_s"): "skipped",
        ("tests/zephon/test_b.py", "test_ok"): "passed",
    }


def test_a_cell_is_flipped_pinned_counted_or_unmeasured() -> None:
    results = pm.outcomes(JUNIT)
    assert pm.cell(("tests/zephon/test_a.py::test_y",), results) == pm.PINNED
    assert pm.cell(("tests/zephon/test_a.py::test_x",), results) == "1 xfail, 1 xpass"
    assert pm.cell(("tests/zephon/test_c.py::test_never_ran",), results) is pm.UNMEASURED
    flipped = [pm.Outcome("tests/zephon/test_a.py", "test_x[p]", "xpass")] * 2
    assert pm.cell(("tests/zephon/test_a.py::test_x",), flipped) == pm.FLIPPED


def test_a_row_holds_every_column_and_the_smoke_tests() -> None:
    smoke = ("tests/zephon/test_b.py::test_ok",)
    assert pm.row(pm.outcomes(JUNIT), DEFECTS, smoke) == {
        "one": "1 xfail, 1 xpass",
        "two": pm.PINNED,
        "three": pm.UNMEASURED,
        pm.SMOKE: "passed",
    }


def test_only_measured_cells_that_a_specific_patch_would_not_give_are_surprises() -> None:
    matrix = {
        "one": {"one": pm.FLIPPED, "two": pm.PINNED, "three": None, pm.SMOKE: "passed"},
        "two": {"one": pm.FLIPPED, "two": pm.PINNED, "three": None, pm.SMOKE: "failed"},
    }
    assert pm.surprises(matrix) == [
        ("two", "one", pm.FLIPPED),
        ("two", "two", pm.PINNED),
        ("two", pm.SMOKE, "failed"),
    ]


def test_the_markdown_names_unmeasured_cells_and_rows_and_bolds_surprises() -> None:
    matrix = {
        pm.BASELINE: {"one": pm.PINNED, "two": pm.PINNED, "three": None, pm.SMOKE: "passed"},
        "one": {"one": pm.FLIPPED, "two": pm.FLIPPED, "three": None, pm.SMOKE: "passed"},
    }
    text = pm.render(matrix, DEFECTS, "python scripts/patch_matrix.py --patch one")
    lines = text.splitlines()
    assert lines[0] == "| patch \\ defect | D1 | D2 | D3 | smoke |"
    assert lines[2] == "| none | xfail | xfail | not measured | passed |"
    assert lines[3] == "| one | flipped | **flipped** | not measured | passed |"
    assert "- D3: `three`" in lines
    assert "Rows not measured: two, three." in lines
    assert lines[-1] == "Made by: `python scripts/patch_matrix.py --patch one`"
