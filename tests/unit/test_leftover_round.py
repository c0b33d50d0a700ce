"""The store namespace of a launch's checkpoint rounds, as Zephon scopes it."""

from __future__ import annotations

import pytest

from zephon_chaos.faults.leftover_round import round_namespace


def test_a_fresh_launch_uses_generation_zero() -> None:
    assert round_namespace("zc-run", None) == "zephon/zc-run-0"


def test_a_restored_launch_uses_the_checkpoints_generation_plus_one() -> None:
    assert round_namespace("zc-run", {"checkpoint_reload_count": 2}) == "zephon/zc-run-3"


def test_zephons_default_run_id_is_scoped_by_what_the_harness_cannot_see() -> None:
    assert round_namespace("default_run_id", None) is None


def test_a_checkpoint_without_its_generation_is_refused_with_the_cause() -> None:
    with pytest.raises(ValueError, match="checkpoint_reload_count"):
        round_namespace("zc-run", {"progress": {}})
