"""The rule tables as data: witnesses, check order, source citations, the doc, ``predict``.

Pure tests: nothing here imports Zephon or torch (citations are read as source text).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.patched import installed_patches
from zephon_chaos.validation.conditions import uri_verdict
from zephon_chaos.validation.configs import zephon_configs
from zephon_chaos.validation.doc import render_validation_doc
from zephon_chaos.validation.judge import compare, predict
from zephon_chaos.validation.model import (
    DEAD,
    LIVE,
    MOMENT_ORDER,
    SCRATCH,
    Expectation,
    Moment,
    Observation,
    ObservedError,
    ObservedWarning,
    StoreUri,
    ZephonConfig,
)
from zephon_chaos.validation.recipe_rules import RECIPE_RULES
from zephon_chaos.validation.rules import (
    RULES_BY_ID,
    ZEPHON_RULES,
    ZEPHON_VERSION,
    Citation,
    Reaction,
    ZephonRule,
)

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "validation.md"
TWO = {"world_size": 2, "canonical_replicas": 2}


def _predicted_ids(expectation: Expectation) -> tuple[str | None, tuple[str, ...]]:
    error = expectation.error.rule_id if expectation.error else None
    return error, tuple(w.rule_id for w in expectation.warnings)


# --------------------------------------------------------------------------- the table


@pytest.mark.parametrize("rule", ZEPHON_RULES, ids=[r.id for r in ZEPHON_RULES])
def test_witness_shows_its_row(rule: ZephonRule) -> None:
    """Each row's witness is a configuration the row is about, and predict says so."""
    assert rule.applies(rule.witness), f"{rule.id}: its witness doesn't meet its condition"
    error, warnings = _predicted_ids(predict(rule.witness))
    if rule.kind is Reaction.ERROR:
        assert error == rule.id, f"{rule.id}: predict names {error} for the witness"
    elif rule.kind is Reaction.WARNING:
        assert rule.id in warnings, f"{rule.id}: predict expects warnings {warnings}"
    else:
        assert error is None, f"{rule.id} is accepted, yet predict expects {error}"


def test_rows_follow_zephon_check_order() -> None:
    """predict relies on the rows being grouped by moment, in the order of a pipeline's life."""
    moments = [r.moment for r in ZEPHON_RULES if r.kind is not Reaction.ACCEPTED]
    ranks = [MOMENT_ORDER.index(m) for m in moments if m is not None]
    assert ranks == sorted(ranks), "rows must be ordered by moment"
    assert len(moments) == len(ranks), "error and warning rows need a moment"


def test_ids_are_unique_and_recipe_rules_too() -> None:
    ids = [r.id for r in ZEPHON_RULES] + [r.id for r in RECIPE_RULES]
    assert len(ids) == len(set(ids))


@cache
def _zephon_root() -> Path | None:
    spec = importlib.util.find_spec("zephon")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def _zephon_version() -> str | None:
    root = _zephon_root()
    if root is None:
        return None
    match = re.search(r"__version__ = version = '([^']+)'", (root / "_version.py").read_text())
    return match.group(1) if match else None


def _function_span(tree: ast.Module, qualname: str) -> tuple[int, int] | None:
    nodes: list[ast.AST] = [tree]
    node: ast.AST = tree
    for part in qualname.split("."):
        found = [
            child
            for parent in nodes
            for child in ast.iter_child_nodes(parent)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and child.name == part
        ]
        if not found:
            return None
        node = found[0]
        nodes = [node]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    return node.lineno, node.end_lineno or node.lineno


CITATIONS = [(rule.id, cite) for rule in ZEPHON_RULES for cite in rule.cites]


@pytest.mark.parametrize(
    ("rule_id", "cite"), CITATIONS, ids=[f"{r}-L{c.line}" for r, c in CITATIONS]
)
def test_citation_points_at_zephon_source(rule_id: str, cite: Citation) -> None:
    """The cited line is inside the cited function and says what the row says it does."""
    root = _zephon_root()
    if root is None:
        pytest.skip("zephon is not installed")
    if _zephon_version() != ZEPHON_VERSION:
        pytest.skip(f"citations are for zephon {ZEPHON_VERSION}, found {_zephon_version()}")
    if installed_patches():
        pytest.skip(
            f"citations are for zephon {ZEPHON_VERSION} as released; this one carries "
            f"proposed fixes ({', '.join(sorted(installed_patches()))}) that move its lines"
        )
    source = (root / cite.path).read_text(encoding="utf-8")
    span = _function_span(ast.parse(source), cite.function)
    assert span is not None, f"{rule_id}: no {cite.function} in {cite.path}"
    assert span[0] <= cite.line <= span[1], (
        f"{rule_id}: line {cite.line} is outside {cite.function} (lines {span[0]}-{span[1]})"
    )
    line = source.splitlines()[cite.line - 1]
    assert cite.needle in line, f"{rule_id}: {cite.path}:{cite.line} reads {line.strip()!r}"


