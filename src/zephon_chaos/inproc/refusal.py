"""What the in-process tier refuses to run, naming the field and the way out (torchrun)."""

from __future__ import annotations

from dataclasses import dataclass

from zephon_chaos.errors import InvalidInput
from zephon_chaos.scenario import Scenario
from zephon_chaos.scenario_rules import STALLING_TOXICS, Rule
from zephon_chaos.workload.spec import COLLECTIVE_FORMATS

PROCESS_ONLY_ACTIONS = ("sigkill", "sigterm", "sigstop", "exit", "kill_agent")


class TierRefusal(InvalidInput, ValueError):
    """A scenario (or launch) this tier cannot run; the message names the field and the way out."""


@dataclass(frozen=True)
class InprocRefusal:
    """Why the in-process tier cannot run a scenario: the refusal (``docs/space.md``) and the
    message, which names the field and the way out."""

    rule: Rule
    text: str


def inproc_refusal(scenario: Scenario) -> str | None:
    """Why the in-process tier cannot run ``scenario`` faithfully, or None if it can."""
    refused = inproc_refused(scenario)
    return None if refused is None else refused.text


def inproc_refused(scenario: Scenario) -> InprocRefusal | None:
    """:func:`inproc_refusal` as a value: which refusal, and its message."""
    for i, ph in enumerate(scenario.launches):
        if ph.child_faults:  # before the runner: the fault is what needs a process per rank
            return InprocRefusal(
                Rule.INPROC_CHILD_FAULTS,
                f"scenario.launches[{i}].child_faults: a rank kills its own pipeline's worker "
                "processes, and rank threads share one process; run it with --tier torchrun",
            )
    p = scenario.pipeline
    if p.runner == "process" or p.mtp_mode:
        what = "runner 'process'" if p.runner == "process" else "mtp_mode"
        field_name = "runner" if p.runner == "process" else "mtp_mode"
        return InprocRefusal(
            Rule.INPROC_RUNNER_PROCESS if p.runner == "process" else Rule.INPROC_MTP_MODE,
            f"scenario.pipeline.{field_name}: {what} starts worker processes for every rank; "
            "from rank threads they take tens of seconds to start (measured: 26-70 s a launch "
            "on 2 cores) and can stall, so run it with --tier torchrun",
        )
    if scenario.persist_format in COLLECTIVE_FORMATS:
        return InprocRefusal(
            Rule.INPROC_DCP, collective_refusal("scenario.persist_format", scenario.persist_format)
        )
    for i, ph in enumerate(scenario.launches):
        where = f"scenario.launches[{i}]"
        if ph.path != "standalone":
            return InprocRefusal(
                Rule.INPROC_LAUNCH_PATH,
                f"{where}.path: {ph.path!r} is a torchrun launch path, which threads do not "
                "have; run it with --tier torchrun",
            )
        for j, fault in enumerate(ph.rank_faults):
            if fault.action in PROCESS_ONLY_ACTIONS:
                return InprocRefusal(
                    Rule.INPROC_PROCESS_ACTION,
                    f"{where}.rank_faults[{j}].action: {fault.action!r} signals or ends a "
                    "process, and ranks here are threads; run it with --tier torchrun",
                )
        for j, link in enumerate(ph.proxy_faults):
            if link.toxic in STALLING_TOXICS:
                return InprocRefusal(
                    Rule.INPROC_STALLING_TOXIC,
                    f"{where}.proxy_faults[{j}].toxic: {link.toxic!r} stalls the link, and a "
                    "rank thread blocked in the C++ store client on it can be ended by nothing "
                    "but the launch's deadline; run it with --tier torchrun",
                )
        if ph.max_restarts:
            return InprocRefusal(
                Rule.INPROC_RESTARTS,
                f"{where}.max_restarts: torchrun's agent restarts the workers, and here ranks "
                "are threads with no agent; run it with --tier torchrun",
            )
        if ph.store_faults:
            return InprocRefusal(
                Rule.INPROC_STORE_FAULTS,
                f"{where}.store_faults: the hosted store is stopped, killed or restarted as a "
                "process of its own, which the in-process tier does not host; run it with "
                "--tier torchrun",
            )
        if ph.lags:
            return InprocRefusal(
                Rule.INPROC_LAGS,
                f"{where}.lags: a lagging rank waits for a peer's checkpoint call over the "
                "process group, which rank threads do not have; run it with --tier torchrun",
            )
    return None


def collective_refusal(where: str, fmt: str) -> str:
    return (
        f"{where}: {fmt!r} persistence saves and loads on every rank together over the process "
        "group, which rank threads do not have; run it with --tier torchrun"
    )
