"""Table (a) against real Zephon: every row's witness, then generated configurations.

Each probe runs one configuration in this process (no torchrun): options, an optional
restore, ``iter``, the first ``next()``, an optional checkpoint. The table's ``predict``
says which exception, message and moment (and which warnings) to expect; a mismatch names
the configuration so it can be replayed with ``probe(ZephonConfig(...), Endpoints())``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from hypothesis import given

from zephon_chaos.validation.configs import property_settings, zephon_configs
from zephon_chaos.validation.judge import compare, predict
from zephon_chaos.validation.model import Moment, ZephonConfig
from zephon_chaos.validation.probe import Endpoints, probe
from zephon_chaos.validation.rules import ZEPHON_RULES, ZephonRule

pytestmark = pytest.mark.cpu

@pytest.fixture(scope="module")
def endpoints() -> Iterator[Endpoints]:
    with Endpoints() as eps:
        yield eps


def _check(cfg: ZephonConfig, endpoints: Endpoints) -> float:
    """Probe ``cfg``, fail with both sides on any mismatch; return the first batch's time."""
    expected = predict(cfg)
    observed = probe(cfg, endpoints)
    problems = compare(expected, observed)
    if problems:
        raise AssertionError(
            "Zephon disagrees with the rule table for\n"
            f"  {cfg.replay()}\n"
            + "".join(f"  - {p}\n" for p in problems)
            + f"predicted:\n{expected.describe()}\nobserved:\n{observed.describe()}"
        )
    return observed.elapsed_s.get(Moment.FIRST_BATCH, 0.0)


@pytest.mark.parametrize("rule", ZEPHON_RULES, ids=[f"{r.id}-{r.kind.value}" for r in ZEPHON_RULES])
def test_witness_behaves_as_the_table_says(rule: ZephonRule, endpoints: Endpoints) -> None:
    elapsed = _check(rule.witness, endpoints)
    timeout = rule.witness.aggregate_timeout_s
    if rule.id == "Z22":
        # The connect budget, then c10d's jittered back-off and a second attempt.
        assert timeout <= elapsed <= 2 * timeout + 4.0, f"unreachable store after {elapsed:.2f}s"


def test_lone_rank_checkpoint_waits_its_budget(endpoints: Endpoints) -> None:
    """A rank whose peers never arrive fails after about aggregate_timeout_s, not sooner."""
    cfg = next(r.witness for r in ZEPHON_RULES if r.id == "Z30")
    observed = probe(cfg, endpoints)
    assert observed.error is not None and observed.error.moment is Moment.CHECKPOINT
    elapsed = observed.elapsed_s[Moment.CHECKPOINT]
    assert cfg.aggregate_timeout_s <= elapsed < cfg.aggregate_timeout_s + 2.0, elapsed


def test_generated_configurations_behave_as_predicted(
    endpoints: Endpoints, request: pytest.FixtureRequest
) -> None:
    """Hypothesis mixes valid and invalid values of every field; predict must hold for all.

    The example count and rate go to the test's user properties (junitxml, xdist reports).
    """
    examples = 0
    start = time.perf_counter()

    @property_settings()
    @given(cfg=zephon_configs())
    def prediction_holds(cfg: ZephonConfig) -> None:
        nonlocal examples
        examples += 1
        _check(cfg, endpoints)

    prediction_holds()
    elapsed = time.perf_counter() - start
    request.node.user_properties += [
        ("validation_examples", examples),
        ("validation_examples_per_s", round(examples / elapsed, 1)),
    ]
    assert examples >= 1


TORCHRUN_SAMPLE = ("Z02", "Z08", "Z11", "Z12", "Z18", "Z27", "Z29")


def test_a_sample_behaves_the_same_inside_a_torchrun_group(torchrun_group, tmp_path) -> None:
    """The witnesses of a sample of rows, probed in torchrun workers, agree with the table."""
    result = torchrun_group(
        "zephon_chaos.validation.rank_probe",
        module=True,
        args=[str(tmp_path), *TORCHRUN_SAMPLE],
        nproc=2,
        deadline_s=120,
    )
    result.raise_for_status()
    for rank in range(2):
        disagreements = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert sorted(disagreements) == sorted(TORCHRUN_SAMPLE)
        assert all(not problems for problems in disagreements.values()), disagreements
