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
