"""Faults on the checkpoint-store link of one rank, on real torchrun groups.

Each rank's ``torch://`` client reaches torchrun's store through its own proxy (gloo is not
proxied), so one rank's link is slowed, cut or reset while the others and the process
group are untouched. A fault fires at a logical point: from the start, or when the rank
writes a key of a checkpoint-round phase (the interposer). Every test proves its fault acted
where it acts (the proxy's link counters, the interposer's event) and judges the faulted
checkpoint with the fault oracle: completed, failed with the cause within the measured
bound, or split (then resolved by a lockstep retry). Never a hang.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from zephon_chaos.nemeses.store_proxies import DOWN, StoreProxies
from zephon_chaos.oracles import faults as oracle
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PhaseTrigger, PipelineSpec

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 2.0
"""aggregate_timeout_s of every faulted launch: small, so failure paths are quick."""
LEADER, LAST = "leader", "last"


@dataclass(frozen=True)
class LinkFault:
    """A fault on one rank's store link, the verdict it must get, and what errors must say.

    ``at``: ``start``, or ``phase#n`` (the rank's n-th write of that phase: #2 = the second
    checkpoint round, so checkpoint 0 is persisted before the fault). ``action``: a toxic
    type, ``down`` (proxy disabled) or ``drop`` (the interposer loses the write: a lost ack).
    ``causes``: what the faulted rank's error must contain, and what every other failing
    rank's error must contain (one of the alternatives).
    """

    at: str
    action: str
    outcome: str
    causes: tuple[str, tuple[str, ...]]
    who: str = LAST
    attributes: dict[str, int] = field(default_factory=dict)
    stream: str = "downstream"
    retry: str = "lockstep"
    attempts: int = 1

    def rank(self, world: int) -> int:
        return 0 if self.who == LEADER else world - 1

    @property
    def index(self) -> int:
        """The checkpoint the fault hits."""
        return 0 if self.at == "start" else int(self.at.partition("#")[2] or 1) - 1

    def trigger(self, world: int) -> tuple[PhaseTrigger, ...]:
        if self.at == "start":
            return ()
        phase, _, n = self.at.partition("#")
        action = {DOWN: "cut", "drop": "drop"}.get(self.action, "toxic")
        return (
            PhaseTrigger(
                self.rank(world),
                phase,
                action,
                occurrence=int(n or 1),
                toxic=self.action if action == "toxic" else "",
                attributes=self.attributes,
                stream=self.stream,
            ),
        )

    def at_start(self, world: int) -> Callable[[StoreProxies], object] | None:
        if self.at != "start":
            return None
        return lambda proxies: proxies.add_toxic(
            self.rank(world), self.action, stream=self.stream, attributes=self.attributes
        )


MISSING = (
    "Missing ranks=[{rank}]",
    # A follower whose budget runs out with the leader's never sees the leader's notice
    # (Zephon notifies followers on a best-effort basis): it names the outcome it lacked.
    "waiting for merged checkpoint",
)
LINK_FAULTS: dict[str, LinkFault] = {
    "down from the start": LinkFault(
        "start", DOWN, oracle.FAILED, ("Can't reach the checkpoint TCPStore", ())
    ),
    "cut before the shard": LinkFault("shard#2", DOWN, oracle.FAILED, ("TCPStore", MISSING)),
    "reset before the leader's outcome": LinkFault(
        "outcome#2",
        "reset_peer",
        oracle.FAILED,
        ("TCPStore compare_set", ("waiting for merged checkpoint",)),
        who=LEADER,
        attributes={"timeout": 0},
        stream="upstream",
    ),
    "slow link from the shard": LinkFault(
        "shard#2", "latency", oracle.COMPLETED, ("", ()), attributes={"latency": 50}
    ),
    "lost ack": LinkFault("ack#2", "drop", oracle.SPLIT, ("", ("acknowledgements",)), retry="none"),
    "lost ack, lockstep retry": LinkFault(
        "ack#2", "drop", oracle.SPLIT_RESOLVED, ("", ()), attempts=2
    ),
}
DEFAULT_RUN = {("cut before the shard", 2), ("lost ack, lockstep retry", 2)}


def link_cases() -> list[Any]:
    return [
        pytest.param(
            name,
            world,
            id=f"{name}-{world}ranks",
            marks=() if (name, world) in DEFAULT_RUN else (pytest.mark.slow,),
        )
        for name in LINK_FAULTS
        for world in (2, 3)
    ]


def causes_of(fault: LinkFault, world: int) -> dict[int, tuple[str, ...]]:
    """Per rank, what its error must carry (every failing rank names its cause)."""
    faulted = fault.rank(world)
    own, others = fault.causes
    out = {faulted: (own,)} if own else {}
    for r in range(world):
        if r != faulted and others:
            out[r] = tuple(text.format(rank=faulted) for text in others)
    return out


def assert_fault_acted(run: Any, fault: LinkFault, world: int) -> None:
    """Evidence from where the fault acted: the proxy's counters, the interposer's event."""
    rank = fault.rank(world)
    stats = run.stats(rank)
    if fault.at != "start":
        phase, _, n = fault.at.partition("#")
        fired = [(e["phase"], e["n"]) for e in run.fired(rank)]
        assert fired == [(phase, int(n))], f"rank {rank}'s interposer fired {fired}"
    if fault.action == DOWN:
        assert not stats.enabled, stats
    elif fault.action != "drop":
        assert sum(t.applied for t in stats.toxics.values()) >= 1, stats
        assert sum(t.chunks + t.closes for t in stats.toxics.values()) >= 1, stats
    for other in range(world):
        if other != rank:
            clean = run.stats(other)
            assert clean.enabled and not clean.toxics, f"rank {other}'s link was touched: {clean}"
            assert clean.upstream.bytes_received > 0, f"rank {other} sent nothing: {clean}"


@pytest.mark.parametrize(("name", "world"), link_cases())
def test_a_fault_on_one_ranks_store_link_gets_its_verdict(chaos, name: str, world: int) -> None:
    fault = LINK_FAULTS[name]
    spec = chaos.spec(
        f"link-{world}",
        nproc=world,
        timeout_s=TIMEOUT_S,
        triggers=fault.trigger(world),
        retry=fault.retry,
        retry_attempts=fault.attempts,
    )
    run = chaos.launch(spec, nproc=world, before_start=fault.at_start(world))
    result = run.wait()
    assert not run.survivors()
    assert_fault_acted(run, fault, world)
    unfaulted = None
    if fault.outcome in (oracle.COMPLETED, oracle.SPLIT_RESOLVED):
        unfaulted = chaos.unfaulted(spec, world)
    verdict = run.judge(fault.index, causes=causes_of(fault, world), unfaulted=unfaulted)
    assert verdict.outcome == fault.outcome, f"{verdict.describe()}\n{result.summary()}"
    if fault.index > 0:
        assert run.previous_intact(fault.index - 1) == []
    if verdict.outcome == oracle.FAILED:
        bound = oracle.failure_bound_s(TIMEOUT_S)
        assert max(verdict.durations.values()) <= bound, verdict.durations


def test_each_rank_reaches_the_store_through_its_own_proxy(chaos) -> None:
    """Plain torch:// (no interposer): rank 1's link is slowed, rank 0's and gloo untouched."""
    spec = chaos.spec("placement", timeout_s=TIMEOUT_S)
    run = chaos.launch(
        spec,
        control=False,
        before_start=lambda p: p.add_toxic(1, "latency", attributes={"latency": 30}),
    )
    result = run.wait()
    assert result.ok, result.report()
    assert not run.survivors()
    records = run.records()
    placed = {rec.rank: next(e for e in rec.events if e["kind"] == "placement") for rec in records}
    assert {r: p["listen_port"] for r, p in placed.items()} == run.proxies.ports
    assert len({p["upstream"] for p in placed.values()}) == 1, "ranks dialed different stores"
    for rec in records:
        sums = [e["sum"] for e in rec.events if e["kind"] == "collective"]
        assert sums == [2, 2], f"gloo all-reduces on rank {rec.rank}: {sums}"
    slowed, clean = run.stats(1), run.stats(0)
    assert slowed.toxics["latency_downstream"].chunks >= 1, slowed
    assert not clean.toxics and clean.downstream.bytes_sent > 0, clean
    unfaulted = chaos.unfaulted(spec)
    for index in (0, 1):
        verdict = run.judge(index, unfaulted=unfaulted)
        assert verdict.outcome == oracle.COMPLETED, verdict.describe()


