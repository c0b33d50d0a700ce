"""A deliberately broken adapter: it accepts both aggregate_store and aggregate_dir.

It forwards both to Zephon, which refuses them only at the first ``next()`` (table (a),
Z11), after the training script has set everything else up. The contract kit must flag it
under rules R3 and R10; every other rule passes, so the failure points at this one mistake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from examples.recipe.config import LoaderConfig


@dataclass(frozen=True)
class BrokenLoaderConfig(LoaderConfig):
    """``LoaderConfig`` without the both-set check."""

    def _check_aggregate_choice(self) -> None:
        """The planted defect: both locations pass silently."""

    def to_zephon_options(self) -> dict[str, Any]:
        options = super().to_zephon_options()
        if self.aggregate_dir is not None:
            options["aggregate_dir"] = self.aggregate_dir
        return options
