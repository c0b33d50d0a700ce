"""Table (a) as a model of Zephon: ``predict`` walks its rows in Zephon's check order, and
``compare`` names where a real pipeline (the probe) refutes the prediction."""

from __future__ import annotations

from collections import Counter

from zephon_chaos.validation.model import (
    Expectation,
    ExpectedError,
    ExpectedWarning,
    Moment,
    Observation,
    ZephonConfig,
)
from zephon_chaos.validation.rules import ZEPHON_RULES, Reaction


def predict(cfg: ZephonConfig) -> Expectation:
    """What Zephon 0.2.0 does with ``cfg``: walk the rows in Zephon's own check order.

    Rows are grouped by moment and ordered inside a moment as Zephon checks them, so the
    first error row that applies is the error, and the warning rows met before it (at
    the same or earlier moments) are the warnings.
    """
    steps = cfg.steps()
    warnings: list[ExpectedWarning] = []
    for rule in ZEPHON_RULES:
        if rule.kind is Reaction.ACCEPTED or rule.moment not in steps:
            continue
        count = rule.applies(cfg)
        if not count:
            continue
        if rule.kind is Reaction.WARNING:
            warnings += [ExpectedWarning(rule.id, rule.outcome, rule.fragment, rule.moment)] * count
            continue
        error = ExpectedError(rule.id, rule.outcome, rule.fragment, rule.moment)
        reached = steps[: steps.index(rule.moment) + 1]
        return Expectation(error=error, warnings=tuple(warnings), steps=reached)
    return Expectation(error=None, warnings=tuple(warnings), steps=steps)


def classify_warning(category: str, message: str) -> str | None:
    """The warning row a warning belongs to, ``"?"`` for an unknown Zephon one, else None."""
    for rule in ZEPHON_RULES:
        if rule.kind is Reaction.WARNING and rule.outcome == category and rule.fragment in message:
            return rule.id
    if message.startswith("[zephon]") or "pipeline option" in message:
        return "?"
    return None


def compare(expected: Expectation, observed: Observation) -> list[str]:
    """Mismatches between a prediction and what the probe saw; empty when they agree."""
    problems: list[str] = []
    if observed.hung_at is not None:
        problems.append(f"no outcome at {observed.hung_at.value} within {observed.budget_s:.1f}s")
        return problems
    exp, got = expected.error, observed.error
    if exp is None and got is not None:
        problems.append(f"unexpected {got.type_name} at {got.moment.value}: {got.message[:300]!r}")
    elif exp is not None and got is None:
        problems.append(
            f"rule {exp.rule_id} predicts {exp.type_name} at {exp.moment.value}, "
            "but the pipeline raised nothing"
        )
    elif exp is not None and got is not None:
        if got.type_name != exp.type_name:
            problems.append(
                f"rule {exp.rule_id}: expected {exp.type_name}, got {got.type_name}: "
                f"{got.message[:300]!r}"
            )
        if exp.fragment not in got.message:
            problems.append(
                f"rule {exp.rule_id}: message lacks {exp.fragment!r}: {got.message[:300]!r}"
            )
        if got.moment is not exp.moment:
            problems.append(
                f"rule {exp.rule_id}: expected at {exp.moment.value}, surfaced at "
                f"{got.moment.value}"
            )
    want = Counter((w.rule_id, w.moment) for w in expected.warnings)
    seen: Counter[tuple[str, Moment]] = Counter()
    for w in observed.warnings:
        rule_id = classify_warning(w.category, w.message)
        if rule_id == "?":
            problems.append(
                f"a Zephon warning no row covers at {w.moment.value}: "
                f"{w.category}: {w.message[:200]!r}"
            )
        elif rule_id is not None:
            seen[(rule_id, w.moment)] += 1
    for key in sorted(set(want) | set(seen), key=str):
        if want[key] != seen[key]:
            rule_id, moment = key
            problems.append(
                f"rule {rule_id}: expected {want[key]} warning(s) at {moment.value}, "
                f"saw {seen[key]}"
            )
    return problems
