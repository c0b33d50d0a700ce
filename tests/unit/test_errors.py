"""One exception tree: every error the package defines is a ``ChaosError``, and the command
line answers every ``InvalidInput`` with exit 2."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import zephon_chaos
from zephon_chaos import cli
from zephon_chaos.errors import ChaosError, HarnessError, InvalidInput, Violation
from zephon_chaos.hygiene.owner import OWNER_VAR

OUTSIDE_THE_TREE: dict[str, str] = {
    # The in-process tier's stand-ins for a signal ending a rank process: raised in a rank
    # thread, caught by its launcher; an `except ChaosError` in a rank must not swallow them.
    "zephon_chaos.inproc.rank_group.GroupStopped": "ends a rank thread; never leaves the launcher",
    "zephon_chaos.inproc.rank_group.GroupTornDown": "asynchronous BaseException that ends a thread",
    "zephon_chaos.inproc.collective.CollectiveBroken": "becomes GroupStopped in the rank thread",
    # Hypothesis must not treat it as a failure to shrink; a BaseException on purpose.
    "zephon_chaos.explore.judged.EndShrinking": "ends Hypothesis's shrinking of a round",
    # A SIGTERM taking Ctrl-C's path: a KeyboardInterrupt, so every clean-up that stops a
    # run on Ctrl-C runs for it too; an `except ChaosError` must not catch it.
    "zephon_chaos.hygiene.command.Terminated": "SIGTERM ends a command as Ctrl-C does",
    # Private signals that never leave the module that raises them.
    "zephon_chaos.faults.interposer._Fired": "the interposer's drop action replaced a write",
    "zephon_chaos.faults.proxy.toxics.base.CloseLink": "a toxic stage ends its link",
    "zephon_chaos.faults.proxy.api_errors.ProxyAlreadyStarted": "Go's sentinel; /reset ignores it",
}
"""Exceptions the package defines outside the tree, each with the reason."""

ENTRY_POINTS = ("__main__",)
"""Modules that run their program when imported; they define no exception."""


def _modules() -> tuple[list[ModuleType], dict[str, str]]:
    """Every module of the package, imported; and those skipped, with the reason."""
    modules: list[ModuleType] = []
    skipped: dict[str, str] = {}
    for info in pkgutil.walk_packages(zephon_chaos.__path__, "zephon_chaos."):
        if info.name.rsplit(".", 1)[-1] in ENTRY_POINTS:
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except ModuleNotFoundError as exc:
            # An optional dependency missing here; a module of our own missing is a failure.
            if exc.name is None or exc.name.startswith("zephon_chaos"):
                raise
            skipped[info.name] = f"optional dependency {exc.name} is not installed"
    return modules, skipped


def _defined_exceptions() -> dict[str, type[BaseException]]:
    modules, skipped = _modules()
    for name, reason in skipped.items():
        print(f"not checked: {name}: {reason}")
    found: dict[str, type[BaseException]] = {}
    for module in modules:
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_exception_the_package_defines_is_a_chaos_error() -> None:
    found = _defined_exceptions()
    assert len(found) > 20, sorted(found)
    stray = sorted(
        name for name, cls in found.items()
        if not issubclass(cls, ChaosError) and name not in OUTSIDE_THE_TREE
    )
    assert not stray, f"derive these from a kind in zephon_chaos.errors, or list why not: {stray}"


def test_the_allow_list_names_real_classes_outside_the_tree() -> None:
    found = _defined_exceptions()
    for name in OUTSIDE_THE_TREE:
        assert name in found, f"{name} is gone; drop it from OUTSIDE_THE_TREE"
        assert not issubclass(found[name], ChaosError), f"{name} is in the tree now"


@pytest.mark.parametrize(
    ("path", "kind", "builtin"),
    [
        ("zephon_chaos.scenario.ScenarioError", InvalidInput, ValueError),
        ("zephon_chaos.workload.spec.SpecError", InvalidInput, ValueError),
        ("zephon_chaos.faults.interposer.InterposerError", InvalidInput, ValueError),
        ("zephon_chaos.nemeses.scenario_proxy.ProxyFaultError", InvalidInput, ValueError),
        ("zephon_chaos.inproc.refusal.TierRefusal", InvalidInput, ValueError),
        ("zephon_chaos.commands.UsageError", InvalidInput, Exception),
        ("zephon_chaos.faults.placement.PlacementError", HarnessError, RuntimeError),
        ("zephon_chaos.nemeses.process.ProcessFaultError", HarnessError, RuntimeError),
        ("zephon_chaos.faults.proxy.embedded.ProxyServerError", HarnessError, RuntimeError),
        ("zephon_chaos.faults.proxy.client.ProxyApiError", HarnessError, RuntimeError),
        ("zephon_chaos.launch.warm_protocol.PeerClosed", HarnessError, ConnectionError),
        ("zephon_chaos.launch.result.GroupFailed", Violation, AssertionError),
    ],
)
def test_a_class_in_the_tree_keeps_its_builtin_base(
    path: str, kind: type[ChaosError], builtin: type[Exception]
) -> None:
    """An ``except ValueError`` written before the tree still catches a ``ScenarioError``."""
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, kind) and issubclass(cls, builtin)


def test_the_kinds_do_not_overlap() -> None:
    kinds = (InvalidInput, HarnessError, Violation)
    for kind in kinds:
        assert [k for k in kinds if issubclass(kind, k)] == [kind]


class _NotUsage(InvalidInput):
    """Bad input that is not a ``UsageError``: the command line still answers it with 2."""


def test_the_command_line_answers_any_invalid_input_with_exit_2(monkeypatch, capsys) -> None:
    from zephon_chaos.commands import report

    def refuse(args: object) -> int:
        raise _NotUsage("--thing 7: must be at most 3")

    monkeypatch.setattr(report, "run", refuse)
    assert cli.main(["report", "merge", "x"]) == 2
    err = capsys.readouterr().err
    assert "zephon-chaos report: error: --thing 7: must be at most 3" in err
    assert "Traceback" not in err


def test_a_harness_error_is_not_answered_as_bad_input(monkeypatch) -> None:
    from zephon_chaos.commands import report

    def fail(args: object) -> int:
        raise HarnessError("the proxy server did not start")

    monkeypatch.setattr(report, "run", fail)
    with pytest.raises(HarnessError):
        cli.main(["report", "merge", "x"])


def test_an_unreadable_scenario_file_exits_2(tmp_path: Path, monkeypatch, capsys) -> None:
    """``ScenarioError`` reaches ``cli`` as it is: no conversion to ``UsageError`` needed."""
    monkeypatch.setenv(OWNER_VAR, "owned-by-this-test")  # no ownership records for a refusal
    missing = tmp_path / "missing.json"
    assert cli.main(["run", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"cannot read scenario file {missing}" in err and "Traceback" not in err
