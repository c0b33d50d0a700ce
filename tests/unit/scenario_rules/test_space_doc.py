"""docs/space.md classes every refusal of the scenario model: the page and the code stay in step.

Each rule (``scenario_rules.ids.Rule``) has exactly one row there with one class (a, b, c or
d), no row names a rule the code no longer applies, and a refusal made by the code names the
rule whose row describes it.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from zephon_chaos.inproc import inproc_refused
from zephon_chaos.scenario import Launch, ProxyFault, Scenario, ScenarioError, StoreFault
from zephon_chaos.scenario_rules import Rule, normalised
from zephon_chaos.workload.spec import (
    STAGE_RULES,
    CheckpointAt,
    PipelineSpec,
    RankFault,
    RankLag,
)

ROOT = Path(__file__).resolve().parents[3]
SPACE = ROOT / "docs" / "space.md"
RULES_CODE = ROOT / "src" / "zephon_chaos"
IDS_MODULE = RULES_CODE / "scenario_rules" / "ids.py"
ROW = re.compile(r"^\| `(?P<id>[^`]+)` \|(?P<cells>.*)\|[ \t]*$", re.MULTILINE)
CLASSES = ("a", "b", "c", "d")
CLASS_CELL, RECIPE_CELL = 2, 4
"""Cells after the id: field, what it refuses, class, evidence, what of a default recipe."""
NONE_OF_THE_RECIPE = "—"


def rows(text: str) -> list[tuple[str, list[str]]]:
    """Each rule row of the page: its id and its other cells, stripped (bold marks too)."""
    return [
        (m["id"], [cell.strip().strip("*").strip() for cell in m["cells"].split("|")])
        for m in ROW.finditer(text)
    ]


def classes(text: str) -> dict[str, str]:
    return {rule: cells[CLASS_CELL] for rule, cells in rows(text)}


def applied(rule: Rule, code: str) -> bool:
    """The code refers to ``rule`` outside its declaration (or, for the stage checks of the
    workload layer, which cannot import ``Rule``, lists its id in ``STAGE_RULES``)."""
    return rule.value in STAGE_RULES or re.search(rf"\b(?:Rule|r)\.{rule.name}\b", code) is not None


def test_every_rule_has_exactly_one_row_and_every_row_a_rule() -> None:
    documented = [rule for rule, _ in rows(SPACE.read_text())]
    twice = sorted(rule for rule, n in Counter(documented).items() if n > 1)
    assert not twice, f"docs/space.md has more than one row for {twice}"
    in_code = {rule.value for rule in Rule}
    missing = sorted(in_code - set(documented))
    assert not missing, f"rules without a row in docs/space.md: {missing}"
    stale = sorted(set(documented) - in_code)
    assert not stale, f"docs/space.md names rules the code no longer has: {stale}"


def test_every_row_has_exactly_one_class_and_a_wrong_one_says_what_the_recipe_loses() -> None:
    for rule, cells in rows(SPACE.read_text()):
        assert len(cells) == RECIPE_CELL + 1, f"{rule}: {len(cells)} cells, not 5"
        assert cells[CLASS_CELL] in CLASSES, f"{rule}: class {cells[CLASS_CELL]!r}"
        if cells[CLASS_CELL] == "c":
            assert cells[RECIPE_CELL] not in ("", NONE_OF_THE_RECIPE), (
                f"{rule} is class c: its row says what a default recipe meets"
            )


def test_every_rule_is_still_applied_by_the_code() -> None:
    code = "\n".join(
        path.read_text() for path in sorted(RULES_CODE.rglob("*.py")) if path != IDS_MODULE
    )
    unused = sorted(rule.value for rule in Rule if not applied(rule, code))
    assert not unused, f"rules the code no longer applies (drop them and their rows): {unused}"


def _store_pair(
    runner: str = "inline", persist: str = "pickle", aggregation: str = "store", **first: object
) -> Scenario:
    """Two launches of two ranks through a store (torchrun's unless ``aggregation`` says the
    harness's), the first faulted by ``first``."""
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=4, runner=runner, aggregation=aggregation),  # type: ignore[arg-type]
        launches=(Launch(2, 3, (CheckpointAt(1), CheckpointAt(2)), **first), Launch(2, 2)),  # type: ignore[arg-type]
        persist_format=persist,
    )


LINK = ProxyFault(0, "latency", {"latency": 10}, at="announce")
IN_ROUND = RankFault(1, 0, "sigkill", at="ack")
AT_STEP = RankFault(1, 1, "exit", restart=0)

REFUSED = {
    "lag-drift-no-agreement": _store_pair(
        sync="free", lags=(RankLag(1, by=1),), retry="lockstep"
    ),
    "lag-independent-collective-save": _store_pair(
        persist="dcp", sync="free", lags=(RankLag(1),), retry="independent"
    ),
    "lag-tp-peers": _store_pair(sync="free", lags=(RankLag(1),), retry="independent", tp=2),
    "link-fault-one-rank": Scenario(
        pipeline=PipelineSpec(canonical_replicas=4),
        launches=(Launch(1, 2, (CheckpointAt(1),), proxy_faults=(LINK,)),),
    ),
}


@pytest.mark.parametrize("rule", sorted(REFUSED))
def test_a_refusal_names_the_rule_its_row_classes(rule: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        REFUSED[rule].validate()
    assert refused.value.rule is Rule(rule)
    assert rule in classes(SPACE.read_text())


PUT_BACK = {
    "link-fault": _store_pair("process", proxy_faults=(LINK,)),
    "rank-point": _store_pair("process", rank_faults=(IN_ROUND,)),
    "store-fault": _store_pair(
        "process", aggregation="store_explicit", store_faults=(StoreFault("restart", "shard#2"),)
    ),
}
"""Faults inside a round under ``runner: process``, once refused (``*-process-runner``) on the
false reason that worker processes write the round: the rank process does (docs/space.md)."""


@pytest.mark.parametrize("fault", sorted(PUT_BACK))
def test_a_fault_inside_a_round_under_the_process_runner_is_allowed(fault: str) -> None:
    s = PUT_BACK[fault]
    assert s.validate() is s
    assert normalised(s) == s


def test_the_in_process_tier_names_its_rule_too() -> None:
    refused = inproc_refused(_store_pair("process").validate())
    assert refused is not None and refused.rule is Rule.INPROC_RUNNER_PROCESS
    assert refused.text.startswith("scenario.pipeline.runner:")


RESTARTED_IN_ROUND = RankFault(1, 0, "sigkill", restart=0, at="shard")
PUT_BACK_RESTARTS = {
    "rank-point-dcp": _store_pair(persist="dcp", rank_faults=(IN_ROUND,)),
    "restart-fault-at-step": _store_pair(max_restarts=1, rank_faults=(RESTARTED_IN_ROUND,)),
    "restarts-in-lockstep": _store_pair(max_restarts=1, rank_faults=(AT_STEP,), sync="free"),
}
"""A crash inside a round under torchrun's restarts, free-running ranks under them, and a
crash inside a round beside DCP: once class c refusals, now judged (docs/space.md)."""


@pytest.mark.parametrize("rule", sorted(PUT_BACK_RESTARTS))
def test_a_crash_inside_a_round_under_restarts_or_dcp_is_no_longer_refused(rule: str) -> None:
    s = PUT_BACK_RESTARTS[rule]
    assert s.validate() is s
    assert normalised(s) == s
    assert rule not in {r.value for r in Rule}
    assert rule not in classes(SPACE.read_text())