@pytest.mark.parametrize(
    ("fault", "runner", "verdict"),
    [
        pytest.param(ProxyFault(1, DOWN, at="shard#2"), "inline", oracle.FAILED, id="cut-shard"),
        pytest.param(
            ProxyFault(1, "reset_peer", {"timeout": 0}, "upstream", at="ack#2"),
            "process",
            oracle.SPLIT,
            id="reset-ack-process-runner",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_failed_round_resumes_from_the_previous_checkpoint(
    resume_check, fault: ProxyFault, runner: str, verdict: str
) -> None:
    """The scenario model's proxy fault ends the round: a follower's link cut before its shard
    fails it on every rank; its ack reset on the way splits it (the follower returned it, the
    leader failed waiting). The relaunch resumes checkpoint 0 with batch identity. Under
    ``runner: process`` (the downstream's) the rank process runs the round, as inline does."""
    scenario = Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2,
            runner=runner,  # type: ignore[arg-type]
            aggregate_timeout_s=TIMEOUT_S,
        ),
        launches=(
            Launch(2, 3, (CheckpointAt(1), CheckpointAt(2)), proxy_faults=(fault,)),
            Launch(2, 2),
        ),
        name=f"{fault.toxic}-{fault.at}-then-resume",
    )
    outcome = resume_check(scenario)
    assert outcome.ok, outcome.report()
    faulted = outcome.phases[0]
    assert faulted.fault.verdict.outcome == verdict, faulted.fault.verdict.describe()
    assert faulted.fault.evidence, "no evidence that the proxy fault acted"
    assert faulted.restore_index == 0
    assert outcome.verdict is not None and outcome.verdict.ok
    assert outcome.resumes and outcome.resumes[0].phase == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "outcome"),
    [
        (ProxyFault(2, "reset_peer", {"timeout": 0}, "upstream", at="participants#2"), "failed"),
        (ProxyFault(1, "latency", {"latency": 40}, at="start"), "completed"),
    ],
    ids=["reset-3to2", "latency-3to2"],
)
def test_a_proxy_faulted_phase_resumes_on_another_world_size(
    resume_check, fault: ProxyFault, outcome: str
) -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=6, aggregate_timeout_s=TIMEOUT_S),
        launches=(
            Launch(3, 3, (CheckpointAt(1), CheckpointAt(2)), proxy_faults=(fault,)),
            Launch(2, 2),
        ),
        name=f"{fault.toxic}-3-2",
    )
    result = resume_check(scenario)
    assert result.ok, result.report()
    assert result.phases[0].fault.verdict.outcome == outcome
    assert result.resumes[0].resized


