"""Groups over namespaced hosts: the store reached over a real interface, real partitions.

Each host is a network namespace with one address of 198.18.0.0/15 on a shared bridge and
its own torchrun agent; host 0 hosts the rendezvous and the workers' store. These tests show
what loopback cannot: a resume across hosts, and a host cut off from the store host in the
middle of a checkpoint round (gloo and rendezvous traffic cut too, not only the store link).
Skipped without root or ``ip`` (the ``chaos_hosts`` fixture says why).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from zephon_chaos.launch import GroupResult, LaunchSpec
from zephon_chaos.launch.netns import Cut, CutKind, named_namespaces, processes_in
from zephon_chaos.oracles import faults as fault_oracle
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import RankRecord, read_phase
from zephon_chaos.workload.spec import CheckpointAt, PhaseTrigger, PipelineSpec, WorkloadSpec

pytestmark = [pytest.mark.cpu, pytest.mark.slow]

TIMEOUT_S = 2.0
"""``aggregate_timeout_s`` of the faulted round."""


def _nothing_left(chaos_hosts) -> None:  # type: ignore[no-untyped-def]
    """Close the test's networks now and assert that no namespace or process survives."""
    inodes = {i for net in chaos_hosts.networks for i in net.inodes.values() if i}
    for group in chaos_hosts.groups:
        group.kill()
        assert group.registry.survivors() == []
    for net in chaos_hosts.networks:
        assert net.close() == []
        assert not set(net.names) & named_namespaces()
    assert processes_in(inodes) == []


def test_a_group_over_two_hosts_resumes_with_identical_batches(
    multinode_resume_check, chaos_hosts
) -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=4),
        launches=(
            Launch(2, 2, (CheckpointAt(2),), path="c10d", hosts=2),
            Launch(4, 2, path="c10d", hosts=2),
        ),
        name="two-hosts-1-then-2-ranks",
    )
    outcome = multinode_resume_check(scenario)
    assert outcome.ok, outcome.report()
    assert outcome.verdict is not None
    assert outcome.verdict.contract == "identical global batches", outcome.verdict.describe()
    assert outcome.verdict.steps_compared > 0
    # Each phase ran one agent per host: ranks k*nproc.. on host k.
    assert [r.node for r in outcome.phases[0].result.ranks] == [0, 1]
    assert [r.node for r in outcome.phases[1].result.ranks] == [0, 0, 1, 1]
    assert len(chaos_hosts.networks) == 2  # a network of its own per launch, removed after it
    _nothing_left(chaos_hosts)


