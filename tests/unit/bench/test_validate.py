"""The model's calibration: states as the rounds see them, and a result that grows per rank."""

from __future__ import annotations

import math

from zephon._internal.checkpoint import AggregationCodec

from zephon_chaos.bench import validate
from zephon_chaos.bench.aggregation import hosted_store, settle


def _state_bytes(pipe: object) -> int:
    return len(AggregationCodec().encode(pipe._engine._state_dict_local()))  # type: ignore[attr-defined]


def test_calibration_pipelines_hold_their_iterators_and_settle_their_prefetch() -> None:
    """A dropped iterator closes its engine, and a filling prefetch changes the state: the
    pipelines a calibration measures must be as a bench rank's, live and settled."""
    with validate._pipelines(2, 4) as (pipes, iterators):
        assert len(pipes) == len(iterators) == 2
        sizes = [_state_bytes(p) for p in pipes]
        for pipe in pipes:
            settle(pipe)
        assert [_state_bytes(p) for p in pipes] == sizes
        next(iterators[0])  # still live: it yields


def test_the_merged_result_carries_a_record_per_rank() -> None:
    """With the lanes fixed, more ranks make a bigger result (their in-flight samples)."""
    two = validate._merged_costs(2, 8, reps=1)
    eight = validate._merged_costs(8, 8, reps=1)
    assert eight.encoded_bytes > two.encoded_bytes
    assert min(two.encode_s, two.decode_s, eight.encode_s, eight.decode_s) > 0


def test_a_calibration_prices_the_result_per_rank_and_its_lanes_apart() -> None:
    with hosted_store() as endpoint:
        cal = validate.calibrate(endpoint, [], "proxy", lanes=4, reps=1)
    assert cal.rank_bytes > 0 and cal.rtt_s == {}
    costs = (cal.cpu.snapshot_fixed_s, cal.cpu.encode_lane_s, cal.cpu.merge_shard_s,
             cal.cpu.encode_rank_s, cal.cpu.decode_rank_s, cal.cpu.request_s)
    assert all(math.isfinite(c) and c >= 0 for c in costs)


def test_a_timing_runs_its_preparation_untimed_and_without_collections() -> None:
    import gc

    seen: list[bool] = []
    validate._best(lambda: seen.append(gc.isenabled()), 3, before=lambda: seen.append(True))
    assert seen == [True, False] * 3 and gc.isenabled()


def test_cells_counted_in_whole_poll_periods_get_more_rounds() -> None:
    from zephon_chaos.bench.aggregation import Cell

    assert validate.rounds_for(Cell("store", 16, 5), 3) == 3
    assert validate.rounds_for(Cell("store", 16, 0), 3) == 3 * validate.POLL_BOUND_ROUNDS
    assert validate.rounds_for(Cell("dir", 4, 0), 3) == 3 * validate.POLL_BOUND_ROUNDS
    assert validate.rounds_for(Cell("store", 1, 5), 3) == 3 * validate.ONE_RANK_ROUNDS
