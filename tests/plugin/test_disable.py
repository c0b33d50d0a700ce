"""``-p no:zephon_chaos`` switches the plugin off cleanly: no options, markers or fixtures."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_a_plain_session_runs_without_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_plain(request):
            assert not request.config.pluginmanager.has_plugin("zephon_chaos")
            assert "chaos_hygiene" not in request.fixturenames
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:zephon_chaos")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*zephon-chaos*")


def test_its_options_are_gone(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "no:zephon_chaos", "--chaos-deadline", "5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --chaos-deadline*"])


def test_its_markers_and_fixtures_are_gone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        def test_wants_a_group(torchrun_group):
            pass

        @pytest.mark.cpu
        def test_marked():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:zephon_chaos", "--strict-markers")
    result.stdout.fnmatch_lines(["*'cpu' not found in `markers` configuration option*"])
    pytester.makepyfile(
        """
        def test_wants_a_group(torchrun_group):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:zephon_chaos")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'torchrun_group' not found*"])
