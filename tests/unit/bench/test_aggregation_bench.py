"""``zephon-chaos bench aggregation`` on a tiny grid: it measures, counts, writes CSV and PNG."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from zephon_chaos.bench.aggregation import Cell, hosted_store, measure_cell
from zephon_chaos.bench.chunked import measure_pipeline
from zephon_chaos.bench.counting import METER
from zephon_chaos.bench.grid import GridConfig
from zephon_chaos.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_tiny_grid_writes_csv_and_plots(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "bench",
            "aggregation",
            "--out",
            str(tmp_path),
            "--worlds",
            "1,2",
            "--latencies",
            "0,2",
            "--reps",
            "2",
            "--value-sizes",
            "5",
            "--value-latencies",
            "0",
            "--no-pipeline-chunked",
            "--max-seconds",
            "120",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "threads of one process" in printed and "torch://" in printed
    summary = _rows(tmp_path / "aggregation.csv")
    rows = {(r["mode"], r["world"], r["latency_ms"]): r for r in summary}
    assert set(rows) == {
        ("torch://", "1", "0"),
        ("torch://", "1", "2"),
        ("aggregate_dir", "1", "0"),
        ("torch://", "2", "0"),
        ("torch://", "2", "2"),
        ("aggregate_dir", "2", "0"),
    }
    assert all(r["error"] == "" and r["reps"] == "2" for r in rows.values())
    assert rows[("torch://", "1", "0")]["round_trips"] == "0"  # one rank: nothing to aggregate
    two = rows[("torch://", "2", "2")]
    assert int(two["round_trips"]) > 0 and int(two["writes"]) > 0 and int(two["bytes_in"]) > 0
    assert two["latency_via"] == "proxy"
    assert int(two["wire_bytes"]) >= int(two["bytes_out"]) + int(two["bytes_in"])
    chunked = _rows(tmp_path / "chunked.csv")
    writes = [r for r in chunked if r["kind"] == "kvstore-write"]
    assert writes and all(int(r["chunk_writes"]) == 2 for r in writes)  # 5 MiB = 2 chunks
    for name in ("aggregation.png", "chunked.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC


def test_client_side_latency_is_the_fallback_and_costs_a_round_trip_per_request() -> None:
    with hosted_store() as endpoint:
        result = measure_cell(Cell("store", 2, 5), 1, "client", endpoint, "zc-bench-client")
    assert result.error is None and result.via == "client"
    (sample,) = result.samples
    # Each request sleeps 2 x 5 ms first; one rank alone makes at least half of them.
    assert sample.wall_s >= sample.counts.ops / 2 * 0.010
    assert METER.delay_s == 0.0


def test_a_pipeline_state_under_4_mib_is_reported_as_not_chunked() -> None:
    from zephon_chaos.bench.aggregation import BenchError

    with hosted_store() as endpoint, pytest.raises(BenchError, match="did not take the chunked"):
        measure_pipeline(0, "client", endpoint, rows=64)
    assert METER.delay_s == 0.0


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--worlds", "3"], "divide the 16 lanes"),
        (["--latencies", "500"], "latencies must be 0..200"),
        (["--reps", "0"], "reps must be 1..50"),
        (["--modes", "s3"], "modes must be store and/or dir"),
    ],
)
def test_bad_grids_are_refused_with_exit_2(tmp_path: Path, capsys, flags: list[str], problem):
    assert main(["bench", "aggregation", "--out", str(tmp_path), *flags]) == 2
    assert problem in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_an_out_path_that_is_a_file_is_refused_before_measuring(tmp_path: Path, capsys) -> None:
    target = tmp_path / "results"
    target.write_text("not a directory")
    assert main(["bench", "aggregation", "--quick", "--out", str(target)]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_the_quick_grid_stays_small() -> None:
    quick = GridConfig.quick()
    quick.validate()
    assert len(quick.cells()) * (quick.reps + 1) <= 40 and quick.max_seconds < 300
