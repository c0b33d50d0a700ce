"""Table (b): what a recipe's loader-config adapter promises, as executable checks.

Downstream recipes (TorchTitan-style) document: a distributed run needs a ``run_id`` and
exactly one of ``aggregate_store``/``aggregate_dir``; setting both is a ``ValueError`` when
the config is built, not later; ``ZEPHON_AGGREGATE_DIR`` supplies ``aggregate_dir`` when
neither is configured; TOML recipes accept ``aggregate_store``. Zephon itself reports a
both-set configuration only at the first ``next()`` (table (a), Z11), after model setup,
which is why the adapter must refuse it at construction.

Each :class:`RecipeRule` checks one promise through a :class:`RecipeAdapter` (in practice
a :class:`zephon_chaos.contract.RecipeConfigContract` subclass) and raises
:class:`RuleViolation` with the evidence. Nothing here imports pytest, torch or Zephon.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from zephon_chaos.errors import ChaosError, Violation


class RuleViolation(Violation, AssertionError):
    """The adapter broke a rule; the message says how, with the config involved."""


class RuleNotApplicable(ChaosError):
    """The adapter doesn't offer what the rule needs (e.g. no TOML loader)."""


class RecipeAdapter(Protocol):
    """What a rule needs from a recipe: build configs, load TOML, read Zephon options.

    ``make_config`` receives the contract's field names (``run_id``, ``world_size``,
    ``global_rank``, ``aggregate_store``, ``aggregate_dir``); an adapter whose config uses
    other names maps them.
    """

    store_uri: str
    shared_dir: str
    run_id: str
    aggregate_dir_env: str

    def make_config(self, **fields: Any) -> Any: ...

    def from_toml(self, text: str) -> Any: ...

    def toml_recipe(self, **fields: Any) -> str: ...

    def zephon_options(self, config: Any) -> Mapping[str, Any]: ...


class EnvPatch(Protocol):
    """The part of pytest's ``monkeypatch`` the rules use."""

    def setenv(self, name: str, value: str, prepend: str | None = None) -> None: ...

    def delenv(self, name: str, raising: bool = True) -> None: ...


Check = Callable[[RecipeAdapter, EnvPatch], None]


@dataclass(frozen=True)
class RecipeRule:
    """One row of table (b)."""

    id: str
    slug: str
    title: str
    expected: str
    moment: str
    why: str
    check: Check

    @property
    def test_id(self) -> str:
        return f"{self.id}-{self.slug}"


# --------------------------------------------------------------------------- helpers


def _fields(adapter: RecipeAdapter, *, distributed: bool, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"world_size": 2, "global_rank": 0, "run_id": adapter.run_id}
    if not distributed:
        base = {"world_size": 1, "global_rank": 0}
    base.update(extra)
    return base


def _call(what: str, build: Callable[[], Any]) -> Any:
    """Run ``build``; report an unexpected exception as the violation it is."""
    try:
        return build()
    except (RuleViolation, RuleNotApplicable):
        raise
    except Exception as exc:
        raise RuleViolation(f"{what} raised {type(exc).__name__}: {exc}") from exc


def _build(adapter: RecipeAdapter, **fields: Any) -> Any:
    return _call(f"make_config({_kw(fields)})", lambda: adapter.make_config(**fields))


def _options(adapter: RecipeAdapter, config: Any) -> Mapping[str, Any]:
    return _call(f"to_zephon_options() of {config!r}", lambda: adapter.zephon_options(config))


def _kw(fields: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in fields.items())


def _refused(
    adapter: RecipeAdapter,
    what: str,
    build: Callable[[], Any],
    *,
    names: tuple[str, ...],
    accepted: str,
) -> None:
    """Expect ``build`` to raise ValueError naming ``names``; else say how it failed."""
    try:
        config = build()
    except ValueError as exc:
        missing = [name for name in names if name not in str(exc)]
        if missing:
            raise RuleViolation(
                f"{what} raised ValueError, but its message doesn't name "
                f"{', '.join(missing)}, so the user can't tell what to change: {exc}"
            ) from exc
        return
    except RuleNotApplicable:
        raise
    except Exception as exc:
        raise RuleViolation(
            f"{what} raised {type(exc).__name__} instead of ValueError: {exc}"
        ) from exc
    try:
        adapter.zephon_options(config)
    except ValueError as exc:
        raise RuleViolation(
            f"{accepted} when it was built; the ValueError came only later, from "
            f"to_zephon_options ({exc}): {what} returned {config!r}"
        ) from exc
    raise RuleViolation(f"{accepted}: {what} returned {config!r}")


def _isolate(adapter: RecipeAdapter, env: EnvPatch) -> None:
    """A CI machine's own ZEPHON_AGGREGATE_DIR must not decide a rule's outcome."""
    env.delenv(adapter.aggregate_dir_env, raising=False)


