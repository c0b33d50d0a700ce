"""``zephon-chaos run``'s verdict: known defects and harness problems are not violations."""

from __future__ import annotations

import pytest

from zephon_chaos.commands.run import Verdict


@pytest.mark.parametrize(
    ("sig", "verdict", "status"),
    [
        (None, Verdict.OK, 0),
        ("known.string-key-zero-cid-restore", Verdict.KNOWN, 0),
        ("harness.no-error-message.no-resume.no-resume", Verdict.HARNESS, 3),
        ("batches-identical.missing.resized.boundary", Verdict.VIOLATION, 1),
    ],
)
def test_a_signature_gives_its_verdict_and_exit_status(
    sig: str | None, verdict: Verdict, status: int
) -> None:
    assert Verdict.of(sig) is verdict
    assert verdict.exit_status == status
