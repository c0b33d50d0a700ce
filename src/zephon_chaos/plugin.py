"""The pytest plugin: options, markers and fixtures, loaded through the ``pytest11`` entry point.

Nothing here imports torch or zephon; fixtures import them lazily when a test uses them.
"""

from __future__ import annotations

import pytest

from zephon_chaos.fixtures.chaos import chaos, store_proxy  # noqa: F401
from zephon_chaos.fixtures.gpu import chaos_gpu_gate, cuda_devices, gpu_world  # noqa: F401
from zephon_chaos.fixtures.groups import chaos_tmp_root, torchrun_group  # noqa: F401
from zephon_chaos.fixtures.hygiene import chaos_hygiene, chaos_registry  # noqa: F401
from zephon_chaos.fixtures.netns import chaos_hosts, multinode_resume_check  # noqa: F401
from zephon_chaos.fixtures.proxy import echo_server, toxiproxy, toxiproxy_server  # noqa: F401
from zephon_chaos.fixtures.recipe import recipe_run  # noqa: F401
from zephon_chaos.fixtures.resume import (  # noqa: F401
    chaos_reference_cache,
    resume_check,
    zephon_dataset,
)
from zephon_chaos.fixtures.warm import chaos_warm_lane, chaos_warm_server  # noqa: F401
from zephon_chaos.gpu_summary import pytest_terminal_summary  # noqa: F401

MARKERS: dict[str, str] = {
    "cpu": "runs on CPU (gloo); part of the default CI run",
    "gpu": "needs CUDA devices (nccl); run by `tox -e gpu`, skipped without CUDA",
    "chaos": "injects faults (proxy toxics, signals, crashes) into a real group",
    "slow": "expensive scenario kept out of the default CI run; run by `tox -e deep`",
    "no_chaos_hygiene": "opt out of the per-test leak check (processes, ports, temp entries)",
}


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from zephon_chaos import newhooks

    pluginmanager.add_hookspecs(newhooks)


@pytest.hookimpl(trylast=True)
def pytest_zephon_chaos_make_launcher(request: pytest.FixtureRequest, groups):  # type: ignore[no-untyped-def]
    """This plugin's launcher: the lane ``--chaos-launch`` names (``newhooks``)."""
    if request.config.getoption("--chaos-launch", default="cli") == "warm":
        from zephon_chaos.fixtures.warm import warm_launcher_for

        return warm_launcher_for(request, groups)
    return groups.run_spec


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
    deadline = config.getoption("--chaos-deadline", default=120.0)
    if deadline is not None and deadline <= 0:
        raise pytest.UsageError(
            f"--chaos-deadline must be a positive number of seconds, got {deadline}"
        )
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    from zephon_chaos.profiles import load_profile

    load_profile(config.getoption("--chaos-profile", default=None))
    from zephon_chaos.hygiene import session  # identity, ledger, SIGINT/SIGTERM, crashed runs

    session.start(config)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Failure sections (scenarios, groups, stacks, timeline), artifacts, JUnit key facts."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when == "setup" and not report.failed:
        return
    from zephon_chaos.report.hook import add_report_details

    add_report_details(item, report)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A session fixture first used mid-test is set up outside that test's hygiene scope."""
    from zephon_chaos.hygiene import session

    with session.fixture_setup(request.config, fixturedef.scope):
        yield


def pytest_unconfigure(config: pytest.Config) -> None:
    from zephon_chaos.hygiene import session

    session.finish(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from zephon_chaos.hygiene import session

    return session.header(config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """An xdist worker went down: reap what a crashed one left, before the run goes on."""
    from zephon_chaos.hygiene import session

    session.on_worker_down(getattr(node, "config", None))
