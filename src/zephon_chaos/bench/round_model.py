"""A checkpoint round's time, from its operations, the store's capacity and the round trip.

Pure functions of explicit parameters (no I/O, no clock). The round is Zephon 0.2's
``RoundCoordinator`` (``zephon/_internal/coordination.py``: ``_lead``, ``_follow``,
``_wait_for_acks``) over ``KVCoordinator`` (``torch://``) or ``FileCoordinator``
(``aggregate_dir``). The model follows the leader's critical path phase by phase:

1. **join**: followers read the announcement and publish a shard (+ one-way ``set``/
   ``append``); a follower whose first check lost the race with the announcement sleeps a
   poll period first (:func:`late_joiners`); the server serves the burst of requests in turn;
2. **discover**: the leader polls the participants key every ``poll_s`` (10 ms,
   ``TorchKVStore.poll_interval_s``; no backoff) from its own shard on, and finds the last
   shard at the first of those polls after it lands (:func:`seen_after`: ranks arrive in
   lockstep, so a poll's phase is set, not random), then reads the shards (check +
   multi_get) and decodes them;
3. **merge**: two deletes (close), merge and encode, ``compare_set`` of the outcome;
4. **acks**: followers, woken by their native ``wait``, read the outcome twice (``get`` in
   ``_wait_for_outcome``, again in ``_read_result``), decode it, delete their shard and
   ``set`` an ack; the leader polls: one batched ``check`` of all pending acks, and when it
   fails one ``check`` *per pending ack* (``KVCoordinator._acknowledged``), then 10 ms;
5. **cleanup**: one ``delete`` per acknowledged follower, one for the previous result.

Requests per KVStore call (torch 2.13's TCPStore client): ``set``/``append`` are sent without
waiting for a reply (0 round trips on the caller's path, one one-way latency until visible);
``check``, ``wait``, ``delete``, ``compare_set`` take one round trip; ``get`` and
``multi_get`` two (the client waits for the key before reading it); Zephon's ``get`` checks
first, so it is three. The server is single-threaded (libuv): a burst of N requests takes
N x ``service_s`` to serve, and bytes take ``bytes / bytes_per_s``; the model adds the burst's
service time to the path (its last request is served last), which is exact when a burst
arrives at once (the followers are woken together) and an upper bound otherwise.

CPU: a rank snapshots its lanes and encodes its shard; the leader decodes every shard,
merges, encodes and decodes the result; each follower decodes the result. Each cost is a
fixed part plus a part per lane; the merged result also carries a record per rank, so its
bytes, its encoding and its decoding grow with the world too, and merging costs a part per
shard. Where ranks are processes with their own cores the followers' CPU runs side by side
(``Cpu.parallel``); where they are threads of one Python process (the bench) it runs one
after another, with each request's client CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

ONE_WRITE_LIMIT = 4 * 1024 * 1024
"""``TorchKVStore.max_value_bytes``: a larger value is chunked."""
MANIFEST_HEADER = 20
STORE_POLL_S = 0.01
DIR_POLL_S = 0.05
"""``FileCoordinator``'s poll on a local or shared path (``poll_base_s``, no backoff)."""
POLL_JITTER = 0.25
"""How well a poller's phase is known: the event it waits for lands within this share of a
poll period either way. Measured rounds of one cell differ by whole periods (an
``aggregate_dir`` cell at 8 ranks: 144-247 ms over five rounds), so the phase is known
coarsely; the model takes the expectation over a quarter period either way."""
AGGREGATE_TIMEOUT_S = 180.0
"""``RuntimeOptions.aggregate_timeout_s``'s default: one round's wait budget."""

ROUND_TRIPS = {"check": 1, "wait": 1, "delete": 1, "compare_set": 1, "get": 3,
               "multi_get": 2, "set": 0, "append": 0}
"""Caller round trips per KVStore call (Zephon's ``get`` = check + TCPStore's wait + get)."""
REQUESTS = {"check": 1, "wait": 1, "delete": 1, "compare_set": 1, "get": 3,
            "multi_get": 2, "set": 1, "append": 1}
"""Server requests per KVStore call."""


