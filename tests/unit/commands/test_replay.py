"""``zephon-chaos replay``: the signature a rerun is compared with."""

from __future__ import annotations

from zephon_chaos.commands.replay import recorded_signature
from zephon_chaos.scenario import Found, Launch, Scenario

SIGNATURE = "batches-identical.missing.resized.boundary"


def test_the_recorded_signature_wins_over_the_file_name() -> None:
    found = Scenario(launches=(Launch(1, 2),), found=Found("inproc", "warm", SIGNATURE))
    assert recorded_signature(found, "renamed.json") == SIGNATURE


def test_a_file_without_a_record_is_compared_with_its_name() -> None:
    assert (
        recorded_signature(Scenario(launches=(Launch(1, 2),)), f"d/{SIGNATURE}.json") == SIGNATURE
    )
