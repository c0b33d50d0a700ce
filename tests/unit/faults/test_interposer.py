"""The interposer between Zephon and its store: phases seen, triggers fired, holds released.

Two ranks run as threads of this process against a TCPStore it hosts (the workload's own
loop, ``run_rank``), each through its ``chaos://`` interposer; evidence is the rank's event
file and records, never a return value of ours.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.faults.rank_threads import (
    JOIN_S,
    assert_dropped_ack_splits,
    phases_written,
    run_rank_threads,
)
from zephon_chaos.faults.control import InterposerControl, notify
from zephon_chaos.faults.interposer import (
    ACTIONS,
    EventLog,
    Heal,
    InterposedStore,
    InterposerError,
    InterposerPlan,
    interpose_uri,
    phase_of,
    read_events,
    validate,
)
from zephon_chaos.oracles import faults as fault_oracle
from zephon_chaos.workload.records import read_phase
from zephon_chaos.workload.spec import (
    ROUND_PHASES,
    CheckpointAt,
    PhaseTrigger,
    PipelineSpec,
    WorkloadSpec,
)

NS = "zephon/run-0"
TIMEOUT_S = 1.0


@pytest.mark.parametrize(
    ("op", "key", "phase"),
    [
        ("set", f"{NS}/round", "announce"),
        ("set", f"{NS}/17/state/r1_w0_p9", "shard"),
        ("append", f"{NS}/17/participants", "participants"),
        ("set_if_absent", f"{NS}/17/outcome", "outcome"),
        ("set", f"{NS}/17/ack/r1_w0_p9", "ack"),
        ("set", f"{NS}/17/state/r1_w0_p9/ab12/chunk/0", None),
        ("set", f"{NS}/17/outcome/ab12/chunk/3", None),
        ("set", "other/round", None),
        ("append", f"{NS}/round", None),
    ],
)
def test_a_write_is_classified_by_its_place_in_the_round(op: str, key: str, phase: str) -> None:
    assert phase_of(op, key) == phase


@pytest.mark.parametrize(
    ("trigger", "field"),
    [
        (PhaseTrigger(0, "commit"), "phase"),
        (PhaseTrigger(0, "shard", "explode"), "action"),
        (PhaseTrigger(0, "shard", when="during"), "when"),
        (PhaseTrigger(0, "shard", occurrence=0), "occurrence"),
        (PhaseTrigger(0, "ack", "drop", when="after"), "when"),
        (PhaseTrigger(0, "ack", "toxic"), "toxic"),
        (PhaseTrigger(0, "shard", "cut", until="later"), "until"),
        (PhaseTrigger(0, "shard", "raise", until="round_end"), "until"),  # nothing to undo
    ],
)
def test_a_trigger_no_run_could_apply_is_refused_naming_its_field(
    trigger: PhaseTrigger, field: str
) -> None:
    with pytest.raises(InterposerError, match=rf"t\.{field}:"):
        validate(trigger, "t")


def test_proxy_actions_need_the_rank_to_have_a_proxy() -> None:
    with pytest.raises(InterposerError, match="store_proxy_ports"):
        InterposerPlan(rank=1, triggers=(PhaseTrigger(1, "shard", "cut"),))


def test_only_torch_stores_are_wrapped() -> None:
    with pytest.raises(InterposerError, match="aggregate_dir has no store"):
        interpose_uri("file:///tmp/x", InterposerPlan(rank=0))


class _GoneLink:
    """A store client whose link is gone, save for writes that await no reply (c10d's SET)."""

    poll_interval_s = 0.01
    max_value_bytes = None

    def set(self, key: str, value: bytes) -> None:
        """Returns: the bytes went into the socket's buffer."""

    def exists(self, key: str) -> bool:
        raise RuntimeError(f"TCPStore check of {key!r} failed: Broken pipe")


@pytest.mark.parametrize(
    ("operations", "seen"),
    [(("ack",), False), (("ack", "exists"), True), (("exists",), True)],
)
def test_a_heal_says_whether_a_store_operation_failed_since_its_fault(
    operations: tuple[str, ...], seen: bool
) -> None:
    """Only a failed operation makes Zephon's client drop the connection a link fault ended;
    the ack, awaiting no reply, returns over the gone link."""
    pytest.importorskip("zephon")
    plan = InterposerPlan(rank=1)
    plan.heals.add(Heal(PhaseTrigger(1, "ack", "cut", until="round_end"), {}), EventLog(None))
    store = InterposedStore(_GoneLink(), plan)
    for op in operations:
        if op == "ack":
            store.set(f"{NS}/17/ack/r1_w0_p9", b"1")
        else:
            with pytest.raises(RuntimeError, match="Broken pipe"):
                store.exists(f"{NS}/round")
    (heal,) = plan.heals.due
    assert heal.failure_seen is seen


def test_every_action_is_documented() -> None:
    assert all(text for text in ACTIONS.values())
    assert ROUND_PHASES == ("announce", "shard", "participants", "outcome", "ack")


def test_a_notification_without_a_listener_says_so() -> None:
    assert notify("zephon-chaos-nobody-listens", {"kind": "x"}) == "unreachable"


def test_waiting_for_an_event_that_never_comes_names_what_was_heard() -> None:
    with InterposerControl() as control:
        assert notify(control.name, {"kind": "fired", "rank": 0, "phase": "ack"}) == "sent"
        with pytest.raises(TimeoutError, match="'phase': 'ack'"):
            control.expect(0.2, rank=1)
        assert control.expect(0.2, rank=0).event["phase"] == "ack"


# ---- two rank threads through the interposer --------------------------------------------


@pytest.fixture
def store() -> Iterator[str]:
    """A TCPStore this process hosts on a loopback socket it holds; closed afterwards."""
    pytest.importorskip("zephon")
    from zephon_chaos.launch.store_host import StoreHost

    with StoreHost() as host:
        yield f"torch://{host.endpoint}"


RunRanks = Callable[..., tuple[WorkloadSpec, dict[int, str]]]


@pytest.fixture
def run_ranks(store: str, tmp_path: Path) -> RunRanks:
    """Run the workload's rank loop on two threads; returns the spec and each rank's error."""

    def run(name: str, *, world: int = 2, **fields: Any) -> tuple[WorkloadSpec, dict[int, str]]:
        out = tmp_path / name
        spec = WorkloadSpec(
            pipeline=PipelineSpec(canonical_replicas=world, aggregate_timeout_s=TIMEOUT_S),
            steps=3,
            checkpoints=(CheckpointAt(1), CheckpointAt(2)),
            out_dir=str(out),
            **fields,
        )
        errors = run_rank_threads(spec, world, store)
        return spec, errors

    return run


def test_every_phase_of_every_round_is_seen_in_protocol_order(run_ranks: RunRanks) -> None:
    spec, errors = run_ranks("observe", interpose=True)
    assert not errors
    leader = ["announce", "shard", "participants", "outcome"]
    follower = ["shard", "participants", "ack"]
    assert phases_written(spec.out_dir, 0) == [(p, n) for n in (1, 2) for p in leader]
    assert phases_written(spec.out_dir, 1) == [(p, n) for n in (1, 2) for p in follower]
    outcomes = [e["outcome"] for e in read_events(spec.out_dir, 0) if e["phase"] == "outcome"]
    assert outcomes == ["result", "result"]


def test_a_dropped_ack_splits_the_round(run_ranks: RunRanks) -> None:
    """Rank 1 returns (its ack 'went out'), the leader times out waiting for it: split."""
    spec, errors = run_ranks("drop", triggers=(PhaseTrigger(1, "ack", "drop", occurrence=2),))
    assert_dropped_ack_splits(spec, errors)


def test_a_raise_fails_the_rank_naming_the_interposer(run_ranks: RunRanks) -> None:
    spec, errors = run_ranks("raise", triggers=(PhaseTrigger(1, "shard", "raise"),))
    assert "interposer: rank 1 fails its shard write #1" in errors[1]
    verdict = fault_oracle.judge(
        read_phase(spec.out_dir, 2), None, index=0, canonical_replicas=2, timeout_s=TIMEOUT_S
    )
    assert verdict.outcome == fault_oracle.FAILED, verdict.describe()
    assert verdict.durations[0] <= fault_oracle.failure_bound_s(TIMEOUT_S)


def test_a_held_rank_waits_for_the_harness_then_completes(run_ranks: RunRanks) -> None:
    """Rank 1 is held before its first shard; released at once, the round still completes."""
    with InterposerControl() as control:
        released: list[dict[str, Any]] = []

        def harness() -> None:
            heard = control.expect(JOIN_S, rank=1, phase="shard")
            released.append(heard.event)
            heard.release()

        thread = threading.Thread(target=harness)
        thread.start()
        spec, errors = run_ranks(
            "hold",
            triggers=(PhaseTrigger(1, "shard", "hold", hold_timeout_s=JOIN_S),),
            control=control.name,
        )
        thread.join(JOIN_S)
    assert not errors
    assert released and released[0]["kind"] == "held"
    events = [(e["kind"], e.get("how")) for e in read_events(spec.out_dir, 1)]
    assert ("held", None) in events and ("released", "released") in events


def test_a_hold_nobody_releases_expires_and_never_hangs(run_ranks: RunRanks) -> None:
    with InterposerControl() as control:
        spec, errors = run_ranks(
            "expire",
            triggers=(PhaseTrigger(1, "ack", "hold", hold_timeout_s=0.2),),
            control=control.name,
        )
        assert control.expect(5.0, rank=1, phase="ack").held
    assert not errors
    assert ("released", "expired") in [
        (e["kind"], e.get("how")) for e in read_events(spec.out_dir, 1)
    ]


def test_an_independent_retry_cannot_heal_a_split(run_ranks: RunRanks) -> None:
    """The leader retries alone: no follower joins its new round, so it fails again."""
    spec, errors = run_ranks(
        "independent",
        triggers=(PhaseTrigger(1, "ack", "drop", occurrence=2),),
        retry="independent",
        retry_attempts=2,
    )
    records = read_phase(spec.out_dir, 2)
    attempts = [e for e in records[0].events if e.get("kind") == "checkpoint_attempt"]
    assert [(e["index"], e["attempt"], e["ok"]) for e in attempts] == [
        (0, 1, True),
        (1, 1, False),
        (1, 2, False),
    ]
    assert "failed after 2 attempt(s)" in errors[0] and 1 not in errors
    verdict = fault_oracle.judge(records, None, index=1, canonical_replicas=2, timeout_s=TIMEOUT_S)
    assert verdict.outcome == fault_oracle.SPLIT, verdict.describe()
