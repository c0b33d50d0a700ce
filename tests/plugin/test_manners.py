"""Installed but not asked, the plugin changes nothing in a downstream project's session.

A recipe's repository has its own Hypothesis profile, session fixtures, temp caches and
markers named ``gpu`` or ``slow`` that mean something else to it. The plugin is loaded there
by its entry point whether the recipe wants it or not, so that session must run exactly as
it does with ``-p no:zephon_chaos``: the plugin acts only on the tests that use its fixtures
or markers, and on the whole session only where the project's configuration asks.
"""

from __future__ import annotations

import json
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
def downstream(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project in pytester's folder with a temp folder of its own; none of this session's
    hygiene variables (its token, its temp base) reaches the inner sessions."""
    temp = pytester.path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    for key in [k for k in os.environ if k.startswith("ZEPHON_CHAOS_")]:
        monkeypatch.delenv(key)
    return temp


@pytest.fixture
def recipe_project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, downstream: Path
) -> Path:
    """The recipe's project: its caches land in its temp folder."""
    monkeypatch.setenv("RECIPE_TEMP", str(downstream))
    pytester.makeconftest(RECIPE_CONFTEST)
    pytester.makepyfile(test_recipe=RECIPE_TESTS)
    return downstream


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
    said = [line for line in with_plugin.outlines if "zephon-chaos" in line]
    assert [line for line in said if not line.startswith("plugins:")] == [], said
    assert not (recipe_project / f"zephon-chaos-{os.getuid()}").exists(), (
        "the plugin made its session folder in a session that never used it"
    )


LEAVES_A_CACHE = r'''
import os
import tempfile

import pytest


@pytest.fixture
def chaos():
    """The project's own fixture, named as one of the plugin's (and not building on it)."""
    return "the recipe's chaos monkey"


def leave(name):
    open(os.path.join(tempfile.gettempdir(), f"zephon-{name}.cache"), "w").close()


def test_plain():
    leave("plain")


def test_uses_a_plugin_fixture(zephon_dataset):
    assert os.environ["ZEPHON_CHAOS_OWNER"]  # the plugin's session started for this test
    leave("fixture")


def test_uses_its_own_chaos_fixture(chaos):
    leave("own-chaos")


@pytest.mark.no_chaos_hygiene
def test_opted_out(zephon_dataset):
    leave("opted-out")
'''


@pytest.mark.parametrize(
    ("ini", "judged"),
    [
        ("", ["test_uses_a_plugin_fixture"]),
        (
            "chaos_hygiene = all",
            ["test_plain", "test_uses_a_plugin_fixture", "test_uses_its_own_chaos_fixture"],
        ),
    ],
    ids=["default", "all"],
)
def test_the_leak_check_judges_the_tests_that_use_the_plugin(
    pytester: pytest.Pytester, downstream: Path, ini: str, judged: list[str]
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_caches=LEAVES_A_CACHE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=4, errors=len(judged))
    failed = sorted(
        line.split("ERROR at teardown of ")[1].split()[0]
        for line in result.outlines
        if "ERROR at teardown of " in line
    )
    assert failed == judged, result.stdout.str()
    result.stdout.fnmatch_lines(["*the test left things behind*"])


def stale_ledger(temp: Path) -> Path:
    """A ledger of a crashed session (a PID no process can have), as a SIGKILL leaves it."""
    folder = temp / f"zephon-chaos-{os.getuid()}" / "sessions" / "999999999-1"
    folder.mkdir(parents=True, mode=0o700)
    (folder / "ledger.json").write_text(json.dumps({"session": "999999999-1"}))
    return folder


PLAIN = "def test_plain():\n    pass\n"
CHAOS_USER = "def test_uses_the_plugin(zephon_dataset):\n    pass\n"


@pytest.mark.parametrize("xdist", [(), ("-n", "1")], ids=["one-process", "xdist"])
def test_crashed_runs_are_reaped_once_the_plugin_is_used(
    pytester: pytest.Pytester, downstream: Path, xdist: tuple[str, ...]
) -> None:
    """The session (the controller's, under xdist) starts at the first use: its start-up
    reap removes what crashed runs left, and the terminal summary says so."""
    ledger = stale_ledger(downstream)
    pytester.makepyfile(test_plain=PLAIN)
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider", *xdist, timeout=120)
    plain.assert_outcomes(passed=1)
    assert ledger.is_dir(), "a session that never used the plugin reaped"
    plain.stdout.no_fnmatch_line("*removed leftovers*")

    pytester.makepyfile(test_chaos=CHAOS_USER)
    used = pytester.runpytest_subprocess("-p", "no:cacheprovider", *xdist, timeout=120)
    used.assert_outcomes(passed=2)
    assert not ledger.exists()
    used.stdout.fnmatch_lines(
        [
            "zephon-chaos: removed leftovers of crashed runs (1 item(s)):",
            f"  folder {ledger}: of crashed session 999999999-1*",
        ]
    )
