"""A Zephon defect, standalone: once a pipeline's MTP child has died, ``checkpoint()`` returns,
without an error, a state behind the batches the trainer consumed: the last explicit
checkpoint's, or a pipeline's that drew nothing, which in a group is merged into every rank's
checkpoint (``mtp_dead_child_checkpoint.py``, torch and zephon only, under torchrun).

``Pipeline._iter_mtp`` (``_internal/pipeline.py``) drops the dead child after a capture that
cannot succeed, so ``Pipeline.checkpoint`` falls through to a stale cache or to a fresh
engine instead of ``MTPPipeline.checkpoint``'s refusal. The script's docstring cites the lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.zephon.repro.launch import reported, run_script

SCRIPT = Path(__file__).with_name("mtp_dead_child_checkpoint.py")
DEADLINE_S = 240.0
"""50 s measured a run on 2 cores: a dead child is noticed at the MTP iterator's 5 s poll."""
DEAD = ("group-dead-child", "one-rank-dead-child", "one-rank-dead-child-after-a-checkpoint")
CONTROLS = ("one-rank-live-child", "one-rank-break")
DIED = (
    "RuntimeError: MTP subprocess exited unexpectedly",
    "BrokenPipeError: ",
    "ConnectionResetError: ",
    "EOFError",
)
"""What the iteration raises once the child is dead: Zephon's own error at the iterator's poll,
or, when the parent writes to or reads from the child's pipe first, the OS's (a
``BrokenPipeError`` was seen in a loaded CI run)."""

Cases = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Cases:
    """What each case reported, in one torchrun launch of 2 ranks shared by this module."""
    work = tmp_path_factory.mktemp("mtp-dead-child")
    text = run_script(SCRIPT, work, DEADLINE_S, nproc=2)
    return reported(text, "case", [*DEAD, *CONTROLS], SCRIPT)


def _right(case: dict[str, Any]) -> bool:
    """The checkpoint refused, or every lane resumes at the batch after its last consumed."""
    return case["checkpoint_error"] is not None or case["resumes_at"] == case["consumed"]


def test_the_checkpoint_resumes_where_the_trainer_was_while_the_child_lives(cases: Cases) -> None:
    """The controls, and the death itself: without them the defect's test proves nothing."""
    for name in CONTROLS:
        case = cases[name]
        assert case["iteration_error"] is None and case["checkpoint_error"] is None, case
        assert case["resumes_at"] == case["consumed"], case
    for name in DEAD:
        assert (cases[name]["iteration_error"] or "").startswith(DIED), cases[name]
        assert all(n > 0 for n in cases[name]["consumed"].values()), cases[name]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "Zephon defect: after the MTP child died, checkpoint() returns a stale or fresh state "
        "without an error (see this module's docstring)"
    ),
)
def test_after_the_child_died_a_checkpoint_refuses_or_resumes_where_the_trainer_was(
    cases: Cases,
) -> None:
    """A trainer that catches the loader's error and saves its state (an emergency
    checkpoint, a loader rebuilt in place) must get an error or its true position, never
    one that replays batches it trained on."""
    wrong = {name: cases[name] for name in DEAD if not _right(cases[name])}
    assert not wrong, f"checkpoints behind the consumed batches: {wrong}"
