"""This suite's ``gpu`` tests are the plugin's GPU tier: marked ``chaos_gpu`` too, they skip,
saying why, where CUDA is missing, and the session summary counts them (``tox -e gpu``).

The plugin leaves a project's own ``gpu`` marker alone; this project gives its marker that
meaning here, as a recipe's repository could.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(pytest.mark.chaos_gpu)
