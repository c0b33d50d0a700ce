"""The plugin's command-line options, as a user meets them: listed, applied, bad values refused."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

OPTIONS = ("--chaos-launch", "--chaos-deadline", "--chaos-artifacts", "--chaos-profile")


def test_help_lists_every_option_in_its_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["zephon-chaos: elastic-resume chaos testing:"])
    for option in OPTIONS:
        result.stdout.fnmatch_lines([f"*{option}*"])


BAD_VALUES = {
    # arguments: the usage error pytest must print
    ("--chaos-launch", "bogus"): "*argument --chaos-launch: invalid choice: 'bogus'*cli*warm*",
    ("--chaos-profile", "fast"): "*argument --chaos-profile: invalid choice: 'fast'*ci*replay*",
    ("--chaos-deadline", "soon"): "*argument --chaos-deadline: invalid float value: 'soon'*",
    ("--chaos-artifacts",): "*argument --chaos-artifacts: expected one argument*",
}


@pytest.mark.parametrize("args", sorted(BAD_VALUES), ids=" ".join)
def test_a_bad_value_is_a_usage_error_naming_the_option(
    pytester: pytest.Pytester, args: tuple[str, ...]
) -> None:
    pytester.makepyfile("def test_never_runs():\n    raise AssertionError\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([BAD_VALUES[args]])
    assert "Traceback" not in result.stderr.str()
    result.stdout.no_fnmatch_line("*test_never_runs*")


def test_good_values_reach_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from hypothesis import settings

        def test_options(request):
            opt = request.config.getoption
            assert opt("--chaos-launch") == "warm"
            assert opt("--chaos-deadline") == 42.5
            assert opt("--chaos-artifacts") == "out"
            assert opt("--chaos-profile") == "replay"
            assert settings.default.max_examples == 1  # the replay profile is loaded
        """
    )
    result = pytester.runpytest_subprocess(
        "--chaos-launch", "warm", "--chaos-deadline", "42.5", "--chaos-artifacts", "out",
        "--chaos-profile", "replay",
    )
    result.assert_outcomes(passed=1)


def test_defaults(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_defaults(request):
            opt = request.config.getoption
            assert (opt("--chaos-launch"), opt("--chaos-deadline")) == ("cli", 120.0)
            assert opt("--chaos-artifacts") is None
        """
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


SHOW_SETTINGS = """
from hypothesis import settings


def test_settings(request):
    opt = request.config.getoption
    print("SETTINGS", opt("--chaos-launch"), opt("--chaos-deadline"), opt("--chaos-artifacts"),
          settings.get_current_profile_name())
"""


@pytest.fixture
def no_profile_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZEPHON_CHAOS_PROFILE", raising=False)


@pytest.mark.parametrize(
    ("cli", "env", "shown"),
    [
        ((), None, "SETTINGS warm 42.5 out replay"),
        (("--chaos-launch", "cli", "--chaos-deadline", "7"), None, "SETTINGS cli 7.0 out replay"),
        ((), "deep", "SETTINGS warm 42.5 out deep"),
        (("--chaos-profile", "ci"), "deep", "SETTINGS warm 42.5 out ci"),
    ],
    ids=["ini", "command-line-wins", "environment-over-ini", "command-line-over-environment"],
)
def test_every_option_has_an_ini_twin_the_command_line_overrides(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    no_profile_env: None,
    cli: tuple[str, ...],
    env: str | None,
    shown: str,
) -> None:
    pytester.makeini(
        "[pytest]\nchaos_launch = warm\nchaos_deadline = 42.5\nchaos_artifacts = out\n"
        "chaos_profile = replay\n"
    )
    pytester.makepyfile(SHOW_SETTINGS)
    if env is not None:
        monkeypatch.setenv("ZEPHON_CHAOS_PROFILE", env)
    result = pytester.runpytest_subprocess("-s", *cli)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*{shown}"])


PROFILE_ONLY = """
from hypothesis import settings


def test_profile():
    print("PROFILE", settings.get_current_profile_name(), settings().max_examples)
"""


def test_no_profile_is_loaded_unless_asked(pytester: pytest.Pytester, no_profile_env: None) -> None:
    """The session's profile is Hypothesis's own choice, as without the plugin: ``default``,
    or Hypothesis's built-in ``ci`` where a CI variable is set (as under ``.ci/run``)."""
    pytester.makeini("[pytest]\n")  # no ini of an enclosing folder (tox's temp dir) applies
    pytester.makepyfile(test_profile=PROFILE_ONLY)
    runs = [pytester.runpytest_subprocess("-s", *off) for off in (("-p", "no:zephon_chaos"), ())]
    plain, with_plugin = ([ln for ln in r.outlines if "PROFILE " in ln] for r in runs)
    assert plain and with_plugin == plain  # same profile, same settings (ours: 25 examples)
    own = plain[0].split("PROFILE ", 1)[1].split()[0]
    pytester.makepyfile(test_profile=SHOW_SETTINGS)
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*SETTINGS cli 120.0 None {own}"])


BAD_SETTINGS = {
    # (ini line, environment value, arguments): the usage error pytest must print
    ("chaos_launch = bogus", None, ()): "ERROR: zephon-chaos: ini setting chaos_launch = 'bogus' "
    "in */tox.ini: expected cli or warm; set it to cli or warm, or remove it*",
    ("chaos_deadline = soon", None, ()): "*ini setting chaos_deadline = 'soon'*: expected a "
    "positive number of seconds; set it to *, or remove it*",
    ("chaos_deadline = -3", None, ()): "*chaos_deadline = '-3'*expected a positive number*",
    ("chaos_profile = fast", None, ()): "*chaos_profile = 'fast'*expected ci, deep or replay*",
    ("chaos_hygiene = some", None, ()): "*chaos_hygiene = 'some'*expected fixtures or all*",
    ("", "fast", ()): "ERROR: zephon-chaos: ZEPHON_CHAOS_PROFILE='fast' (environment): expected "
    "ci, deep or replay; set it to ci, deep or replay, or unset it",
    ("", None, ("--chaos-deadline", "0")): "ERROR: zephon-chaos: --chaos-deadline 0.0: expected "
    "a positive number of seconds; give --chaos-deadline a positive number of seconds*",
}


@pytest.mark.parametrize("case", list(BAD_SETTINGS), ids=lambda c: c[0] or c[1] or " ".join(c[2]))
def test_a_bad_setting_is_a_usage_error_naming_it_and_the_way_out(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    no_profile_env: None,
    case: tuple[str, str | None, tuple[str, ...]],
) -> None:
    ini, env, args = case
    pytester.makeini(f"[pytest]\n{ini}\n")
    if env is not None:
        monkeypatch.setenv("ZEPHON_CHAOS_PROFILE", env)
    pytester.makepyfile("def test_never_runs():\n    raise AssertionError\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([BAD_SETTINGS[case]])
    assert "Traceback" not in result.stderr.str()
