"""Hypothesis profiles: ``ci`` (derandomized, small), ``deep`` (many, randomized), ``replay``.

Chosen with ``--chaos-profile`` (or ZEPHON_CHAOS_PROFILE); the default is ``ci``. Every
property in the suite and in downstream tests inherits it: one flag widens or narrows a search.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILES = ("ci", "deep", "replay")

_SEARCH = {
    "deadline": None,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("ci", max_examples=25, derandomize=True, database=None, **_SEARCH)
settings.register_profile("deep", max_examples=500, derandomize=False, **_SEARCH)
settings.register_profile(
    "replay",
    max_examples=1,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    phases=[Phase.explicit, Phase.reuse],
    suppress_health_check=list(HealthCheck),
)


def load_profile(name: str | None) -> str:
    """Load ``name`` (or the default for this environment) and return it."""
    chosen = name or os.environ.get("ZEPHON_CHAOS_PROFILE") or "ci"
    if chosen not in PROFILES:
        raise ValueError(
            f"unknown Hypothesis profile {chosen!r}; choose one of {', '.join(PROFILES)}"
        )
    settings.load_profile(chosen)
    return chosen
