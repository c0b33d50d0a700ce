"""Installed but not asked, the plugin changes nothing in a downstream project's session.

A recipe's repository has its own Hypothesis profile, session fixtures, temp caches and
markers named ``gpu`` or ``slow`` that mean something else to it. The plugin is loaded there
by its entry point whether the recipe wants it or not, so that session must run exactly as
it does with ``-p no:zephon_chaos``: the plugin acts only on the tests that use its fixtures
or markers, and on the whole session only where the project's configuration asks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

RECIPE_CONFTEST = r'''
import os
import subprocess
import sys

import pytest
from hypothesis import settings

# The recipe's own profile: 7 examples per property, loaded before any plugin configures.
settings.register_profile("recipe", max_examples=7, derandomize=True, database=None)
settings.load_profile("recipe")

HELPER_DEADLINE_S = 300  # the helper ends by itself, should the teardown never come


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: runs on the recipe's kernel emulator (any CPU)")
    config.addinivalue_line("markers", "slow: the recipe's long soak, kept out of quick runs")
    config.addinivalue_line("markers", "chaos: the recipe's own fault-injection tests")


@pytest.fixture(scope="session")
def helper():
    """A helper process for the whole session (a tokenizer server, say)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep({HELPER_DEADLINE_S})"],
        stdin=subprocess.DEVNULL,
    )
    yield proc
    proc.kill()
    proc.wait(timeout=30)
'''

RECIPE_TESTS = r'''
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st


def test_the_recipe_profile_holds():
    seen = []

    @given(st.binary(min_size=32, max_size=32))
    def prop(blob):
        seen.append(blob)

    prop()
    assert settings.default.max_examples == 7
    assert 0 < len(seen) <= 7, f"Hypothesis ran {len(seen)} examples"


@pytest.mark.parametrize("name", ["tokens", "vocab"])
def test_a_cache_in_the_temp_folder_is_kept(helper, name):
    assert helper.poll() is None
    # The session's own temp folder: nobody swapped TMPDIR for this test.
    assert tempfile.gettempdir() == os.environ["RECIPE_TEMP"]
    cache = Path(tempfile.gettempdir()) / f"recipe-{name}-{os.getpid()}.cache"
    cache.write_bytes(b"kept on purpose for the next test")


def test_the_helper_lives_across_tests(helper):
    assert helper.poll() is None


def test_the_environment_is_the_sessions_own():
    assert not any(key.startswith("ZEPHON_CHAOS_") for key in os.environ), sorted(os.environ)


@pytest.mark.gpu
def test_a_kernel_on_the_emulator():
    assert sum(range(8)) == 28  # the recipe's `gpu` tests run anywhere


@pytest.mark.chaos
def test_the_recipes_own_chaos_monkey():
    assert True


@pytest.mark.slow
def test_a_long_soak():
    raise AssertionError("deselected by -m 'not slow'")
'''

ARGS = ("-n", "2", "-m", "not slow", "--strict-markers", "-p", "no:cacheprovider")
EXPECTED = {"passed": 7}  # the slow soak fails if it runs; xdist counts no deselections


@pytest.fixture
def recipe_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The downstream project, with a temp folder of its own (its caches land there)."""
    temp = pytester.path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setenv("RECIPE_TEMP", str(temp))
    for key in [k for k in os.environ if k.startswith("ZEPHON_CHAOS_")]:
        monkeypatch.delenv(key)  # an outer session's hygiene token is not the recipe's
    pytester.makeconftest(RECIPE_CONFTEST)
    pytester.makepyfile(test_recipe=RECIPE_TESTS)
    return temp


def caches(temp: Path) -> list[str]:
    return sorted(p.name.split("-")[1] for p in temp.glob("recipe-*.cache"))


def test_a_recipe_session_runs_the_same_with_the_plugin_installed(
    pytester: pytest.Pytester, recipe_project: Path
) -> None:
    without = pytester.runpytest_subprocess(*ARGS, "-p", "no:zephon_chaos", timeout=240)
    assert without.parseoutcomes() == EXPECTED, without.stdout.str()
    assert caches(recipe_project) == ["tokens", "vocab"]
    for cache in recipe_project.glob("recipe-*.cache"):
        cache.unlink()

    with_plugin = pytester.runpytest_subprocess(*ARGS, timeout=240)
    assert with_plugin.parseoutcomes() == without.parseoutcomes(), with_plugin.stdout.str()
    assert caches(recipe_project) == ["tokens", "vocab"], "the recipe's caches were removed"
    with_plugin.stdout.no_fnmatch_line("*zephon-chaos*")
    assert not (recipe_project / f"zephon-chaos-{os.getuid()}").exists(), (
        "the plugin made its session folder in a session that never used it"
    )