@dataclass(frozen=True)
class Cpu:
    """CPU seconds of a rank's checkpoint work (``AggregationCodec``, msgpack + zstd).

    Each cost is a fixed part plus a part per lane: encoding one lane costs several times a
    lane of a 16-lane state (a zstd context, the state's skeleton), so a per-lane figure
    alone under-counts the small shards of many ranks."""

    snapshot_lane_s: float
    encode_lane_s: float
    decode_lane_s: float
    merge_lane_s: float
    parallel: bool = True
    """Followers' CPU side by side (ranks are processes) or one after another (threads)."""
    snapshot_fixed_s: float = 0.0
    """A snapshot's cost whatever its lanes."""
    encode_fixed_s: float = 0.0
    """One encoded value's cost whatever its lanes."""
    decode_fixed_s: float = 0.0
    merge_shard_s: float = 0.0
    encode_rank_s: float = 0.0
    decode_rank_s: float = 0.0
    """Per rank of the world: merging loads and checks each shard (``_merge_state_dicts``),
    and the merged result carries a record per rank to encode and decode."""
    request_s: float = 0.0
    """Client CPU per store request. Where ranks are threads of one interpreter it holds the
    lock they share, so the followers' requests queue behind one another with their CPU."""

    def snapshot(self, lanes: float) -> float:
        return self.snapshot_fixed_s + self.snapshot_lane_s * lanes

    def encode(self, lanes: float) -> float:
        return self.encode_fixed_s + self.encode_lane_s * lanes

    def decode(self, lanes: float) -> float:
        return self.decode_fixed_s + self.decode_lane_s * lanes


@dataclass(frozen=True)
class Round:
    """What one checkpoint aggregates."""

    world: int
    lanes: int
    lane_bytes: float
    """Encoded bytes per lane in a shard or the result (msgpack + zstd)."""
    cpu: Cpu
    fixed_bytes: float = 0.0
    """Encoded bytes of a state whatever its lanes (its skeleton)."""
    rank_bytes: float = 0.0
    """Encoded bytes the merged result carries per rank of the world, beyond its lanes."""

    def own_lanes(self) -> float:
        return self.lanes / self.world

    def shard_bytes(self) -> float:
        return self.fixed_bytes + self.lane_bytes * self.own_lanes()

    def result_bytes(self) -> float:
        return self.fixed_bytes + self.lane_bytes * self.lanes + self.rank_bytes * self.world

    def chunked(self) -> bool:
        return self.result_bytes() + MANIFEST_HEADER > ONE_WRITE_LIMIT

    def serial_followers(self) -> int:
        """How many followers' CPU jobs run one after another."""
        return 1 if self.cpu.parallel else max(1, self.world - 1)


@dataclass(frozen=True)
class StoreParams:
    """The path to the TCPStore and the server's capacity."""

    one_way_s: float
    base_rtt_s: float
    """One request and its reply with no network latency and no queue (client included)."""
    service_s: float
    """Server time per request (one over its request rate at saturation)."""
    bytes_per_s: float
    """Server's byte rate for large values."""
    poll_s: float = STORE_POLL_S
    rtt_s_measured: float | None = None
    """A measured round trip of this path, used instead of ``base_rtt_s + 2 x one_way_s``."""

    @property
    def rtt_s(self) -> float:
        if self.rtt_s_measured is not None:
            return self.rtt_s_measured
        return self.base_rtt_s + 2 * self.one_way_s


@dataclass(frozen=True)
class DirParams:
    """A shared filesystem seen by every rank: per-operation latency and metadata capacity."""

    op_s: float
    """One metadata operation or small read/write, end to end."""
    ops_per_s: float = math.inf
    """The filesystem's metadata capacity; the waiting ranks' polls load it."""
    poll_s: float = DIR_POLL_S
    put_ops: int = 3
    """``atomic_write_bytes``: write a temporary file, flush it, rename it."""
    read_ops: int = 2
    """Open, then read a small file whole."""


@dataclass
class Estimate:
    """A predicted round: its total, the phases of the critical path, and the work done."""

    total_s: float
    phases: dict[str, float] = field(default_factory=dict)
    leader_round_trips: float = 0.0
    """Sequential round trips on the leader's critical path."""
    requests: float = 0.0
    """Store requests (or filesystem operations) of the whole round, all ranks."""
    bytes_moved: float = 0.0
    calls: float = 0.0
    """KVStore calls (or ``RouterStorageBackend`` calls), as the bench's counters count them:
    a Zephon ``get`` is one call of three requests."""


def _cpu_phases(r: Round) -> dict[str, float]:
    c, lanes, own = r.cpu, r.lanes, r.own_lanes()
    return {
        "shard": c.snapshot(own) + c.encode(own),
        # the leader decodes its own encoded shard and every follower's
        "collect": c.decode(own) * r.world,
        "merge": (c.merge_lane_s * lanes + c.merge_shard_s * r.world + c.encode(lanes)
                  + c.encode_rank_s * r.world),
        "result": c.decode(lanes) + c.decode_rank_s * r.world,
    }


