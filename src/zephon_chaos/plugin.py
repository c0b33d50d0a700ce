"""The pytest plugin: options, markers and fixtures, loaded through the ``pytest11`` entry point.

Nothing here imports torch or zephon; fixtures import them lazily when a test uses them.
"""

from __future__ import annotations

import pytest

from zephon_chaos.fixtures.groups import chaos_tmp_root, torchrun_group  # noqa: F401
from zephon_chaos.fixtures.hygiene import chaos_hygiene, chaos_registry  # noqa: F401

MARKERS: dict[str, str] = {
    "cpu": "runs on CPU (gloo); part of the default CI run",
    "gpu": "needs CUDA devices (nccl); run by `tox -e gpu`, skipped without CUDA",
    "chaos": "injects faults (proxy toxics, signals, crashes) into a real group",
    "slow": "expensive scenario kept out of the default CI run; run by `tox -e deep`",
    "no_chaos_hygiene": "opt out of the per-test leak check (processes, ports, temp entries)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("zephon_chaos", "zephon-chaos: elastic-resume chaos testing")
    group.addoption(
        "--chaos-launch",
        choices=("cli", "warm"),
        default="cli",
        help="how torchrun groups start: cli = `python -m torch.distributed.run` (default), "
        "warm = the elastic agent from a pre-warmed process (faster; CPU only).",
    )
    group.addoption(
        "--chaos-deadline",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="default deadline of one launch; past it, stacks are captured and the tree killed.",
    )
    group.addoption(
        "--chaos-artifacts",
        default=None,
        metavar="DIR",
        help="write each failing test's report (logs, stacks, scenario, replay command) here.",
    )
    group.addoption(
        "--chaos-profile",
        choices=("ci", "deep", "replay"),
        default=None,
        help="Hypothesis settings profile: ci (derandomized, small; the default), "
        "deep (many randomized examples, database on), replay (explicit examples only).",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    from zephon_chaos.profiles import load_profile

    load_profile(config.getoption("--chaos-profile", default=None))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """On failure, show every group's report (statuses, first error, log tails, stacks)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when == "setup" and not report.failed:
        return
    from zephon_chaos.report.sections import group_reports

    results = group_reports(item)
    if not results:
        return
    for result in results:
        report.user_properties.append((f"group.{result.name}", result.summary().splitlines()[0]))
    if report.failed:
        from zephon_chaos.report.artifacts import write_artifacts

        for result in results:
            report.sections.append((f"zephon-chaos group {result.name}", result.report()))
        target = item.config.getoption("--chaos-artifacts", default=None)
        if target:
            path = write_artifacts(target, item.nodeid, report, results)
            report.sections.append(("zephon-chaos artifacts", str(path)))
