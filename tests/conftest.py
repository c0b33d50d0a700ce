"""This suite's ``gpu`` tests are the plugin's GPU tier: marked ``chaos_gpu`` too, they skip,
saying why, where CUDA is missing, and the session summary counts them (``tox -e gpu``).

The plugin leaves a project's own ``gpu`` marker alone; this project gives its marker that
meaning here, as a recipe's repository could. A test marked ``zephon_defect(NAME)`` asserts
that defect's shape (a known-defect matcher, a reproduction's evidence): under a zephon built
with NAME's proposed fix it becomes a strict xfail, so `tox -e patched` fails on the named
flips alone.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.patched import installed_patches


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(pytest.mark.chaos_gpu)
        pinned = item.get_closest_marker("zephon_defect")
        if pinned is not None and pinned.args[0] in installed_patches():
            # It asserts the defect's shape, which the installed wheel's patch removes: a
            # named flip, like the defect's strict xfails (tox -e patched).
            item.add_marker(
                pytest.mark.xfail(
                    strict=True,
                    reason=f"pins Zephon defect {pinned.args[0]}, which this zephon's patch fixes",
                )
            )


@pytest.fixture
def sigint_heard() -> Iterator[None]:
    """SIGINT as an interactive session has it, for the test and the processes it starts.

    A job started in the background of a non-interactive shell (``cmd &``, ``nohup``) has
    SIGINT ignored, and that survives exec: the interrupt guard then rightly leaves SIGINT
    alone, and a test of what SIGINT does would see nothing. Python's handler in the test's
    process is reset to the default by exec, so a session it starts hears SIGINT too."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
