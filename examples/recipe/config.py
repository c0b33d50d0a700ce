"""The recipe's loader config: validated when it is built, so mistakes fail before model setup.

Zephon reports most configuration errors only at the first ``next()`` of a pipeline (see
``docs/validation.md``, table (a)); by then a training script has built its model and
perhaps joined a process group. This config refuses the same mistakes at construction and
hands Zephon a consistent set of options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

ENV_AGGREGATE_DIR = "ZEPHON_AGGREGATE_DIR"
"""Supplies ``aggregate_dir`` when neither ``aggregate_store`` nor ``aggregate_dir`` is set."""

TOML_TABLE = "loader"
"""Recipes may nest the fields in a ``[loader]`` table or write them at the top level."""


@dataclass(frozen=True)
class LoaderConfig:
    """Where and how the loader aggregates checkpoints, and the rank's place in the world."""

    run_id: str | None = None
    aggregate_store: str | None = None
    aggregate_dir: str | None = None
    world_size: int = 1
    global_rank: int = 0
    canonical_replicas: int | None = None
    aggregate_timeout_s: float = 180.0

    def __post_init__(self) -> None:
        # Empty strings come from TOML and environment defaults; they mean "unset".
        for name in ("run_id", "aggregate_store", "aggregate_dir"):
            if getattr(self, name) == "":
                object.__setattr__(self, name, None)
        if self.aggregate_store is None and self.aggregate_dir is None:
            env_dir = os.environ.get(ENV_AGGREGATE_DIR) or None
            object.__setattr__(self, "aggregate_dir", env_dir)
        self._check_world()
        self._check_aggregate_choice()
        self._check_distributed()

    # ------------------------------------------------------------------ validation

    def _check_world(self) -> None:
        for name in ("world_size", "global_rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if self.world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.global_rank < self.world_size:
            raise ValueError(
                f"global_rank must be in [0, world_size={self.world_size}), got {self.global_rank}"
            )
        c = self.canonical_replicas
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
            raise ValueError(f"canonical_replicas must be a positive int, got {c!r}")
        if c is not None and c < self.world_size:
            raise ValueError(
                f"canonical_replicas={c} is below world_size={self.world_size}: every rank "
                "needs at least one lane; raise canonical_replicas (keep it fixed across "
                "restarts) or run on fewer ranks"
            )
        if self.aggregate_timeout_s <= 0:
            raise ValueError(
                f"aggregate_timeout_s must be positive, got {self.aggregate_timeout_s}"
            )

    def _check_aggregate_choice(self) -> None:
        if self.aggregate_store is not None and self.aggregate_dir is not None:
            raise ValueError(
                f"aggregate_store={self.aggregate_store!r} and "
                f"aggregate_dir={self.aggregate_dir!r} are both set; set exactly one: "
                "aggregate_store for a key-value store (torch:// under torchrun), or "
                "aggregate_dir for a directory every rank shares"
            )

    def _check_distributed(self) -> None:
        if self.world_size == 1:
            return
        if self.run_id is None:
            raise ValueError(
                f"world_size={self.world_size} needs a run_id: checkpoint rounds of runs "
                "sharing one store or directory must not mix; set run_id in the recipe "
                "or ZEPHON_RUN_ID"
            )
        if self.aggregate_store is None and self.aggregate_dir is None:
            raise ValueError(
                f"world_size={self.world_size} needs one of aggregate_store or "
                f"aggregate_dir (or {ENV_AGGREGATE_DIR} in the environment): ranks merge "
                "their checkpoint state through it"
            )

    # ------------------------------------------------------------------ sources

    @classmethod
    def from_toml(cls, source: str | os.PathLike[str]) -> LoaderConfig:
        """Load from a TOML file path or TOML text (a ``str`` containing ``=`` is text)."""
        if isinstance(source, os.PathLike) or "=" not in source:
            text = Path(source).read_text(encoding="utf-8")
        else:
            text = source
        data: Mapping[str, Any] = _toml.loads(text)
        if TOML_TABLE in data and isinstance(data[TOML_TABLE], Mapping):
            data = data[TOML_TABLE]
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown loader setting(s) {unknown} in the TOML recipe; known: {sorted(known)}"
            )
        return cls(**data)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LoaderConfig:
        """Build from torchrun's and the cluster's variables; ``overrides`` win."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {
            "run_id": env.get("ZEPHON_RUN_ID"),
            "aggregate_store": env.get("ZEPHON_AGGREGATE_STORE"),
            "aggregate_dir": env.get(ENV_AGGREGATE_DIR),
            "world_size": _env_int(env, "WORLD_SIZE", 1),
            "global_rank": _env_int(env, "RANK", 0),
            "canonical_replicas": _env_int(env, "ZEPHON_CANONICAL_REPLICAS", None),
        }
        values.update(overrides)
        if values.get("aggregate_store") and "aggregate_dir" not in overrides:
            # The store was chosen explicitly; the exported directory is only a default.
            values["aggregate_dir"] = None
        return cls(**values)

    # ------------------------------------------------------------------ output

    def to_zephon_options(self) -> dict[str, Any]:
        """Keyword arguments for ``Pipeline.options(...)``."""
        options: dict[str, Any] = {
            "world_size": self.world_size,
            "global_rank": self.global_rank,
            "aggregate_timeout_s": self.aggregate_timeout_s,
        }
        if self.run_id is not None:
            options["run_id"] = self.run_id
        if self.canonical_replicas is not None:
            options["canonical_replicas"] = self.canonical_replicas
        if self.aggregate_store is not None:
            options["aggregate_store"] = self.aggregate_store
        elif self.aggregate_dir is not None:
            options["aggregate_dir"] = self.aggregate_dir
        return options


def _env_int(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