# ---- findings --------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason=(
        "Zephon defect: a stalled store link (an established connection that delivers "
        "nothing; Toxiproxy 'timeout' toxic, timeout=0) blocks TorchKVStore.wait/exists/get "
        "past any multiple of aggregate_timeout_s, although KVStoreFactory documents that "
        "the timeout bounds the store's blocking operations. Measured: still blocked after "
        "8 s with timeout_s=1-2 (check, get, add, wait, compare_set, delete; set and append "
        "return at once); in a group, a lockstep checkpoint hangs to the launch deadline "
        "(stack: TorchKVStore.wait). Root cause: c10d TCPStore's client timeout does not "
        "bound a reply that never comes."
    ),
)
def test_a_stalled_store_link_fails_a_store_call_within_the_bound(toxiproxy) -> None:
    pytest.importorskip("zephon")
    from zephon._internal.kvstore import TorchKVStore

    from zephon_chaos.launch.store_host import StoreHost

    timeout_s = 1.0
    with StoreHost() as host:
        proxy = toxiproxy.create_proxy("stalled-store", host.endpoint)
        kv = TorchKVStore("127.0.0.1", proxy.port, timeout_s=timeout_s)
        kv.set("zephon/ready", b"1")
        toxiproxy.add_toxic(proxy.name, "timeout", stream="upstream", attributes={"timeout": 0})
        finished = threading.Event()

        def call() -> None:
            try:
                kv.wait(["zephon/never"], timeout_s)
            except RuntimeError:
                pass
            finally:
                finished.set()

        threading.Thread(target=call, daemon=True).start()
        returned = finished.wait(oracle.failure_bound_s(timeout_s))
        toxiproxy.delete_proxy(proxy.name)  # aborts the connection: the call returns now
        assert finished.wait(10.0), "the store call outlived its connection"
        stats_note = "blocked until the proxy was deleted"
        assert returned, f"TorchKVStore.wait({timeout_s} s) on a stalled link {stats_note}"


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the same defect in a group: lockstep ranks wait for a rank stuck in a store call",
)
def test_a_stalled_link_in_a_round_is_never_a_hang(chaos) -> None:
    stall = PhaseTrigger(
        1,
        "shard",
        "toxic",
        occurrence=2,
        toxic="timeout",
        attributes={"timeout": 0},
        stream="upstream",
    )
    spec = chaos.spec(
        "stall", timeout_s=TIMEOUT_S, triggers=(stall,), retry="lockstep", retry_attempts=1
    )
    run = chaos.launch(spec, deadline_s=30)
    run.wait()
    assert run.fired(1), "the stall never fired"
    verdict = run.judge(1)
    assert verdict.ok, verdict.describe()


