"""A reusable test set for a recipe's loader-config adapter: one pytest test per rule of table (b).

Subclass :class:`RecipeConfigContract` in a test module under a ``Test*`` name and define
``make_config``; pytest collects ``test_rule[R1-...]`` ... ``test_rule[R11-...]`` from it::

    from zephon_chaos.contract import RecipeConfigContract

    class TestMyLoaderConfig(RecipeConfigContract):
        def make_config(self, **fields):
            return MyLoaderConfig(**fields)

        def from_toml(self, text):          # optional: the TOML rules skip without it
            return MyLoaderConfig.from_toml(text)

A failing test names its rule, e.g. ``rule R3 'both aggregate_store and aggregate_dir →
ValueError at configuration' violated: the config accepted both: ...``. Only pytest's own
``monkeypatch`` fixture is used, so the kit works without the zephon-chaos plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from zephon_chaos.validation.recipe_rules import (
    RECIPE_RULES,
    RecipeRule,
    RuleNotApplicable,
    RuleViolation,
)

__all__ = ["RECIPE_RULES", "RecipeConfigContract"]


class RecipeConfigContract:
    """Base class of a recipe config's contract tests; override the hooks that differ.

    ``make_config(**fields)`` receives ``run_id``, ``world_size``, ``global_rank``,
    ``aggregate_store`` and ``aggregate_dir`` (only those a rule sets). Configs are read
    through ``zephon_options(config)``, by default ``config.to_zephon_options()``.
    """

    store_uri: str = "torch://127.0.0.1:29500"
    """An ``aggregate_store`` value the rules configure (never connected to)."""
    shared_dir: str = "/shared/zephon-aggregate"
    """An ``aggregate_dir`` value the rules configure (never created)."""
    run_id: str = "contract-run"
    aggregate_dir_env: str = "ZEPHON_AGGREGATE_DIR"

    def make_config(self, **fields: Any) -> Any:
        raise NotImplementedError(
            f"{type(self).__name__} must define make_config(**fields) returning the "
            "recipe's loader config built from those fields"
        )

    def from_toml(self, text: str) -> Any:
        """Load a config from TOML text; not defined by default (TOML rules then skip)."""
        raise NotImplementedError

    def toml_recipe(self, **fields: Any) -> str:
        """TOML text for ``fields``; override when the recipe nests them in a table."""
        return "".join(f"{key} = {_toml_value(value)}\n" for key, value in fields.items())

    def zephon_options(self, config: Any) -> Mapping[str, Any]:
        return config.to_zephon_options()

    @pytest.mark.parametrize("rule", RECIPE_RULES, ids=[r.test_id for r in RECIPE_RULES])
    def test_rule(self, rule: RecipeRule, monkeypatch: pytest.MonkeyPatch) -> None:
        check_rule(self, rule, monkeypatch)


def check_rule(adapter: Any, rule: RecipeRule, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run one rule against ``adapter``, turning its outcome into a pytest outcome.

    Outcomes are reported outside the ``except`` blocks so that the report is the rule's
    message alone, without the chain of exceptions that led to it.
    """
    skipped: str | None = None
    failed: str | None = None
    try:
        rule.check(adapter, monkeypatch)
    except RuleNotApplicable as exc:
        skipped = f"rule {rule.id} '{rule.title}' not checked: {exc}"
    except RuleViolation as exc:
        cause = exc.__cause__
        if isinstance(cause, NotImplementedError) and "make_config" in str(cause):
            failed = str(cause)
        else:
            failed = (
                f"rule {rule.id} '{rule.title}' violated: {exc}\n"
                f"expected at {rule.moment}: {rule.expected} ({rule.why})"
            )
    if skipped is not None:
        pytest.skip(skipped)
    if failed is not None:
        pytest.fail(failed, pytrace=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'
