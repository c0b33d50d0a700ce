"""A Zephon defect, standalone: after the store has died, dropping the leader's pipeline blocks
the dropping thread for about one store connection timeout, inside the engine's finalizer
(``dead_store_finalizer.py``, torch, zephon and the standard library only).

``Engine.__del__`` (``_internal/engine.py``) calls ``RoundCoordinator.cleanup``
(``_internal/coordination.py``), which deletes the last round's retained result, one store
call; ``TorchKVStore._call`` (``_internal/kvstore.py``) had discarded the client after the
failed checkpoint, so the delete connects anew to the dead store and fails only when c10d's
connect retries run out within ``aggregate_timeout_s``. The script's docstring cites the lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.zephon.repro.launch import reported, run_script

SCRIPT = Path(__file__).with_name("dead_store_finalizer.py")
TIMEOUT_S = 1.0
RUNS = 2
DEADLINE_S = 120.0
"""About 15 s measured a run on 2 cores (importing torch, two cases at T = 1 s)."""
CONNECT_FLOOR = 0.9
"""A connection to the dead store fails no sooner than c10d's connect timeout, T."""

Cases = dict[str, dict[str, Any]]


def _run(work: Path) -> Cases:
    text = run_script(SCRIPT, work, DEADLINE_S, env={"DEAD_STORE_TIMEOUT_S": str(TIMEOUT_S)})
    return reported(text, "case", ["store alive", "store dead"], SCRIPT)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Cases]:
    """What each case reported, in each of RUNS launches shared by this module's tests."""
    return [_run(tmp_path_factory.mktemp(f"dead-store-finalizer-{n}")) for n in range(RUNS)]


@pytest.mark.slow
def test_the_leaders_finalizer_connects_to_the_dead_store_and_waits_its_timeout(
    runs: list[Cases],
) -> None:
    """The defect's shape: with the store alive every finalizer's clean-up is quick; after its
    death the leader's takes at least one connect timeout, and it is what the drop waited for."""
    for cases in runs:
        alive, dead = cases["store alive"], cases["store dead"]
        assert all(s < CONNECT_FLOOR * TIMEOUT_S for s in alive["cleanup_s"]), cases
        assert dead["checkpoint_failed_s"] is not None, cases
        slow = [s for s in dead["cleanup_s"] if s >= CONNECT_FLOOR * TIMEOUT_S]
        assert len(slow) == 1 and dead["drop_s"] >= slow[0], cases


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "Zephon defect: after the store died, the engine's finalizer deletes the last round's "
        "result on a new connection and waits out its timeout (see this module's docstring)"
    ),
)
def test_dropping_a_pipeline_after_its_store_died_waits_no_store_timeout(
    runs: list[Cases],
) -> None:
    """A finalizer runs in whichever thread drops the last reference or collects the cycle
    (a trainer rebuilding its loader, the interpreter at exit): its best-effort clean-up must
    not hold that thread for a connection timeout, 180 s by default."""
    late = [c["store dead"]["drop_s"] for c in runs if c["store dead"]["drop_s"] > TIMEOUT_S / 2]
    assert not late, f"dropping the pipelines after the store died took {late} s"
