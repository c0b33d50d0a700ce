"""The pytest plugin: options, markers and fixtures, loaded through the ``pytest11`` entry point.

Installed, it is loaded into every pytest session of its environment, a recipe's own suite
included, so it stays inert until asked (docs/recipes.md, "A session that did not ask"):

* no Hypothesis profile is loaded unless ``--chaos-profile``, ``ZEPHON_CHAOS_PROFILE`` or the
  ``chaos_profile`` ini setting names one;
* the leak check and the session ledger act on the tests that use the plugin's fixtures
  (``fixtures.reach``), on every test only with ``chaos_hygiene = all``;
* the GPU gate acts on ``chaos_gpu`` tests and on users of ``cuda_devices``/``gpu_world``;
  the labels ``cpu``, ``gpu``, ``chaos`` and ``slow`` are registered only where the project
  declares no marker of that name, and the plugin acts on none of them.

Every ``--chaos-*`` option has an ini twin (``chaos_*``); the command line wins. Nothing here
imports torch or zephon; fixtures import them lazily when a test uses them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from zephon_chaos.fixtures import reach as chaos_reach
from zephon_chaos.fixtures.chaos import chaos, store_proxy  # noqa: F401
from zephon_chaos.fixtures.gpu import cuda_devices, gpu_world  # noqa: F401
from zephon_chaos.fixtures.gpu import gate as gpu_gate
from zephon_chaos.fixtures.groups import chaos_tmp_root, torchrun_group  # noqa: F401
from zephon_chaos.fixtures.hosts import chaos_hosts, multinode_resume_check  # noqa: F401
from zephon_chaos.fixtures.hygiene import chaos_hygiene, chaos_registry  # noqa: F401
from zephon_chaos.fixtures.recipe_run import recipe_run  # noqa: F401
from zephon_chaos.fixtures.resume_check import (  # noqa: F401
    chaos_reference_cache,
    resume_check,
    zephon_dataset,
)
from zephon_chaos.fixtures.toxiproxy import echo_server, toxiproxy, toxiproxy_server  # noqa: F401
from zephon_chaos.fixtures.warm_lane import chaos_warm_lane, chaos_warm_server  # noqa: F401
from zephon_chaos.gpu_summary import write_summary as write_gpu_summary
from zephon_chaos.hygiene import session as chaos_session

OWN_MARKERS: dict[str, str] = {
    chaos_reach.GPU_MARKER: "needs CUDA devices (nccl); skipped without CUDA, saying why "
    "(zephon-chaos's GPU tier, with the tests that use cuda_devices or gpu_world)",
    "no_chaos_hygiene": "opt out of zephon-chaos's leak check (processes, ports, temp entries)",
}
LABELS: dict[str, str] = {
    # Registered only where the project declares no marker of that name: labels for -m.
    "cpu": "runs on CPU (gloo); a label for -m selection",
    "gpu": "needs CUDA devices; a label for -m selection (zephon-chaos skips chaos_gpu tests "
    "without CUDA, not these)",
    "chaos": "injects faults (proxy toxics, signals, crashes) into a real group; a label",
    "slow": "expensive, kept out of quick runs with -m 'not slow'; a label",
}
PROFILES = ("ci", "deep", "replay")  # zephon_chaos.profiles, named here without importing it
PROFILE_ENV = "ZEPHON_CHAOS_PROFILE"


@dataclass(frozen=True)
class Setting:
    """One of the plugin's settings: its ini name (also the option's ``dest``), its command
    line flag, its default, and how a text value reads (a ValueError: not ``expected``)."""

    ini: str
    flag: str | None
    default: object
    read: Callable[[str], object]
    expected: str
    help: str
    env: str | None = None


def _choice(*choices: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text

    return read


def _seconds(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(text)
    return value


SETTINGS = (
    Setting(
        "chaos_launch", "--chaos-launch", "cli", _choice("cli", "warm"), "cli or warm",
        "how torchrun groups start: cli = `python -m torch.distributed.run` (default), "
        "warm = the elastic agent from a pre-warmed process (faster; CPU only).",
    ),
    Setting(
        "chaos_deadline", "--chaos-deadline", 120.0, _seconds, "a positive number of seconds",
        "default deadline of one launch; past it, stacks are captured and the tree killed "
        "(default 120).",
    ),
    Setting(
        "chaos_artifacts", "--chaos-artifacts", None, str, "a directory",
        "write each failing test's report (logs, stacks, scenario, replay command) here.",
    ),
    Setting(
        "chaos_profile", "--chaos-profile", None, _choice(*PROFILES), "ci, deep or replay",
        "load this Hypothesis settings profile: ci (derandomized, small), deep (many "
        f"randomized examples, database on), replay (explicit examples only); also "
        f"{PROFILE_ENV}. Default: none, the project's own profile stays.",
        env=PROFILE_ENV,
    ),
    Setting(
        "chaos_hygiene", None, "fixtures", _choice(*chaos_reach.HYGIENE_SCOPES), "fixtures or all",
        "which tests the leak check judges: fixtures = those that use zephon-chaos's fixtures "
        "(default), all = every test of the session.",
    ),
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from zephon_chaos import newhooks

    pluginmanager.add_hookspecs(newhooks)


@pytest.hookimpl(trylast=True)
def pytest_zephon_chaos_make_launcher(request: pytest.FixtureRequest, groups):  # type: ignore[no-untyped-def]
    """This plugin's launcher: the lane ``--chaos-launch`` names (``newhooks``)."""
    if request.config.getoption("--chaos-launch", default="cli") == "warm":
        from zephon_chaos.fixtures.warm_lane import warm_launcher_for

        return warm_launcher_for(request, groups)
    return groups.run_spec


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("zephon_chaos", "zephon-chaos: elastic-resume chaos testing")
    for setting in SETTINGS:
        parser.addini(setting.ini, f"zephon-chaos: {setting.help}", default="")
        if setting.flag is None:
            continue
        kwargs: dict[str, Any] = {"dest": setting.ini, "default": None}
        if setting.flag == "--chaos-launch":
            kwargs["choices"] = ("cli", "warm")
        elif setting.flag == "--chaos-profile":
            kwargs["choices"] = PROFILES
        elif setting.flag == "--chaos-deadline":
            kwargs.update(type=float, metavar="SECONDS")
        else:
            kwargs["metavar"] = "DIR"
        group.addoption(setting.flag, help=f"{setting.help} ini: {setting.ini}", **kwargs)


