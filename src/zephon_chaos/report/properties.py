"""Key facts of a test's groups and scenarios as JUnit properties (``report.user_properties``).

CI dashboards and ``benchmarks/reliability.py`` read these from ``--junitxml`` without
parsing report text: a group's verdict, how often its static port was busy, who failed first,
where each process was stuck, a scenario's verdict and its replay command.
"""

from __future__ import annotations

from typing import Any

from zephon_chaos.launch.result import GroupResult

Property = tuple[str, str]
MAX_VALUE = 300


def group_properties(result: GroupResult) -> list[Property]:
    key = f"group.{result.name}"
    state = "timed_out" if result.timed_out else ("ok" if result.ok else "failed")
    props: list[Property] = [
        (key, result.summary().splitlines()[0]),
        (f"{key}.state", state),
        (f"{key}.duration_s", f"{result.duration_s:.2f}"),
        (f"{key}.port_retries", str(max(0, result.attempts - 1))),
    ]
    ff = result.first_failure
    if ff is not None:
        text = f"rank {ff.rank}: {ff.status}" + (f": {ff.error}" if ff.error else "")
        props.append((f"{key}.first_failure", text))
    suspects = [str(o.rank) for o in result.ranks if o.unexplained_sigkill]
    if suspects:
        props.append((f"{key}.unexplained_sigkill_ranks", ",".join(suspects)))
    for who, where in result.stuck_frames().items():
        props.append((f"{key}.stuck.{who.split(' (')[0].replace(' ', '')}", where))
    return [(k, _clip(v)) for k, v in props]


def outcome_properties(outcome: Any) -> list[Property]:
    """Facts of a :class:`~zephon_chaos.runner.ScenarioOutcome` (duck-typed: no runner import)."""
    key = f"scenario.{outcome.scenario.name}"
    props: list[Property] = [(f"{key}.verdict", "ok" if outcome.ok else "violation")]
    verdict = getattr(outcome, "verdict", None)
    if verdict is not None and getattr(verdict, "first_divergence", None) is not None:
        d = verdict.first_divergence
        props.append((f"{key}.first_divergence", f"global step {d.step}, lane {d.lane}"))
    if outcome.problems:
        props.append((f"{key}.problem", outcome.problems[0].text))
    replay = replay_command(outcome)
    if replay:
        props.append((f"{key}.replay", replay))
    return [(k, _clip(v)) for k, v in props]


def replay_command(outcome: Any) -> str | None:
    for line in outcome.report().splitlines():
        if line.startswith("replay: "):
            return line.removeprefix("replay: ")
    return None


def _clip(value: str) -> str:
    value = value.replace("\n", " ")
    return value if len(value) <= MAX_VALUE else value[: MAX_VALUE - 1] + "…"
