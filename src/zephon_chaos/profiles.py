"""Hypothesis profiles: ``ci`` (derandomized, small), ``deep`` (many, randomized), ``replay``.

Registered on import, loaded only when asked: ``--chaos-profile``, else ZEPHON_CHAOS_PROFILE,
else the ``chaos_profile`` ini setting (this repository's own pyproject asks for ``ci``).
Without any, the session keeps the profile its project loaded. Every property of a session
that asks inherits the profile: one flag widens or narrows a search.
"""

from __future__ import annotations

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


def load_profile(name: str) -> str:
    """Load the profile ``name`` and return it."""
    if name not in PROFILES:
        raise ValueError(
            f"unknown Hypothesis profile {name!r}; choose one of {', '.join(PROFILES)}"
        )
    settings.load_profile(name)
    return name
