"""What the session summary says about ``gpu`` tests: why they skipped, how many ran."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

GPU_TESTS = """
import pytest

pytestmark = pytest.mark.gpu


def test_one_rank(gpu_world):
    gpu_world([1])


def test_two_ranks(gpu_world):
    gpu_world([2, 1])
"""

FAKE_DEVICES = """
import zephon_chaos.fixtures.gpu as gpu

gpu.probe_cuda = lambda: gpu.CudaInfo({devices}, {reason!r}, "fake")
"""


@pytest.mark.parametrize(
    ("devices", "reason", "outcomes", "lines"),
    [
        (
            0,
            "CUDA is not available to torch (fake): no device or driver",
            {"skipped": 2},
            ["GPU tests skipped: CUDA is not available to torch (fake): no device or driver "
             "(2 tests)"],
        ),
        (
            1,
            None,
            {"passed": 1, "skipped": 1},
            ["GPU tests: 1 ran, 1 skipped", "  skipped: needs 2 CUDA devices, 1 visible (1 test)"],
        ),
    ],
    ids=["no-cuda", "one-device"],
)
def test_summary_says_why_gpu_tests_skipped(
    pytester: pytest.Pytester,
    devices: int,
    reason: str | None,
    outcomes: dict[str, int],
    lines: list[str],
) -> None:
    pytester.makeconftest(FAKE_DEVICES.format(devices=devices, reason=reason))
    pytester.makepyfile(test_gpu=GPU_TESTS)
    result = pytester.runpytest_subprocess("-m", "gpu", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(**outcomes)
    result.stdout.fnmatch_lines(["*= zephon-chaos GPU tier =*", *lines])


def test_no_gpu_section_without_gpu_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*GPU*")