def _resolve(config: pytest.Config, setting: Setting) -> object:
    """The command line, else the environment (where the setting has one), else the ini."""
    given = config.getoption(setting.ini) if setting.flag else None
    sources: list[tuple[str, str, str]] = []
    if given is not None:
        assert setting.flag is not None
        sources.append((f"{setting.flag} {given}", str(given), f"give {setting.flag} "
                        f"{setting.expected}, or leave it out"))
    if setting.env is not None and os.environ.get(setting.env):
        sources.append((f"{setting.env}={os.environ[setting.env]!r} (environment)",
                        os.environ[setting.env], f"set it to {setting.expected}, or unset it"))
    text = str(config.getini(setting.ini)).strip()
    if text:
        where = f" in {config.inipath}" if config.inipath else ""
        sources.append((f"ini setting {setting.ini} = {text!r}{where}", text,
                        f"set it to {setting.expected}, or remove it (or override it with "
                        f"-o {setting.ini}=...)"))
    if not sources:
        return setting.default
    origin, value, way_out = sources[0]
    try:
        return setting.read(value.strip())
    except ValueError:
        raise pytest.UsageError(
            f"zephon-chaos: {origin}: expected {setting.expected}; {way_out}"
        ) from None


def _declared_markers(config: pytest.Config) -> set[str]:
    lines = config.getini("markers")
    return {str(line).split(":", 1)[0].split("(", 1)[0].strip() for line in lines}


@pytest.hookimpl(trylast=True)  # after the project's conftest.py declared its own markers
def pytest_configure(config: pytest.Config) -> None:
    values = {setting.ini: _resolve(config, setting) for setting in SETTINGS}
    for setting in SETTINGS:
        if setting.flag is not None:
            setattr(config.option, setting.ini, values[setting.ini])  # getoption sees the value
    config.stash[chaos_reach.REACH] = chaos_reach.Reach(
        fixtures=chaos_reach.fixture_names(globals()),
        hygiene_all=values["chaos_hygiene"] == "all",
    )
    declared = _declared_markers(config)
    for name, text in OWN_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    for name, text in LABELS.items():
        if name not in declared:
            config.addinivalue_line("markers", f"{name}: {text} (registered by zephon-chaos)")
    profile = values["chaos_profile"]
    if profile is not None:
        from zephon_chaos.profiles import load_profile

        load_profile(str(profile))
    if values["chaos_hygiene"] == "all":
        chaos_session.start(config)  # every test is judged: the session starts with pytest
    elif not hasattr(config, "workerinput"):
        config.pluginmanager.register(_WorkerReports(config), "zephon_chaos_worker_reports")


class _WorkerReports:
    """An xdist controller runs no test: a worker's report says when that worker started the
    plugin's session, and the controller starts its own (crashed-run reaping, SIGINT/SIGTERM
    handling, reaping after a worker dies) then."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if getattr(report, chaos_reach.USED_ATTR, False):
            chaos_session.ensure(self.config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The GPU gate, before any fixture is set up (``chaos_gpu`` tests only)."""
    gpu_gate(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Failure sections (scenarios, groups, stacks, timeline), artifacts, JUnit key facts."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if chaos_session.current(item.config) is not None:
        setattr(report, chaos_reach.USED_ATTR, True)
    if chaos_reach.in_gpu_tier(item):
        setattr(report, chaos_reach.GPU_ATTR, True)
    if report.when == "setup" and not report.failed:
        return
    from zephon_chaos.report.hook import add_report_details

    add_report_details(item, report)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The session starts with the first of the plugin's fixtures to be set up; a session
    fixture first used mid-test is set up outside that test's hygiene scope."""
    config = request.config
    if fixturedef.argname in chaos_reach.reach(config).fixtures and str(
        getattr(fixturedef.func, "__module__", "")
    ).startswith(chaos_reach.PACKAGE):
        chaos_session.ensure(config)
    with chaos_session.fixture_setup(config, fixturedef.scope):
        yield


def pytest_unconfigure(config: pytest.Config) -> None:
    chaos_session.finish(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return chaos_session.header(config)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    write_gpu_summary(terminalreporter)
    for line in chaos_session.summary(config):
        terminalreporter.write_line(line)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """An xdist worker went down: reap what a crashed one left, before the run goes on."""
    config = getattr(node, "config", None)
    if config is not None:
        chaos_session.on_worker_down(config, crashed=error is not None)
