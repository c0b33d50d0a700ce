"""The global-batch oracle on synthetic lane streams: exact and mid-window contracts."""

from __future__ import annotations

import pytest

from zephon_chaos.oracles.global_batches import Contract, compare
from zephon_chaos.problem import Area

REF = {lane: [[(0, lane, 4 * s + k) for k in range(4)] for s in range(4)] for lane in range(3)}
FULL = {lane: 4 for lane in REF}


def mutate(how: str) -> dict[int, list[list[tuple[int, int, int]]]]:
    actual = {lane: [list(b) for b in batches] for lane, batches in REF.items()}
    if how == "skip":
        actual[1][2] = actual[1][2][1:]
    elif how == "duplicate":
        actual[2][3] = [*actual[2][3], actual[2][0][0]]
    elif how == "swap_lanes":
        actual[0][2:], actual[1][2:] = actual[1][2:], actual[0][2:]
    elif how == "drop_lane":
        actual[2] = actual[2][:2]
    elif how == "permute_window":
        actual[0][2], actual[1][2] = actual[1][2], actual[0][2]
    return actual


def test_identical_streams_pass_both_contracts() -> None:
    for exact in (True, False):
        verdict = compare(REF, mutate("none"), FULL, exact=exact)
        assert verdict.ok and verdict.steps_compared == 4


@pytest.mark.parametrize(
    ("how", "step", "lane", "evidence"),
    [
        ("skip", 2, 1, "1 sample(s) of the reference never delivered"),
        ("duplicate", 3, 2, "delivered more often than the reference"),
        ("swap_lanes", 2, 0, "first divergence at global step 2, lane 0"),
        ("drop_lane", 2, 2, "lane 2 delivered 2 batches, expected 4"),
        ("permute_window", 2, 0, "first divergence"),
    ],
)
def test_exact_contract_names_the_first_divergence(how, step, lane, evidence) -> None:
    verdict = compare(REF, mutate(how), FULL, exact=True)
    assert not verdict.ok
    assert verdict.first_divergence is not None
    assert (verdict.first_divergence.step, verdict.first_divergence.lane) == (step, lane)
    assert evidence in verdict.describe()


@pytest.mark.parametrize(
    ("exact", "contract", "area", "text"),
    [
        (True, Contract.IDENTICAL, Area.BATCHES_IDENTICAL, "identical global batches"),
        (
            False,
            Contract.MID_WINDOW,
            Area.BATCHES_MID_WINDOW,
            "mid-window contract (windows as multisets)",
        ),
    ],
)
def test_the_verdict_states_its_contract_as_a_value(exact, contract, area, text) -> None:
    verdict = compare(REF, mutate("skip"), FULL, exact=exact)
    assert verdict.contract is contract and contract.exact is exact and contract.area is area
    assert {p.area for p in verdict.found()} == {area}
    assert verdict.describe().startswith(f"VIOLATION of {text}:")
    held = compare(REF, REF, FULL, exact=exact)
    assert held.describe() == f"ok ({text}, 4 global steps compared)"


def test_mid_window_contract_allows_a_permuted_window_but_not_a_lost_sample() -> None:
    assert compare(REF, mutate("permute_window"), FULL, exact=False).ok
    for how in ("skip", "duplicate", "drop_lane"):
        verdict = compare(REF, mutate(how), FULL, exact=False)
        assert not verdict.ok, how
        assert verdict.missing or verdict.duplicated or "delivered" in verdict.describe()


def test_expected_lengths_bound_the_comparison() -> None:
    short = {lane: batches[:2] for lane, batches in REF.items()}
    assert compare(REF, short, {lane: 2 for lane in REF}, exact=True).ok
    assert not compare(REF, short, FULL, exact=True).ok


def test_a_verdict_with_no_step_compared_never_says_ok() -> None:
    """Nothing kept (every launch failed before a checkpoint): the verdict holds to nothing."""
    verdict = compare({0: [[(0, 0, 0)]]}, {}, {}, exact=True)
    assert verdict.steps_compared == 0
    assert not verdict.describe().startswith("ok")
    assert "nothing compared" in verdict.describe()


@pytest.mark.parametrize(
    ("how", "lost", "repeated"),
    [
        ("skip", {1: 1}, {}),
        ("duplicate", {}, {2: 1}),
        ("drop_lane", {2: 8}, {}),
        ("permute_window", {}, {}),  # samples moved between lanes: neither lost nor repeated
    ],
)
def test_the_verdict_counts_lost_and_repeated_samples_per_lane(how, lost, repeated) -> None:
    verdict = compare(REF, mutate(how), FULL, exact=True)
    assert (verdict.lost_by_lane, verdict.repeated_by_lane) == (lost, repeated)
