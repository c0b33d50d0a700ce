"""The round model's pure functions: monotonic, reducing to round trips x RTT, verdicts."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest

from zephon_chaos.bench.round_model import (
    ONE_WRITE_LIMIT,
    Cpu,
    DirParams,
    Round,
    StoreParams,
    ack_polls,
    dir_round,
    judge,
    late_joiners,
    seen_after,
    store_round,
    with_world,
)

CPU = Cpu(snapshot_lane_s=50e-6, encode_lane_s=100e-6, decode_lane_s=30e-6, merge_lane_s=100e-6,
          snapshot_fixed_s=250e-6, encode_fixed_s=450e-6, decode_fixed_s=90e-6)
NO_CPU = Cpu(0.0, 0.0, 0.0, 0.0)
WORLDS = [2, 4, 16, 64, 256, 1024, 4096, 16384]


def store(one_way_ms: float, **kw: float) -> StoreParams:
    base = {"base_rtt_s": 50e-6, "service_s": 20e-6, "bytes_per_s": 1e9}
    base.update(kw)
    return StoreParams(one_way_s=one_way_ms / 1000, **base)


def rnd(world: int, cpu: Cpu = CPU, lane_bytes: float = 200.0) -> Round:
    return Round(world=world, lanes=max(16, world), lane_bytes=lane_bytes, cpu=cpu)


def assert_grows_but_for_a_poll_phase(times: list[float], poll_s: float) -> None:
    """Lockstep polls: a bigger world's last shard or ack may land just before a poll that a
    smaller world's missed, so a round may be shorter by up to a poll period, never more."""
    assert all(later >= earlier - poll_s for earlier, later in itertools.pairwise(times))
    assert times[-1] > times[0] + poll_s


@pytest.mark.parametrize("one_way_ms", [0.0, 0.1, 1.0, 10.0])
def test_a_store_round_grows_with_ranks(one_way_ms: float) -> None:
    p = store(one_way_ms)
    times = [store_round(rnd(w), p).total_s for w in WORLDS]
    assert_grows_but_for_a_poll_phase(times, p.poll_s)


@pytest.mark.parametrize("world", WORLDS)
def test_a_store_round_grows_with_latency(world: int) -> None:
    times = [store_round(rnd(world), store(x)).total_s for x in (0.0, 0.1, 1.0, 10.0)]
    assert times == sorted(times) and times[-1] > times[0]


@pytest.mark.parametrize("op_ms", [0.1, 1.0, 10.0])
def test_a_dir_round_grows_with_ranks_and_saturates_its_filesystem(op_ms: float) -> None:
    fs = DirParams(op_s=op_ms / 1000, ops_per_s=50_000)
    times = [dir_round(rnd(w), fs).total_s for w in WORLDS]
    assert_grows_but_for_a_poll_phase(times, fs.poll_s)
    # 16,384 followers polling two operations every 50 ms: 655k ops/s > 50k
    assert math.isinf(times[-1]) and not judge(times[-1], 600, 0.05).suitable
    slower = [dir_round(rnd(64), DirParams(op_s=x / 1000)).total_s for x in (0.1, 1.0, 10.0)]
    assert slower == sorted(slower)


def test_one_rank_has_no_round_only_its_snapshot() -> None:
    r = rnd(1)
    for est in (store_round(r, store(10.0)), dir_round(r, DirParams(op_s=0.01))):
        assert est.total_s == pytest.approx(CPU.snapshot(r.lanes))
        assert est.requests == 0


def test_without_cpu_or_server_time_a_round_is_round_trips_times_the_rtt() -> None:
    """The measured points' form: time = sequential round trips x RTT, scaling exactly."""
    free = {"service_s": 0.0, "bytes_per_s": math.inf}
    for world in (2, 16, 256):
        r = rnd(world, NO_CPU)
        a = store_round(r, StoreParams(0.0, 0.001, poll_s=0.0, **free))
        b = store_round(r, StoreParams(0.0, 0.002, poll_s=0.0, **free))
        assert b.total_s == pytest.approx(2 * a.total_s)
        assert a.total_s >= a.leader_round_trips * 0.001 * 0.5


def test_each_extra_follower_adds_an_ack_check_and_a_delete_to_the_leaders_path() -> None:
    p = store(1.0)
    trips = [store_round(rnd(w, NO_CPU), p).leader_round_trips for w in (64, 65, 66)]
    assert trips[1] - trips[0] >= 2 and trips[2] - trips[1] >= 2


def test_ack_polls_reduce_to_one_batched_check_when_every_ack_is_in() -> None:
    assert ack_polls(0, 1.0, 0.0, 0.0, 0.01, 0.01) == (1.0, 0.0, 0)
    end, trips, polls = ack_polls(15, 1.0, 0.0, 0.5, 0.01, 0.01)
    assert (trips, polls) == (1, 1) and end == pytest.approx(1.01)