def test_doc_matches_rules() -> None:
    """docs/validation.md is rendered from the rule objects; it must not drift from them."""
    expected = render_validation_doc()
    actual = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    assert actual == expected, (
        "docs/validation.md differs from the rules; regenerate it with "
        "`PYTHONPATH=src python -m zephon_chaos.validation.doc docs/validation.md`"
    )


def test_doc_lists_every_row_and_finding() -> None:
    text = render_validation_doc()
    for rule in ZEPHON_RULES:
        assert f"| {rule.id} |" in text
        if rule.finding:
            assert f"- **{rule.id}**" in text
    for recipe_rule in RECIPE_RULES:
        assert f"| {recipe_rule.id} |" in text


# --------------------------------------------------------------------------- predict


@pytest.mark.parametrize(
    ("uri", "verdict"),
    [
        (StoreUri(), "explicit"),
        (StoreUri(scheme="TORCH", path="/"), "explicit"),
        (StoreUri(host="", port=None), "env"),
        (StoreUri(host="", port=None, path="/"), "env"),
        (StoreUri(scheme=None), "scheme"),
        (StoreUri(scheme=""), "scheme"),
        (StoreUri(scheme="redis", path="/x"), "scheme"),
        (StoreUri(userinfo="u@"), "extras"),
        (StoreUri(query="?a=1"), "extras"),
        (StoreUri(fragment="#f", port="abc"), "extras"),
        (StoreUri(port="abc"), "bad_port"),
        (StoreUri(port="-1"), "bad_port"),
        (StoreUri(port="65536", host=""), "bad_port"),
        (StoreUri(port="0", host=""), "zero_port"),
        (StoreUri(port=""), "incomplete"),
        (StoreUri(host="", port=LIVE), "incomplete"),
        (StoreUri(port=None), "incomplete"),
    ],
    ids=str,
)
def test_uri_verdict(uri: StoreUri, verdict: str) -> None:
    assert uri_verdict(uri) == verdict


@pytest.mark.parametrize(
    ("cfg", "error", "warnings"),
    [
        # the first failing check wins; warnings met before it still fire
        (ZephonConfig(extra_options=("foo_bar", "shm_min_size")), "Z01", ()),
        (ZephonConfig(extra_options=("foo_bar", "aggregate_stor")), None, ("Z02", "Z02")),
        (
            ZephonConfig(
                world_size=2,
                canonical_replicas=3,
                aggregate_dir=SCRATCH,
                aggregate_store=StoreUri(),
            ),
            "Z11",
            ("Z10",),
        ),
        (ZephonConfig(aggregate_serializer="pickle", **TWO), "Z17", ()),
        (
            ZephonConfig(aggregate_serializer="pickle", aggregate_store=StoreUri(port="0")),
            "Z15",
            (),
        ),
        (ZephonConfig(world_size=0, aggregate_store=StoreUri(scheme="redis")), "Z06", ()),
        (ZephonConfig(world_size=2, global_rank=-1, canonical_replicas=0), "Z07", ()),
        (ZephonConfig(world_size=3, canonical_replicas=None, aggregate_dir=""), "Z17", ()),
        # torch:// reads MASTER_* only on ranks that take part in rounds
        (ZephonConfig(aggregate_store=StoreUri(host="", port=None)), None, ()),
        (
            ZephonConfig(aggregate_store=StoreUri(host="", port=None), master_port="abc", **TWO),
            "Z20",
            (),
        ),
        (
            ZephonConfig(
                aggregate_store=StoreUri(host="", port=None),
                master_addr="127.0.0.1",
                master_port="70000",
                **TWO,
            ),
            "Z20",
            (),
        ),
        (
            ZephonConfig(
                aggregate_store=StoreUri(host="", port=None),
                master_addr="127.0.0.1",
                master_port="",
                **TWO,
            ),
            "Z21",
            (),
        ),
        (
            ZephonConfig(
                aggregate_store=StoreUri(host="", port=None),
                master_addr="127.0.0.1",
                master_port=DEAD,
                **TWO,
            ),
            "Z22",
            (),
        ),
        (
            ZephonConfig(
                aggregate_store=StoreUri(host="", port=None),
                master_addr="localhost",
                master_port=LIVE,
                **TWO,
            ),
            "Z30",
            (),
        ),
        (
            ZephonConfig(aggregate_store=StoreUri(port=DEAD), aggregate_compressor="gzip", **TWO),
            "Z19",
            (),
        ),
        (ZephonConfig(aggregate_store="", **TWO), "Z17", ()),
        # restores: schema at the call, C when the engine starts, after its own checks
        (ZephonConfig(restore_from="garbage", auto_validation="bogus"), "Z03", ()),
        (ZephonConfig(restore_from=4, auto_validation="bogus"), "Z05", ()),
        (ZephonConfig(restore_from=4, canonical_replicas=6, world_size=7), "Z09", ()),
        (ZephonConfig(restore_from=4, canonical_replicas=None), "Z27", ()),
        (ZephonConfig(restore_from=2, aggregate_dir=SCRATCH, **TWO), None, ("Z28",)),
        (ZephonConfig(restore_from=1, aggregate_dir=SCRATCH, world_size=1), None, ()),
        # checkpoints
        (ZephonConfig(canonical_replicas=4), None, ("Z29",)),
        (ZephonConfig(canonical_replicas=4, checkpoint=False), None, ()),
        (
            ZephonConfig(aggregate_dir=SCRATCH, world_size=2, canonical_replicas=4, global_rank=1),
            "Z30",
            (),
        ),
    ],
    ids=lambda value: value.replay() if isinstance(value, ZephonConfig) else None,
)
def test_predict(cfg: ZephonConfig, error: str | None, warnings: tuple[str, ...]) -> None:
    assert _predicted_ids(predict(cfg)) == (error, warnings)


