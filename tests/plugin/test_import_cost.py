"""Loading the plugin imports neither torch nor zephon: every downstream session loads it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

HEAVY = ("torch", "zephon")


def test_importing_the_plugin_module_is_light() -> None:
    code = (
        "import sys, zephon_chaos.plugin, zephon_chaos.recipe, zephon_chaos.gpu_summary\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_a_session_with_the_plugin_stays_light(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        import sys

        def test_light(request):
            assert request.config.pluginmanager.has_plugin("zephon_chaos")
            assert [m for m in {HEAVY!r} if m in sys.modules] == []
        """
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