@pytest.mark.slow
def test_a_link_slower_than_the_budget_stretches_the_failure_past_the_bound(chaos) -> None:
    """Finding (documented by Zephon: blocking store calls are not interrupted): with 2.5 s
    added to each reply, a round fails with its cause, but only after every pending store
    call has waited out its latency (measured 14 s at aggregate_timeout_s=2)."""
    slow = PhaseTrigger(
        1, "shard", "toxic", occurrence=2, toxic="latency", attributes={"latency": 2500}
    )
    spec = chaos.spec(
        "slow", timeout_s=TIMEOUT_S, triggers=(slow,), retry="lockstep", retry_attempts=1
    )
    run = chaos.launch(spec)
    result = run.wait()
    assert not result.timed_out and not run.survivors()
    verdict = run.judge(1)
    assert verdict.outcome == oracle.FINDING
    assert all("over the bound" in p.text for p in verdict.problems), verdict.describe()
    assert verdict.durations[1] > oracle.failure_bound_s(TIMEOUT_S)
    assert run.stats(1).toxics["interposer-shard-2"].chunks >= 2


# ---- the rendezvous path ---------------------------------------------------------------


def test_agents_join_through_the_rendezvous_proxy(chaos, store_proxy) -> None:
    """c10d rendezvous through a slowed proxy, and the ranks' store clients through theirs."""
    rdzv = store_proxy.rendezvous({"type": "latency", "attributes": {"latency": 20}})
    spec = chaos.spec("rdzv", timeout_s=TIMEOUT_S)
    run = chaos.launch(spec, path="c10d", rendezvous=rdzv, control=False)
    result = run.wait()
    assert result.ok, result.report()
    assert not run.survivors()
    joined = rdzv.stats()
    assert joined.connections_accepted >= 1 and joined.upstream.bytes_received > 0, joined
    assert joined.toxics["latency_downstream"].chunks >= 1, joined
    for rank in (0, 1):
        assert run.stats(rank).upstream.bytes_received > 0, "a rank bypassed its store proxy"
    verdict = run.judge(1)
    assert verdict.outcome == oracle.COMPLETED, verdict.describe()