def _expect_choice(
    options: Mapping[str, Any], *, store: str | None, directory: str | None, what: str
) -> None:
    got_store, got_dir = (
        options.get("aggregate_store") or None,
        options.get("aggregate_dir") or None,
    )
    if (got_store, got_dir) != (store, directory):
        raise RuleViolation(
            f"{what}: Zephon would get aggregate_store={got_store!r}, "
            f"aggregate_dir={got_dir!r}; expected aggregate_store={store!r}, "
            f"aggregate_dir={directory!r} (options: {dict(options)!r})"
        )


# --------------------------------------------------------------------------- the checks


def _single_process_needs_nothing(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _isolate(adapter, env)
    fields = _fields(adapter, distributed=False)
    config = _build(adapter, **fields)
    _options(adapter, config)


def _run_id_required(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _isolate(adapter, env)
    fields = _fields(adapter, distributed=True, aggregate_store=adapter.store_uri)
    del fields["run_id"]
    _refused(
        adapter,
        f"make_config({_kw(fields)})",
        lambda: adapter.make_config(**fields),
        names=("run_id",),
        accepted="the config accepted a distributed run without run_id",
    )


def _both_refused(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _isolate(adapter, env)
    for distributed in (True, False):
        fields = _fields(
            adapter,
            distributed=distributed,
            aggregate_store=adapter.store_uri,
            aggregate_dir=adapter.shared_dir,
        )
        _refused(
            adapter,
            f"make_config({_kw(fields)})",
            lambda fields=fields: adapter.make_config(**fields),
            names=("aggregate_store", "aggregate_dir"),
            accepted="the config accepted both",
        )


def _neither_refused(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _isolate(adapter, env)
    fields = _fields(adapter, distributed=True)
    _refused(
        adapter,
        f"make_config({_kw(fields)}) with {adapter.aggregate_dir_env} unset",
        lambda: adapter.make_config(**fields),
        names=("aggregate_store", "aggregate_dir"),
        accepted="the config accepted a distributed run with neither",
    )


def _env_supplies_dir(adapter: RecipeAdapter, env: EnvPatch) -> None:
    env.setenv(adapter.aggregate_dir_env, adapter.shared_dir)
    fields = _fields(adapter, distributed=True)
    config = _build(adapter, **fields)
    _expect_choice(
        _options(adapter, config),
        store=None,
        directory=adapter.shared_dir,
        what=f"with {adapter.aggregate_dir_env}={adapter.shared_dir!r} and neither configured",
    )


def _env_yields_to_store(adapter: RecipeAdapter, env: EnvPatch) -> None:
    env.setenv(adapter.aggregate_dir_env, adapter.shared_dir)
    fields = _fields(adapter, distributed=True, aggregate_store=adapter.store_uri)
    config = _build(adapter, **fields)
    _expect_choice(
        _options(adapter, config),
        store=adapter.store_uri,
        directory=None,
        what=f"with {adapter.aggregate_dir_env} set and aggregate_store configured",
    )


def _passes_through(adapter: RecipeAdapter, env: EnvPatch, *, use_store: bool) -> None:
    _isolate(adapter, env)
    choice = (
        {"aggregate_store": adapter.store_uri}
        if use_store
        else {"aggregate_dir": adapter.shared_dir}
    )
    fields = _fields(adapter, distributed=True, **choice)
    options = _options(adapter, _build(adapter, **fields))
    _expect_choice(
        options,
        store=choice.get("aggregate_store"),
        directory=choice.get("aggregate_dir"),
        what=f"make_config({_kw(fields)})",
    )
    for name in ("run_id", "world_size", "global_rank"):
        if options.get(name) != fields[name]:
            raise RuleViolation(
                f"make_config({_kw(fields)}) hands Zephon {name}={options.get(name)!r}, "
                f"expected {fields[name]!r} (options: {dict(options)!r})"
            )


def _store_passes_through(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _passes_through(adapter, env, use_store=True)


def _dir_passes_through(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _passes_through(adapter, env, use_store=False)


def _load_toml(adapter: RecipeAdapter, text: str) -> Any:
    try:
        return adapter.from_toml(text)
    except NotImplementedError as exc:
        raise RuleNotApplicable("the adapter defines no from_toml(text)") from exc


def _toml_accepts_store(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _isolate(adapter, env)
    text = adapter.toml_recipe(
        **_fields(adapter, distributed=True, aggregate_store=adapter.store_uri)
    )
    config = _call(f"from_toml({text!r})", lambda: _load_toml(adapter, text))
    _expect_choice(
        _options(adapter, config),
        store=adapter.store_uri,
        directory=None,
        what=f"from_toml({text!r})",
    )


def _toml_both_refused(adapter: RecipeAdapter, env: EnvPatch) -> None:
    _isolate(adapter, env)
    text = adapter.toml_recipe(
        **_fields(
            adapter,
            distributed=True,
            aggregate_store=adapter.store_uri,
            aggregate_dir=adapter.shared_dir,
        )
    )
    _refused(
        adapter,
        f"from_toml({text!r})",
        lambda: _load_toml(adapter, text),
        names=("aggregate_store", "aggregate_dir"),
        accepted="the TOML recipe with both was accepted",
    )


def _options_known_to_zephon(adapter: RecipeAdapter, env: EnvPatch) -> None:
    try:
        from dataclasses import fields as dataclass_fields

        from zephon.options import RuntimeOptions
    except ImportError as exc:
        raise RuleNotApplicable(f"zephon isn't importable here ({exc})") from exc
    known = {f.name for f in dataclass_fields(RuntimeOptions)}
    _isolate(adapter, env)
    for choice in ({"aggregate_store": adapter.store_uri}, {"aggregate_dir": adapter.shared_dir}):
        fields = _fields(adapter, distributed=True, **choice)
        options = _options(adapter, _build(adapter, **fields))
        unknown = sorted(set(options) - known)
        if unknown:
            raise RuleViolation(
                f"make_config({_kw(fields)}) hands Zephon option(s) {unknown} that "
                "RuntimeOptions doesn't define; Zephon only warns and drops them (Z02)"
            )


RECIPE_RULES: tuple[RecipeRule, ...] = (
    RecipeRule(
        id="R1",
        slug="single-process-needs-nothing",
        title="world_size = 1 needs neither run_id nor an aggregate location",
        expected="constructs; options accepted",
        moment="construction",
        why="one rank checkpoints locally (Zephon table (a) Z23); over-strict adapters "
        "break single-GPU debugging",
        check=_single_process_needs_nothing,
    ),
    RecipeRule(
        id="R2",
        slug="run-id-required",
        title="world_size > 1 without run_id → ValueError at configuration",
        expected="ValueError naming run_id",
        moment="construction",
        why="rounds of different runs sharing one store or directory must not mix",
        check=_run_id_required,
    ),
    RecipeRule(
        id="R3",
        slug="both-refused",
        title="both aggregate_store and aggregate_dir → ValueError at configuration",
        expected="ValueError naming both fields, for world_size 1 and 2",
        moment="construction",
        why="Zephon refuses it only at the first next() (Z11), after model setup",
        check=_both_refused,
    ),
    RecipeRule(
        id="R4",
        slug="neither-refused",
        title="world_size > 1 with neither aggregate_store nor aggregate_dir → ValueError "
        "at configuration",
        expected="ValueError naming both fields",
        moment="construction",
        why="Zephon refuses it only at the first next() (Z17), as a RuntimeError",
        check=_neither_refused,
    ),
    RecipeRule(
        id="R5",
        slug="env-supplies-dir",
        title="ZEPHON_AGGREGATE_DIR supplies aggregate_dir when neither is configured",
        expected="aggregate_dir = the variable's value",
        moment="to_zephon_options",
        why="documented by recipes: cluster launchers export the shared directory",
        check=_env_supplies_dir,
    ),
    RecipeRule(
        id="R6",
        slug="env-yields-to-store",
        title="ZEPHON_AGGREGATE_DIR doesn't override or conflict with a configured aggregate_store",
        expected="aggregate_store only; no ValueError",
        moment="to_zephon_options",
        why="an exported default must not turn a valid recipe into a both-set one",
        check=_env_yields_to_store,
    ),
    RecipeRule(
        id="R7",
        slug="store-passes-through",
        title="a configured aggregate_store reaches Zephon alone, with run_id and the world",
        expected="aggregate_store, run_id, world_size, global_rank as given",
        moment="to_zephon_options",
        why="exactly one of the two reaches Zephon",
        check=_store_passes_through,
    ),
    RecipeRule(
        id="R8",
        slug="dir-passes-through",
        title="a configured aggregate_dir reaches Zephon alone, with run_id and the world",
        expected="aggregate_dir, run_id, world_size, global_rank as given",
        moment="to_zephon_options",
        why="exactly one of the two reaches Zephon",
        check=_dir_passes_through,
    ),
    RecipeRule(
        id="R9",
        slug="toml-accepts-store",
        title="TOML recipes accept aggregate_store",
        expected="aggregate_store from the TOML reaches Zephon",
        moment="from_toml",
        why="documented by recipes; skipped when the adapter has no TOML loader",
        check=_toml_accepts_store,
    ),
    RecipeRule(
        id="R10",
        slug="toml-both-refused",
        title="a TOML recipe with both aggregate_store and aggregate_dir → ValueError at load",
        expected="ValueError naming both fields",
        moment="from_toml",
        why="the same rule as R3, through the loader recipes actually use",
        check=_toml_both_refused,
    ),
    RecipeRule(
        id="R11",
        slug="options-known-to-zephon",
        title="every option handed to Zephon is a RuntimeOptions field",
        expected="no unknown option names",
        moment="to_zephon_options",
        why="Zephon only warns on an unknown name and drops it (Z02)",
        check=_options_known_to_zephon,
    ),
)
