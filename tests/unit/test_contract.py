"""The recipe contract kit: the example recipe passes it, broken adapters fail by rule name.

The broken and partial adapters run in an inner pytest session (``pytester``), the way a
downstream project would run the kit, so the assertions are on what its users read.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from examples.recipe.config import ENV_AGGREGATE_DIR, LoaderConfig
from zephon_chaos.contract import RecipeConfigContract
from zephon_chaos.validation.recipe_rules import RECIPE_RULES

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
N_RULES = len(RECIPE_RULES)
STORE = "torch://127.0.0.1:29500"


class TestLoaderConfigContract(RecipeConfigContract):
    """The example recipe's config meets every rule of table (b)."""

    def make_config(self, **fields: Any) -> LoaderConfig:
        return LoaderConfig(**fields)

    def from_toml(self, text: str) -> LoaderConfig:
        return LoaderConfig.from_toml(text)


# --------------------------------------------------------------------------- the kit itself

_HEADER = """
from zephon_chaos.contract import RecipeConfigContract
from examples.recipe.broken_config import BrokenLoaderConfig
from examples.recipe.config import LoaderConfig
"""

ADAPTERS = {
    "broken-accepts-both": (
        """
        class TestBroken(RecipeConfigContract):
            def make_config(self, **fields):
                return BrokenLoaderConfig(**fields)

            def from_toml(self, text):
                return BrokenLoaderConfig.from_toml(text)
        """,
        {"passed": N_RULES - 2, "failed": 2},
        [
            "*rule R3 'both aggregate_store and aggregate_dir → ValueError at configuration'"
            " violated: the config accepted both: make_config(*",
            "*rule R10 'a TOML recipe with both * → ValueError at load' violated:*",
        ],
    ),
    "no-toml-loader": (
        """
        class TestNoToml(RecipeConfigContract):
            def make_config(self, **fields):
                return LoaderConfig(**fields)
        """,
        {"passed": N_RULES - 2, "skipped": 2},
        ["*SKIPPED*rule R9 * not checked: the adapter defines no from_toml(text)*"],
    ),
    "no-make-config": (
        """
        class TestNothing(RecipeConfigContract):
            pass
        """,
        {"failed": N_RULES - 2, "skipped": 2},
        ["*TestNothing must define make_config(**fields)*"],
    ),
}


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_kit_reports_adapter_by_rule(pytester: pytest.Pytester, name: str) -> None:
    """Run an adapter through the kit in a fresh session; check outcomes and messages."""
    body, outcomes, lines = ADAPTERS[name]
    pytester.syspathinsert(REPO)
    pytester.makepyfile(**{f"test_{name.replace('-', '_')}": _HEADER + textwrap.dedent(body)})
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs", "-q")
    result.assert_outcomes(**outcomes)
    result.stdout.fnmatch_lines(lines)


def test_every_rule_is_collected_once_per_adapter(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(REPO)
    pytester.makepyfile(test_ids=_HEADER + textwrap.dedent(ADAPTERS["no-toml-loader"][0]))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"*test_rule[[]{rule.test_id}[]]*" for rule in RECIPE_RULES])


# --------------------------------------------------------------------------- the example recipe


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"world_size": 0}, "world_size must be >= 1"),
        ({"world_size": 2, "global_rank": 2}, "global_rank must be in [0, world_size=2)"),
        ({"world_size": "2"}, "world_size must be an int"),
        ({"canonical_replicas": 0}, "canonical_replicas must be a positive int"),
        (
            {"world_size": 4, "canonical_replicas": 2, "run_id": "r", "aggregate_store": STORE},
            "canonical_replicas=2 is below world_size=4",
        ),
        ({"aggregate_timeout_s": 0}, "aggregate_timeout_s must be positive"),
        ({"aggregate_store": STORE, "aggregate_dir": "/d"}, "set exactly one"),
        ({"world_size": 2, "aggregate_store": STORE}, "needs a run_id"),
        ({"world_size": 2, "run_id": "r"}, f"or {ENV_AGGREGATE_DIR} in the environment"),
    ],
    ids=lambda v: "-".join(f"{k}={v[k]}" for k in v) if isinstance(v, dict) else None,
)
def test_loader_config_refuses_at_construction(
    fields: dict[str, Any], fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_AGGREGATE_DIR, raising=False)
    with pytest.raises(ValueError) as excinfo:
        LoaderConfig(**fields)
    assert fragment in str(excinfo.value)


TOML_CASES = {
    "top-level": f'run_id = "r"\nworld_size = 2\naggregate_store = "{STORE}"\n',
    "loader-table": f'[loader]\nrun_id = "r"\nworld_size = 2\naggregate_store = "{STORE}"\n',
    "with-other-tables": (
        f'[training]\nsteps = 10\n[loader]\nrun_id = "r"\nworld_size = 2\n'
        f'aggregate_store = "{STORE}"\n'
    ),
}


@pytest.mark.parametrize("as_path", [False, True], ids=["text", "path"])
@pytest.mark.parametrize("name", list(TOML_CASES))
def test_from_toml_reads_text_and_files(
    name: str, as_path: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_AGGREGATE_DIR, raising=False)
    text = TOML_CASES[name]
    source: str | Path = text
    if as_path:
        source = tmp_path / "recipe.toml"
        source.write_text(text)
    config = LoaderConfig.from_toml(source)
    assert config.to_zephon_options() == {
        "world_size": 2,
        "global_rank": 0,
        "aggregate_timeout_s": 180.0,
        "run_id": "r",
        "aggregate_store": STORE,
    }


def test_from_toml_names_unknown_settings() -> None:
    with pytest.raises(ValueError, match=r"unknown loader setting\(s\) \['aggregate_stor'\]"):
        LoaderConfig.from_toml('aggregate_stor = "torch://"\n')


@pytest.mark.parametrize(
    ("environ", "overrides", "expected"),
    [
        ({}, {}, {"world_size": 1, "global_rank": 0}),
        (
            {
                "WORLD_SIZE": "4",
                "RANK": "3",
                "ZEPHON_RUN_ID": "r",
                ENV_AGGREGATE_DIR: "/d",
                "ZEPHON_CANONICAL_REPLICAS": "8",
            },
            {},
            {
                "world_size": 4,
                "global_rank": 3,
                "run_id": "r",
                "aggregate_dir": "/d",
                "canonical_replicas": 8,
            },
        ),
        (
            {
                "WORLD_SIZE": "2",
                "ZEPHON_RUN_ID": "r",
                ENV_AGGREGATE_DIR: "/d",
                "ZEPHON_AGGREGATE_STORE": STORE,
            },
            {},
            {"world_size": 2, "global_rank": 0, "run_id": "r", "aggregate_store": STORE},
        ),
        (
            {"WORLD_SIZE": "2", "ZEPHON_RUN_ID": "r", ENV_AGGREGATE_DIR: "/d"},
            {"aggregate_store": STORE},
            {"world_size": 2, "global_rank": 0, "run_id": "r", "aggregate_store": STORE},
        ),
    ],
    ids=["empty", "torchrun-with-dir", "store-beats-dir", "override-store"],
)
def test_from_env(
    environ: dict[str, str],
    overrides: dict[str, Any],
    expected: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_AGGREGATE_DIR, raising=False)
    options = LoaderConfig.from_env(environ, **overrides).to_zephon_options()
    assert options == {**expected, "aggregate_timeout_s": 180.0}


def test_from_env_names_a_bad_integer() -> None:
    with pytest.raises(ValueError, match=r"WORLD_SIZE='two' is not an integer"):
        LoaderConfig.from_env({"WORLD_SIZE": "two"})