def ack_polls(
    pending: int, first_poll_at: float, acks_from: float, acks_until: float,
    rtt: float, poll_s: float,
) -> tuple[float, float, int]:
    """The leader's acknowledgement polls (``_wait_for_acks``), as expected values.

    Acks land uniformly between ``acks_from`` and ``acks_until`` (times at the server,
    relative to the poll start's clock); a request reaches the server half a round trip after
    it is sent. Each poll sends one batched ``check``; if it fails, one ``check`` per pending
    ack (those that land before their check stay pending), then sleeps ``poll_s``. Returns
    (time the polls end, round trips, polls).
    """
    if pending <= 0:
        return first_poll_at, 0.0, 0

    def acked(t: float) -> float:
        if acks_until <= acks_from:
            return 1.0 if t >= acks_from else 0.0
        return min(1.0, max(0.0, (t - acks_from) / (acks_until - acks_from)))

    x, trips, polls, left = first_poll_at, 0.0, 0, float(pending)
    while True:
        polls += 1
        trips += 1
        if acked(x + rtt / 2) >= 1.0:
            return x + rtt, trips, polls
        x += rtt
        n = math.ceil(left - 1e-9)
        still = 0.0
        for j in range(n):  # sequential checks; the fraction still missing at each one
            still += (1.0 - acked(x + j * rtt + rtt / 2)) * (left / n)
        x += n * rtt
        trips += n
        left = still
        if left < 0.5 or polls > 100_000:
            # The last ack is seen no earlier than it lands (the expectation could say so).
            return max(x, acks_until + rtt / 2), trips, polls
        x += poll_s


def store_round(r: Round, p: StoreParams) -> Estimate:
    """A ``torch://`` round: the leader's critical path (see the module's phases)."""
    w = r.world
    if w <= 1:  # one rank: no round, only the local snapshot
        t = r.cpu.snapshot(r.lanes)
        return Estimate(t, {"snapshot": t})
    rtt, one_way, s, bw = p.rtt_s, p.one_way_s, p.service_s, p.bytes_per_s
    cpu = _cpu_phases(r)
    k = r.serial_followers()
    f = w - 1
    chunks = math.ceil(r.result_bytes() / ONE_WRITE_LIMIT) if r.chunked() else 0
    result_reads = 1 if chunks else 2  # a manifest alone in _wait_for_outcome when chunked
    # 1. join, in lockstep: a follower's first check of the announcement races the leader's
    # write of it (both come after the same snapshot). Won, it gets it (3) and checks for a
    # result; lost, it checks again, finds it and sleeps a poll period first
    # (``_wait_for_announcement``). It encodes and publishes with one-way set + append.
    late = late_joiners(f)
    join_per_follower = REQUESTS["check"] * 2 + REQUESTS["get"] + 2 + late
    join_requests = f * join_per_follower
    serial_requests = 0.0 if r.cpu.parallel else r.cpu.request_s
    join_cpu = cpu["shard"] + join_per_follower * serial_requests
    lead_polls = cpu["shard"] + r.cpu.decode(r.own_lanes())  # the leader's own shard
    lost = (6 * rtt + p.poll_s + k * join_cpu + one_way + join_requests * s
            + f * r.shard_bytes() / bw)
    # A follower wins only where the leader ran first; among threads of one interpreter its
    # CPU then queues behind the leader's.
    won = lost - 2 * rtt - p.poll_s + (0.0 if r.cpu.parallel else lead_polls)
    join = won + late * (lost - won)
    # 2. discover: the leader polls from its own shard on (a get of the participants, then
    # poll_s); a poll's first request reaches the server half a round trip after it is sent.
    # The poll that finds the last shard gets the list (3), checks and multi_gets (3). A poll
    # finds a shard or not (a step), so the race's two outcomes are taken apart, not averaged
    # first: a shard expected between two polls is found at the first or at the second.
    period = p.poll_s + 3 * rtt
    found = ((1 - late) * seen_after(lead_polls, won - rtt / 2, period)
             + late * seen_after(lead_polls, lost - rtt / 2, period))
    discover = (found - join + 6 * rtt + cpu["collect"] + f * r.shard_bytes() / bw)
    # 3. close (two deletes), merge + encode, compare_set (chunks one-way before it).
    merge = 2 * rtt + cpu["merge"] + rtt + (r.result_bytes() / bw if chunks else 0.0)
    # 4. acks. Clock: 0 = the leader has the compare_set reply (outcome at the server since
    # one one-way ago). Followers: woken (+one-way), two gets (+ check + multi_get of the
    # chunks), decode, delete, set (+one-way).
    read_trips = 2 * ROUND_TRIPS["get"] + (3 if chunks else 0) + 1
    read_requests = f * (1 + 2 * REQUESTS["get"] + (3 if chunks else 0) + 2)
    drain = read_requests * s + f * result_reads * r.result_bytes() / bw
    read_cpu = cpu["result"] + (read_trips + 1) * serial_requests
    acks_from = read_trips * rtt + cpu["result"] + one_way
    acks_until = acks_from + (k - 1) * read_cpu + drain
    start = cpu["result"] + rtt  # the leader decodes the result, deletes its own shard
    ended, ack_trips, _ = ack_polls(f, start, acks_from, acks_until, rtt, p.poll_s)
    # 5. cleanup: one delete per acknowledgement, then the previous round's result.
    cleanup = (f + 1) * rtt
    phases = {"join": join, "discover": discover, "merge": merge, "acks": ended,
              "cleanup": cleanup}
    leader_trips = 4 + 3 + 3 + 3 + 1 + ack_trips + f + 1
    coverage_polls = max(1.0, (found - lead_polls) / period + 1)
    leader_requests = (3 + coverage_polls * (1 + REQUESTS["get"]) + 3 + 2 + 1 + chunks
                       + 1 + ack_trips + f + 1)
    # Followers: check, check, get, check (announcement); set, append; wait, get, get
    # (outcome; + check, multi_get chunked); delete; set.
    follower_calls = 14 + (2 if chunks else 0)
    ack_polls_calls = ack_trips  # one check per round trip of the ack polls
    leader_calls = (3 + coverage_polls * 2 + 2 + 2 + 1 + chunks + 1 + ack_polls_calls + f + 1)
    return Estimate(
        total_s=sum(phases.values()),
        phases=phases,
        leader_round_trips=leader_trips,
        requests=join_requests + read_requests + leader_requests,
        bytes_moved=2 * f * r.shard_bytes() + f * result_reads * r.result_bytes(),
        calls=f * follower_calls + leader_calls,
    )


def late_joiners(followers: int) -> float:
    """Expected share of a round's join spent a poll late: the last of ``followers``.

    In lockstep a follower's first look at the announcement races the leader's write of it,
    a race between equals (the same snapshot comes before both): each loses it half the time,
    and the round waits for the last follower, which is late unless every one of them won.
    """
    return 1.0 - 0.5 ** max(0, followers)


def seen_after(start: float, event: float, period: float, pollers: int = 1,
               jitter: float = POLL_JITTER) -> float:
    """When a poller that looks at ``start``, ``start + period``, ... first finds an event.

    Ranks enter a checkpoint in lockstep, so a poll's phase is set by when its poller began,
    not random: the answer is a whole number of periods after ``start``. The event's time is
    known to within ``jitter`` of a period either way (uniform); with ``pollers`` identical
    pollers the expected *last* of them to find it is returned.
    """
    jitter_s = jitter * period
    if event <= start - jitter_s or period <= 0:
        return max(start, event)

    def found_by(x: float) -> float:  # P(event + u <= x), u uniform in [-jitter, jitter]
        if jitter_s <= 0:
            return 1.0 if x >= event else 0.0
        return min(1.0, max(0.0, (x - event + jitter_s) / (2 * jitter_s)))

    expected, below, m = 0.0, 0.0, 0
    while below < 1.0:
        at = start + m * period
        cdf = found_by(at) ** pollers
        expected += at * (cdf - below)
        below, m = cdf, m + 1
    return expected


def dir_round(r: Round, d: DirParams) -> Estimate:
    """An ``aggregate_dir`` round on a shared filesystem (``FileCoordinator``), in lockstep.

    Every party waits by polling (``_wait_value``/``_wait_until``: look, then sleep
    ``poll_s``), so the round is a chain of poll phases (:func:`seen_after`): the followers'
    first look comes before the announcement's rename, so they find it a period later; the
    leader finds the last shard, the followers the result and the leader the last
    acknowledgement, each at the first of their own polls after it.
    Every file operation costs ``op_s`` plus the queueing delay of a metadata server whose
    load is the waiting followers' polls (M/D/1: ``rho / (2 mu (1 - rho))``); a load at or past
    its capacity makes the round infeasible (infinite).
    """
    w = r.world
    if w <= 1:
        t = r.cpu.snapshot(r.lanes)
        return Estimate(t, {"snapshot": t})
    f = w - 1
    # Followers waiting for the result poll exists(result) and a read of the failure notice.
    load = f * 2 / (d.poll_s + 2 * d.op_s)
    rho = load / d.ops_per_s
    if rho >= 1.0:
        return Estimate(math.inf, {"filesystem saturated": math.inf}, requests=math.inf)
    op = d.op_s + (rho / (2 * d.ops_per_s * (1 - rho)) if math.isfinite(d.ops_per_s) else 0.0)
    c, own = r.cpu, r.own_lanes()
    cpu = _cpu_phases(r)
    put, read = d.put_ops * op, d.read_ops * op
    snap, encode = c.snapshot(own), c.encode(own)
    # The leader: snapshot, announce, encode, publish its shard, decode it; then it polls.
    lead_polls = snap + put + encode + put + c.decode(own)
    # Followers look for the announcement (read, stat) after the same snapshot; the look's
    # open comes before the write's rename (its third operation), so they find it a period
    # later. They check for a result, encode and publish. Threads of one interpreter queue
    # for its CPU.
    look = read + op
    ready = snap + look + d.poll_s + look + op  # every follower alike; they queue for CPU
    free, shards = 0.0, []
    for _ in range(r.serial_followers()):
        begin = max(ready, free) if not c.parallel else ready
        free = begin + encode + put
        shards.append(free)
    # The leader's polls: a listing, then each new shard read; all read, it decodes them.
    found = seen_after(lead_polls, shards[-1], d.poll_s + op)
    coverage = found + op + f * read + cpu["collect"]
    published = coverage + op + cpu["merge"] + op + put  # close, merge, exists, write
    # Followers poll the result (exists, failure read), read it, decode, delete, ack.
    followers_seen = f if c.parallel else 1
    free, acks = 0.0, []
    for shard in shards:
        seen = seen_after(shard, published, d.poll_s + op + read, followers_seen)
        begin = max(seen, free) if not c.parallel else seen
        free = begin + read + cpu["result"] + op + put
        acks.append(free)
    ack_polls_from = published + cpu["result"] + op  # the leader decodes, deletes its shard
    acked = seen_after(ack_polls_from, max(acks), d.poll_s + op) + op
    cleanup = (f + 1) * op
    phases = {"join": shards[-1], "discover": coverage - shards[-1],
              "merge": published - coverage, "acks": acked - published, "cleanup": cleanup}
    total = acked + cleanup
    ops = (f * (d.put_ops * 2 + d.read_ops * 2 + 4) + d.put_ops * 3 + f * d.read_ops + 2 * f + 8
           + load * total)
    # Calls: followers look for the announcement twice, then read, stat, exists, put; poll
    # the outcome (exists + failure read) until it appears; read, delete, put. The leader:
    # put, put, a glob per poll and a read per shard, delete, exists, put, delete, a glob per
    # ack poll, a delete per ack and the previous result.
    outcome_polls = (acks[-1] - shards[-1]) / (d.poll_s + op + read)
    leader_polls = (found - lead_polls + acked - ack_polls_from) / (d.poll_s + op)
    calls = f * (2 * 2 + 3 + 1.5 * (1 + outcome_polls) + 3) + 2 + leader_polls + 2 + f + 3 + f + 1
    return Estimate(total, phases, requests=ops, calls=calls,
                    bytes_moved=2 * f * r.shard_bytes() + f * r.result_bytes())


def with_world(r: Round, world: int, lanes: int | None = None) -> Round:
    """The same state per lane at another scale (one lane per rank unless told)."""
    return replace(r, world=world, lanes=lanes if lanes is not None else max(world, r.lanes))


@dataclass(frozen=True)
class Verdict:
    suitable: bool
    reason: str


def judge(total_s: float, interval_s: float, fraction: float,
          timeout_s: float = AGGREGATE_TIMEOUT_S) -> Verdict:
    """Suitable when a round fits the wait budget and a fraction of the checkpoint interval."""
    if not math.isfinite(total_s):
        return Verdict(False, "saturated")
    if total_s > timeout_s:
        return Verdict(False, f"over aggregate_timeout_s ({timeout_s:.0f} s)")
    if total_s > fraction * interval_s:
        return Verdict(False, f"over {fraction:.0%} of a {interval_s:.0f} s interval")
    return Verdict(True, "ok")
