"""Hooks this plugin adds to pytest (``pytest_addhooks``), as pytest-xdist's ``newhooks``.

A downstream's ``conftest.py`` (or plugin) implements them to change how the fixtures work
without forking them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from zephon_chaos.fixtures.groups import GroupFactory
    from zephon_chaos.launch.warm import Launcher


@pytest.hookspec(firstresult=True)
def pytest_zephon_chaos_make_launcher(
    request: pytest.FixtureRequest, groups: GroupFactory
) -> Launcher | None:
    """The launcher (``LaunchSpec -> GroupResult``) that runs the torchrun launches of a
    test's scenarios (``resume_check``) and recipes (``recipe_run``: the recipe script, its
    world size and the contract's environment), or None to leave the choice to the next
    implementation. ``groups`` is the test's ``torchrun_group`` fixture. The first answer
    wins; this plugin's own answers last, by ``--chaos-launch``: ``cli``
    (``groups.run_spec``) or ``warm``. A launcher of your own (one that submits to a cluster
    scheduler, say) must return the same ``GroupResult``: its ranks' exits, records and
    first failure are what the oracles judge."""