@pytest.mark.slow
def test_losing_the_rendezvous_store_mid_run_fails_the_agent_not_the_ranks(
    chaos, store_proxy
) -> None:
    """Finding: once workers run, a cut rendezvous link leaves training and checkpoints alone
    (they use the agent's own store), but the agent fails the run when it leaves."""
    rdzv = store_proxy.rendezvous()
    spec = chaos.spec(
        "rdzv-cut", timeout_s=TIMEOUT_S, triggers=(PhaseTrigger(1, "shard", "event"),)
    )
    run = chaos.launch(spec, path="c10d", rendezvous=rdzv)
    run.expect(60, rank=1, phase="shard")
    store_proxy.client.disable(rdzv.name)
    result = run.wait()
    assert not run.survivors()
    assert not rdzv.stats().enabled
    assert all(rec.ended for rec in run.records()), result.summary()
    for index in (0, 1):
        assert run.judge(index).outcome == oracle.COMPLETED
    assert result.agent_returncodes != [0], result.summary()
    assert "rendezvous" in result.report() or "c10d" in result.report()


@pytest.mark.slow
@pytest.mark.parametrize("timeout_s", [1.0, 3.0])
def test_failing_rounds_stay_within_the_bound_at_any_timeout(
    chaos, record_property: Callable[[str, object], None], timeout_s: float
) -> None:
    """The slowest failure: after a cut, the lockstep retry must reconnect to a store it
    cannot reach (c10d's connect retries); each attempt still ends within 3 T + 3 s."""
    spec = chaos.spec(
        "bound",
        timeout_s=timeout_s,
        triggers=(PhaseTrigger(1, "shard", "cut", occurrence=2),),
        retry="lockstep",
        retry_attempts=2,
    )
    run = chaos.launch(spec)
    run.wait()
    verdict = run.judge(1, causes={0: ("Missing ranks=[1]",), 1: ("TCPStore",)})
    assert verdict.outcome == oracle.FAILED, verdict.describe()
    for rec in run.records():
        took = [
            round(e["ended_at"] - e["started_at"], 2)
            for e in rec.events
            if e.get("kind") == "checkpoint_attempt" and e["index"] == 1
        ]
        assert len(took) == 2, took
        record_property(f"rank{rec.rank}_attempts_s", took)
        assert max(took) <= oracle.failure_bound_s(timeout_s), (rec.rank, took)


def test_a_peer_lost_before_the_lockstep_meeting_is_a_cause_not_a_finding(resume_check) -> None:
    """Rank 0's link to the harness's store is down from the start, so its pipeline fails at
    its first batch; rank 1, waiting for it in the meeting before checkpoint 0, fails on the
    closed gloo connection. It never reached Zephon's round: that is its cause, named."""
    from zephon_chaos.explore.known import judged_ok, unexplained
    from zephon_chaos.rank.meetings import MEETING_LOST
    from zephon_chaos.scenario import Launch, ProxyFault, Scenario
    from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

    scenario = Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2, aggregation="store_explicit", aggregate_timeout_s=2.0
        ),
        launches=(
            Launch(
                2,
                1,
                (CheckpointAt(1),),
                proxy_faults=(ProxyFault(rank=0, toxic="down", at="start"),),
                retry="lockstep",
            ),
        ),
        name="meeting-lost",
    )
    outcome = resume_check(scenario)
    run = outcome.phases[0]
    assert not run.result.ok
    errors = {r.rank: r.error or "" for r in run.result.ranks}
    assert "Can't reach the checkpoint TCPStore" in errors[0], errors
    assert judged_ok(outcome), unexplained(outcome)
    lost = [e for rec in run.records for e in rec.events if MEETING_LOST in str(e.get("error"))]
    assert lost or "SIGTERM" in run.result.summary(), run.result.summary()