def test_predict_stops_steps_at_the_error() -> None:
    expectation = predict(RULES_BY_ID["Z05"].witness)
    assert expectation.steps == (Moment.OPTIONS, Moment.ITER)


def test_strategies_reach_every_row_and_stay_cheap() -> None:
    """The generated mix reaches every error and warning row, and slow outcomes stay rare.

    An unreachable store costs up to ~2.7 s and a lone rank's checkpoint one timeout, so
    their share bounds the validation property's run time.
    """
    seen: Counter[str | None] = Counter()
    total = 1000

    @settings(
        max_examples=total,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(zephon_configs())
    def collect(cfg: ZephonConfig) -> None:
        error, warnings = _predicted_ids(predict(cfg))
        seen[error] += 1
        seen.update(warnings)

    collect()
    missing = {r.id for r in ZEPHON_RULES if r.kind is not Reaction.ACCEPTED} - set(seen)
    assert not missing, f"no generated configuration reaches {sorted(missing)}"
    runs = sum(seen[k] for k in seen if k is None or RULES_BY_ID[k].kind is Reaction.ERROR)
    assert seen["Z22"] / runs < 0.05, f"unreachable stores: {seen['Z22']} of {runs}"
    assert seen["Z30"] / runs < 0.15, f"lone-rank checkpoints: {seen['Z30']} of {runs}"
    assert seen[None] / runs > 0.15, f"too few clean runs: {seen[None]} of {runs}"


# --------------------------------------------------------------------------- compare

_Z11 = predict(RULES_BY_ID["Z11"].witness)
_Z29 = predict(RULES_BY_ID["Z29"].witness)
_Z11_ERROR = ObservedError(
    "ValueError", "Set at most one of RuntimeOptions.aggregate_dir and ...", Moment.FIRST_BATCH
)
_MID = ObservedWarning(
    "RuntimeWarning", "[zephon] Checkpoint taken mid-window: ...", Moment.CHECKPOINT
)


@pytest.mark.parametrize(
    ("expected", "observed", "problem"),
    [
        (_Z11, Observation(error=_Z11_ERROR), None),
        (_Z11, Observation(), "raised nothing"),
        (
            _Z11,
            Observation(
                error=ObservedError("RuntimeError", _Z11_ERROR.message, Moment.FIRST_BATCH)
            ),
            "expected ValueError",
        ),
        (
            _Z11,
            Observation(error=ObservedError("ValueError", "other", Moment.FIRST_BATCH)),
            "message lacks",
        ),
        (
            _Z11,
            Observation(error=ObservedError("ValueError", _Z11_ERROR.message, Moment.OPTIONS)),
            "surfaced at options",
        ),
        (_Z29, Observation(warnings=[_MID]), None),
        (_Z29, Observation(), "expected 1 warning(s) at checkpoint, saw 0"),
        (_Z29, Observation(warnings=[_MID, _MID]), "expected 1 warning(s) at checkpoint, saw 2"),
        (
            _Z29,
            Observation(
                warnings=[_MID, ObservedWarning("UserWarning", "[zephon] new", Moment.ITER)]
            ),
            "no row covers",
        ),
        (
            _Z29,
            Observation(
                warnings=[_MID, ObservedWarning("DeprecationWarning", "torch thing", Moment.ITER)]
            ),
            None,
        ),
        (_Z29, Observation(error=_Z11_ERROR, warnings=[_MID]), "unexpected ValueError"),
        (_Z29, Observation(hung_at=Moment.CHECKPOINT, budget_s=3.0), "no outcome at checkpoint"),
    ],
)
def test_compare(expected: Expectation, observed: Observation, problem: str | None) -> None:
    problems = compare(expected, observed)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems
