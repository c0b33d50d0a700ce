"""Markers under ``--strict-markers`` and the fixtures a user can request, via the entry point."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

MARKERS = ("cpu", "gpu", "chaos", "slow", "no_chaos_hygiene")
PUBLIC_FIXTURES = (
    "torchrun_group",
    "chaos_tmp_root",
    "chaos_hygiene",
    "resume_check",
    "zephon_dataset",
    "recipe_run",
    "cuda_devices",
    "gpu_world",
)


def test_markers_are_registered_with_their_meaning(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    for name in MARKERS:
        result.stdout.fnmatch_lines([f"@pytest.mark.{name}: *"])
    result.stdout.fnmatch_lines(["*gpu: needs CUDA devices (nccl)*skipped without CUDA*"])


def test_every_marker_passes_strict_markers(pytester: pytest.Pytester) -> None:
    marks = "".join(f"@pytest.mark.{name}\n" for name in MARKERS)
    pytester.makepyfile(
        test_marked=f"import pytest\n\n{marks}def test_marked():\n    pass\n",
        test_unknown="import pytest\n\n@pytest.mark.bogus_marker\ndef test_unknown():\n    pass\n",
    )
    result = pytester.runpytest_subprocess("--strict-markers", "test_unknown.py")
    result.stdout.fnmatch_lines(["*'bogus_marker' not found in `markers` configuration option*"])
    result = pytester.runpytest_subprocess("--strict-markers", "test_marked.py")
    # Every marker is known; the gpu one makes the test skip here, saying why.
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 1, result.stdout.str()
    assert "errors" not in outcomes


def test_public_fixtures_are_available(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--fixtures")
    assert result.ret == pytest.ExitCode.OK
    for name in PUBLIC_FIXTURES:
        result.stdout.fnmatch_lines([f"{name} -- *zephon_chaos*"])
    result.stdout.fnmatch_lines(["*fixtures defined from zephon_chaos.fixtures.recipe_run*"])


def test_fixture_factories_work_without_a_launch(pytester: pytest.Pytester) -> None:
    """The fixtures build without torch or a group: only calling them launches."""
    pytester.makepyfile(
        """
        import sys

        def test_fixtures(torchrun_group, resume_check, recipe_run, zephon_dataset, chaos_tmp_root):
            assert callable(torchrun_group) and callable(resume_check) and callable(recipe_run)
            data = zephon_dataset(sources=2, shards=2, rows=8)
            assert [s.name for s in data.sources] == ["a", "b"]
            assert chaos_tmp_root.is_dir()
            assert "torch" not in sys.modules
        """
    )
    pytester.runpytest_subprocess("--strict-markers").assert_outcomes(passed=1)



def test_a_project_marker_of_the_same_name_keeps_its_meaning(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    gpu: runs on the recipe's kernel emulator\n")
    result = pytester.runpytest_subprocess("--markers")
    gpu_lines = [line for line in result.outlines if line.startswith("@pytest.mark.gpu:")]
    assert gpu_lines == ["@pytest.mark.gpu: runs on the recipe's kernel emulator"]
    result.stdout.fnmatch_lines(["@pytest.mark.slow: *(registered by zephon-chaos)"])


NO_CUDA = """
import zephon_chaos.fixtures.gpu as gpu

gpu.probe_cuda = lambda: gpu.CudaInfo(0, "no CUDA here (fake)", "fake")
"""

GPU_GATE_TESTS = """
import pytest


@pytest.mark.chaos_gpu
def test_the_plugins_gpu_marker():
    raise AssertionError("the gate should have skipped it")


def test_a_gpu_fixture(cuda_devices):
    raise AssertionError("the fixture should have skipped it")


@pytest.mark.gpu
def test_a_gpu_label():
    pass
"""


def test_the_gpu_gate_acts_on_its_marker_and_fixtures_only(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(NO_CUDA)
    pytester.makepyfile(test_gate=GPU_GATE_TESTS)
    result = pytester.runpytest_subprocess("--strict-markers", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["GPU tests skipped: no CUDA here (fake) (2 tests)"])
