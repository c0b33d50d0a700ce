"""Link faults that heal at the end of their round, on real torchrun groups (2 ranks).

The faulted rank removes its fault itself once its ``checkpoint()`` call has returned or
raised (``ProxyFault.until``: ``round_end``); Zephon's client discards itself after a failed
operation "so the next checkpoint reconnects" (``_internal/kvstore.py``, ``TorchKVStore``), and
the heal oracle (``oracles.healing``) holds it to that: the next call, here the lockstep
retry, completes on every rank. The faulted round itself is judged as any link fault's.
"""

from __future__ import annotations

import pytest

from zephon_chaos.oracles.healing import HealOutcome
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.spec import ROUND_END, CheckpointAt, PipelineSpec

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 2.0


def healed(fault: ProxyFault) -> Scenario:
    """The first of two launches faulted; the lockstep retry; a relaunch resumes."""
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=TIMEOUT_S),
        launches=(
            Launch(
                2, 3, (CheckpointAt(1), CheckpointAt(2)), proxy_faults=(fault,), retry="lockstep"
            ),
            Launch(2, 2),
        ),
        name="healed-link",
    )


def recovered(resume_check, fault: ProxyFault) -> None:  # type: ignore[no-untyped-def]
    outcome = resume_check(healed(fault))
    assert outcome.ok, outcome.report()
    launch = outcome.phases[0].fault
    assert launch is not None and launch.healing is not None, outcome.report()
    assert launch.healing.outcome is HealOutcome.RECOVERED, launch.verdict.describe()


def test_after_a_healed_reset_at_a_followers_shard_the_retry_completes(resume_check) -> None:
    recovered(
        resume_check, ProxyFault(1, "reset_peer", {"timeout": 0}, at="shard", until=ROUND_END)
    )


@pytest.mark.slow
def test_after_a_healed_cut_at_a_followers_shard_the_retry_completes(resume_check) -> None:
    recovered(resume_check, ProxyFault(1, "down", at="shard", until=ROUND_END))


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "Zephon defect healed-link-poisons-retry: the leader's announcement lost on a link that "
        "went down and healed leaves it the round's id as last_round_id, and the retry fails "
        "with 'last_round_id mismatch across shards' "
        "(tests/zephon/repro/test_healed_link_poisons_retry.py)"
    ),
)
def test_after_a_healed_cut_at_the_leaders_announcement_the_retry_completes(
    resume_check,
) -> None:
    recovered(resume_check, ProxyFault(0, "down", at="announce", until=ROUND_END))