def _net_peers(pid: int) -> set[str]:
    """Remote IPv4 addresses of the established TCP connections in ``pid``'s namespace."""
    peers = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] != "01":  # ESTABLISHED
            continue
        addr = fields[2].split(":")[0]
        peers.add(".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return peers


@dataclass
class CutRound:
    """A round in which host 1 was cut off from host 0 (the store host), and its evidence."""

    result: GroupResult
    records: list[RankRecord]
    cut: Cut
    released_at: float
    out: Path


def _cut_in_round(chaos_hosts, root: Path, kind: CutKind) -> CutRound:  # type: ignore[no-untyped-def]
    """2 hosts x 1 rank; rank 1 holds before its shard of round 2 (checkpoint 1), host 1 is
    cut off from host 0, then rank 1 is released into the cut link."""
    net = chaos_hosts.network(2)
    if kind is not CutKind.LINK and (why := net.nft_unavailable()) is not None:
        pytest.skip(f"nftables partitions need nft: {why}")
    control = chaos_hosts.control()
    out = root / kind.value
    out.mkdir(mode=0o700)
    spec = WorkloadSpec(
        pipeline=PipelineSpec(
            canonical_replicas=2, aggregate_timeout_s=TIMEOUT_S, run_id="zc-multinode"
        ),
        steps=3,
        checkpoints=(CheckpointAt(1), CheckpointAt(2)),
        out_dir=str(out),
        triggers=(PhaseTrigger(1, "shard", "hold", occurrence=2, hold_timeout_s=60.0),),
        control=control.name,
    )
    spec_file = spec.write(out / "spec.json")
    group = chaos_hosts.spawn(
        LaunchSpec(
            entry="zephon_chaos.rank",
            module=True,
            args=[str(spec_file)],
            nproc=1,
            nnodes=2,
            hosts=2,
            path="c10d",
            deadline_s=120.0,
            name=kind.value,
        ),
        network=net,
    )
    # The logical point: rank 1, on host 1, is about to write its shard of round 2.
    held = control.expect(timeout_s=90.0, rank=1, phase="shard", kind="held")
    rank1 = group.workers()[1]
    environ = Path(f"/proc/{rank1.pid}/environ").read_bytes().split(b"\0")
    env = dict(kv.decode().split("=", 1) for kv in environ if b"=" in kv)
    store_host = net.host(0).address
    assert env["MASTER_ADDR"] == store_host  # the workers' store is host 0's, not loopback
    assert store_host in _net_peers(rank1.pid)  # reached over host 1's own interface
    assert os.readlink(f"/proc/{rank1.pid}/ns/net") == f"net:[{net.inodes[net.host(1).netns]}]"
    cut = net.partition(1, kind)
    held.release()
    released_at = time.monotonic()
    # A logical deadline: the documented bound of a failing round, plus start-up slack.
    group.deadline_in(fault_oracle.failure_bound_s(TIMEOUT_S) + 15.0)
    result = group.wait()
    return CutRound(result, read_phase(out, 2), cut, released_at, out)


def test_a_host_rejected_by_the_store_host_in_a_round_fails_within_the_bound(
    chaos_hosts, chaos_tmp_root: Path, request: pytest.FixtureRequest
) -> None:
    """nftables answers host 1's store traffic with resets: checkpoint 1 fails on both
    ranks with their causes, within 3 T + 3 s; checkpoint 0 stays intact."""
    run = _cut_in_round(chaos_hosts, chaos_tmp_root, CutKind.REJECT)
    verdict = fault_oracle.judge(
        run.records,
        run.result,
        index=1,
        canonical_replicas=2,
        timeout_s=TIMEOUT_S,
        causes={0: ("Missing ranks=[1]",), 1: ("TCPStore", "Connection reset")},
    )
    assert verdict.outcome == fault_oracle.FAILED, verdict.describe() + run.result.report()
    cut_rank = next(r for r in run.records if r.rank == 1)
    failed = next(c for c in cut_rank.checkpoints if c.index == 1)
    assert not failed.ok and failed.error  # which rank, what error ...
    assert failed.ended_at is not None  # ... and when: within the bound of the cut
    assert failed.ended_at - run.cut.at <= fault_oracle.failure_bound_s(TIMEOUT_S)
    request.node.user_properties += [  # the evidence: which rank, what error, when
        ("multinode.cut_rank", 1),
        ("multinode.cut_rank_error", failed.error),
        ("multinode.failed_after_cut_s", round(failed.ended_at - run.cut.at, 3)),
    ]
    assert fault_oracle.previous_intact(run.records, run.out / "ckpt-0.pkl", 0, "pickle") == []
    _nothing_left(chaos_hosts)


@pytest.mark.xfail(
    strict=True,
    reason="Zephon defect (docs/findings.md, stalled store): a store link that delivers nothing "
    "blocks TorchKVStore.wait past any multiple of aggregate_timeout_s; a silent partition "
    "is such a link, so the cut rank waits for the round's outcome until the deadline",
)
def test_a_host_silently_cut_off_from_the_store_host_in_a_round_fails_within_the_bound(
    chaos_hosts, chaos_tmp_root: Path
) -> None:
    """Host 1's bridge port goes down (packets vanish): the leader fails at T ("Missing
    ranks=[1]"); the cut rank should fail within 3 T + 3 s too.

    The ranks' calls are judged, not the group's end: torchrun's agent on the cut host waits
    in its own rendezvous store call (torch's c10d client over the same silent link), so the
    group passes its deadline whatever Zephon does (measured with the stalled-store-link
    patch applied: both ranks failed within the bound, the agent stayed). Judging the group
    would keep this xfail red after Zephon's fix, for torch's cause."""
    run = _cut_in_round(chaos_hosts, chaos_tmp_root, CutKind.LINK)
    try:
        leader = next(r for r in run.records if r.rank == 0)
        missing = next(c for c in leader.checkpoints if c.index == 1)
        assert not missing.ok and "Missing ranks=[1]" in (missing.error or "")
        cut_rank = next(r for r in run.records if r.rank == 1)
        ended = next((c for c in cut_rank.checkpoints if c.index == 1), None)
        assert ended is not None and ended.ended_at is not None, "the cut rank's call never ended"
        assert not ended.ok and ended.error
        assert ended.ended_at - run.cut.at <= fault_oracle.failure_bound_s(TIMEOUT_S)
    finally:
        _nothing_left(chaos_hosts)
