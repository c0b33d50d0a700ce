"""Lane ownership must match Zephon's own arithmetic, or global steps are miscounted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zephon_chaos.lanes import dp_degree, dp_group, lane_owner, lanes_of


@given(
    c=st.integers(1, 16), data=st.data(), strategy=st.sampled_from(["contiguous", "interleaved"])
)
def test_every_lane_has_exactly_one_owner(c: int, data: st.DataObject, strategy: str) -> None:
    g = data.draw(st.integers(1, c))
    owned = [lane for r in range(g) for lane in lanes_of(r, g, c, strategy)]
    assert sorted(owned) == list(range(c))
    counts = [len(lanes_of(r, g, c, strategy)) for r in range(g)]
    assert max(counts) - min(counts) <= 1
    assert set(lane_owner(g, c, strategy)) == set(range(c))


@pytest.mark.parametrize(
    ("rank", "world", "c", "strategy", "lanes"),
    [
        (0, 2, 6, "contiguous", [0, 1, 2]),
        (1, 4, 6, "contiguous", [2, 3]),
        (3, 4, 6, "contiguous", [5]),
        (1, 4, 6, "interleaved", [1, 5]),
    ],
)
def test_known_mappings(rank: int, world: int, c: int, strategy: str, lanes: list[int]) -> None:
    assert lanes_of(rank, world, c, strategy) == lanes


@given(
    dp=st.integers(1, 4),
    tp=st.integers(1, 4),
    data=st.data(),
    strategy=st.sampled_from(["contiguous", "interleaved"]),
)
def test_lanes_belong_to_dp_groups_and_tp_ranks_are_contiguous(
    dp: int, tp: int, data: st.DataObject, strategy: str
) -> None:
    """Rank r of a DP x TP world is in DP group r // tp (TorchTitan's mesh puts tp innermost)
    and owns what that group owns in a world of ``dp`` ranks, as Zephon maps dp_group_id."""
    c = data.draw(st.integers(dp, 12))
    world = dp * tp
    for r in range(world):
        assert dp_group(r, tp) == r // tp
        assert lanes_of(r, world, c, strategy, tp) == lanes_of(r // tp, dp, c, strategy)
    assert dp_degree(world, tp) == dp


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="not a whole number of tensor-parallel groups of 2"):
        lanes_of(0, 3, 4, "contiguous", tp=2)
    with pytest.raises(ValueError, match="outside world size"):
        lanes_of(2, 2, 4, "contiguous")
    with pytest.raises(ValueError, match="unknown mapping strategy 'diagonal'"):
        lanes_of(0, 2, 4, "diagonal")