def test_ack_polls_check_each_pending_ack_when_the_batch_check_fails() -> None:
    end, trips, polls = ack_polls(15, 0.0, 10.0, 10.0, 0.01, 0.01)
    assert polls >= 2 and trips >= 1 + 15 and end >= 10.0


def test_a_result_past_one_write_is_chunked_and_read_once() -> None:
    lane = ONE_WRITE_LIMIT / 1000
    small, big = rnd(999, lane_bytes=lane), rnd(2000, lane_bytes=lane)
    assert not small.chunked() and big.chunked()
    p = store(1.0)
    assert store_round(big, p).bytes_moved < 2 * 1999 * big.result_bytes()


def test_with_world_keeps_the_state_per_lane() -> None:
    r = with_world(rnd(2), 4096)
    assert (r.world, r.lanes, r.lane_bytes) == (4096, 4096, 200.0)


def test_verdicts_name_the_limit_that_was_crossed() -> None:
    assert judge(10.0, 600, 0.05).suitable
    assert "interval" in judge(31.0, 600, 0.05).reason
    assert "aggregate_timeout_s" in judge(181.0, 6000, 0.05).reason
    assert judge(math.inf, 600, 0.05).reason == "saturated"


def test_a_cost_has_a_fixed_part_and_a_part_per_lane() -> None:
    """A one-lane shard costs its fixed part: many small shards cost more than one big one."""
    assert CPU.encode(1) == pytest.approx(CPU.encode_fixed_s + CPU.encode_lane_s)
    assert 16 * CPU.encode(1) > CPU.encode(16)
    r = Round(world=16, lanes=16, lane_bytes=160.0, cpu=CPU, fixed_bytes=1300.0)
    assert r.shard_bytes() == pytest.approx(1460.0)
    assert r.result_bytes() == pytest.approx(1300.0 + 16 * 160.0)


def test_threads_queue_their_requests_cpu_and_processes_do_not() -> None:
    """Where ranks share one interpreter, a follower's request CPU queues behind the others'."""
    threads = replace(CPU, parallel=False, request_s=100e-6)
    slower = store_round(rnd(16, threads), store(0.0)).total_s
    assert slower > store_round(rnd(16, replace(threads, request_s=0.0)), store(0.0)).total_s
    processes = replace(threads, parallel=True)
    assert store_round(rnd(16, processes), store(0.0)).total_s == pytest.approx(
        store_round(rnd(16, replace(processes, request_s=0.0)), store(0.0)).total_s)


def test_a_lockstep_poller_finds_an_event_a_whole_number_of_periods_after_it_began() -> None:
    assert seen_after(1.0, 0.5, 0.05, jitter=0.0) == 1.0  # already there: the first look
    assert seen_after(1.0, 1.07, 0.05, jitter=0.0) == pytest.approx(1.10)
    # Just before a poll, to within the jitter: half the time that poll, half the next.
    assert seen_after(1.0, 1.05, 0.05, jitter=0.02) == pytest.approx(1.075)
    # The last of many identical pollers, each with its own jitter, is almost surely late.
    assert seen_after(1.0, 1.05, 0.05, pollers=64, jitter=0.02) > 1.099


def test_lockstep_followers_race_the_announcement_and_the_last_one_is_likely_late() -> None:
    """A follower whose first look loses the race sleeps a poll period; the round waits for
    the last follower, so a bigger world is late more surely."""
    assert late_joiners(1) == 0.5 and late_joiners(15) > 0.999
    p = store(1.0, service_s=0.0, bytes_per_s=math.inf)
    one, many = store_round(rnd(2, NO_CPU), p), store_round(rnd(16, NO_CPU), p)
    assert one.phases["join"] == pytest.approx(5 * p.rtt_s + p.poll_s / 2 + p.one_way_s)
    assert many.phases["join"] >= 6 * p.rtt_s + 0.999 * p.poll_s
    d = DirParams(op_s=0.0)  # a file's look comes before the write's rename: a period late
    assert dir_round(rnd(2, NO_CPU), d).phases["join"] >= d.poll_s


def test_the_result_grows_with_the_world_and_so_do_its_encoding_and_decoding() -> None:
    """The merged result has a record per rank: bytes and CPU per rank, beyond its lanes."""
    per_rank = replace(CPU, encode_rank_s=400e-6, decode_rank_s=50e-6, merge_shard_s=30e-6)
    small = Round(world=2, lanes=16, lane_bytes=160.0, cpu=per_rank, rank_bytes=100.0)
    big = replace(small, world=16)
    assert big.result_bytes() - small.result_bytes() == pytest.approx(14 * 100.0)
    p = store(0.0)
    gap = store_round(big, p).phases["merge"] - store_round(replace(big, cpu=CPU), p).phases[
        "merge"]
    assert gap == pytest.approx(16 * (400e-6 + 30e-6))
