"""A failure's signature: what kind of problem, under which resume, so findings deduplicate.

``<area>.<kind>.<topology>.<window>``, for example
``batches-mid-window.missing.resized.mid-window``:

- ``area``: which oracle or step failed, in this order of precedence (the first that
  applies names the finding): ``reference`` (the uninterrupted run failed), ``launch`` (a
  phase failed that should not have), ``refusal`` (a phase meant to be refused was not, or
  not with the expected error), ``crash`` (a phase with rank faults did not end as
  scheduled), ``batches-identical`` / ``batches-mid-window`` (the global-batch oracle, under
  the exact or the mid-window contract), ``checkpoint`` (the checkpoint oracle),
  ``liveness`` (Zephon's timing promises: :mod:`zephon_chaos.oracles.liveness`);
- ``kind``: the problem within the area: ``missing``, ``duplicated``, ``lane-count``,
  ``divergent``, ``window`` for batches (``dp-group-diverged``: ranks of one DP group consumed
  different batches, :mod:`zephon_chaos.oracles.dp_groups`); ``no-warning``,
  ``spurious-warning``, ``differs``,
  ``coverage``, ``missing-record``, ``failed``, ``none`` for checkpoints; the exception type
  (``ValueError``) or ``timeout`` for launches; ``accepted``, ``wrong-error``, ``hang`` for
  refusals; ``no-end``, ``early-failure``, ``lost-checkpoint``, ``checkpoint`` for crashes;
  ``slow-propagation``, ``unbounded-wait`` for liveness;
- ``topology``: ``resized`` if any launch restored a checkpoint taken on another world size,
  ``same-size`` if every restore kept it, ``no-resume`` if nothing was restored;
- ``window``: ``mid-window`` if any restored checkpoint was taken mid-window, else
  ``boundary`` (``no-resume`` without restores).

Two failures with one signature are taken as one finding; the explorer keeps its smallest
scenario. Problems that a known defect of Zephon explains (see :mod:`.known`) give the
signature ``known.<defect id>`` when nothing else is wrong.
A failure the harness could not describe (:mod:`zephon_chaos.harness_problem`) gives
``harness.<gap>.<topology>.<window>`` when nothing else is wrong: the harness's problem, never
a violation. ``harness.<exception type>.no-resume.no-resume``: the harness raised.
"""

from __future__ import annotations

import re

from zephon_chaos.explore.known import unexplained
from zephon_chaos.harness_problem import HARNESS_AREA
from zephon_chaos.oracles.dp_groups import DIVERGED
from zephon_chaos.runner import ScenarioOutcome

_ERROR_TYPE = re.compile(r"first failure: rank \d+: (?P<type>[A-Za-z_][\w.]*)")

_RULES: list[tuple[str, str, str]] = [
    # (area, kind, regular expression over a problem line); first match wins.
    ("reference", "failed", r"^the reference run failed"),
    ("refusal", "accepted", r"was expected to fail but succeeded"),
    ("refusal", "hang", r"was expected to fail with an error but hung"),
    ("refusal", "wrong-error", r"failed, but not with"),
    ("crash", "no-end", r"was to end by its scheduled rank fault"),
    ("crash", "early-failure", r"failed before its scheduled fault fired"),
    ("crash", "lost-checkpoint", r"due before the fault, did not complete|persisted no checkpoint"),
    ("crash", "checkpoint", r"checkpoint \d+, before the fault, "),
    ("launch", "failed", r"^phase \d+ failed: "),
    ("batches-identical", "dp-group-diverged", rf"DP group \d+ {DIVERGED}: "),
    ("checkpoint", "none", r"completed no checkpoint to restore from"),
    ("checkpoint", "failed", r"checkpoint \d+ failed on ranks"),
    ("checkpoint", "missing-record", r"has no record from ranks"),
    ("checkpoint", "differs", r"differs between ranks"),
    ("checkpoint", "coverage", r"covers lanes"),
    ("checkpoint", "no-warning", r"taken mid-window .* but no rank warned"),
    ("checkpoint", "spurious-warning", r"on a window boundary but ranks"),
    ("liveness", "slow-propagation", r": liveness: slow propagation: "),
    ("liveness", "unbounded-wait", r": liveness: unbounded wait: "),
]
_AREA_ORDER = ("reference", "launch", "refusal", "crash", "batches", "checkpoint", "liveness")


def signature(outcome: ScenarioOutcome) -> str | None:
    """The outcome's signature, or None if it passed."""
    if outcome.ok:
        return None
    problems = unexplained(outcome)
    verdict = outcome.verdict
    if not problems and (verdict is None or verdict.ok):
        if outcome.harness_problems:  # nothing of the code under test's is wrong but that
            gap = outcome.harness_problems[0].gap.value
            return ".".join((HARNESS_AREA, gap, *_resume_kind(outcome)))
        from zephon_chaos.explore.known import explaining

        ids = sorted({d.id for d in explaining(outcome)})
        return "known." + "+".join(ids) if ids else "unclassified.unknown"
    area, kind = _classify(problems, outcome)
    return ".".join((area, kind, *_resume_kind(outcome)))


def _classify(problems: list[str], outcome: ScenarioOutcome) -> tuple[str, str]:
    found: list[tuple[str, str]] = []
    for problem in problems:
        for area, kind, pattern in _RULES:
            if re.search(pattern, problem):
                if area in ("reference", "launch"):
                    kind = _error_kind(problem)
                found.append((area, kind))
                break
        else:
            found.append(("checkpoint", "other"))
    verdict = outcome.verdict
    if verdict is not None and not verdict.ok:
        found.append((_verdict_area(verdict.contract), _verdict_kind(verdict)))
    return min(found, key=lambda ak: _AREA_ORDER.index(ak[0].split("-")[0]))


def _error_kind(problem: str) -> str:
    if "passed its deadline" in problem:
        return "timeout"
    m = _ERROR_TYPE.search(problem)
    return m.group("type").rsplit(".", 1)[-1] if m else "failed"


def _verdict_area(contract: str) -> str:
    return "batches-identical" if contract.startswith("identical") else "batches-mid-window"


def _verdict_kind(verdict: object) -> str:
    missing = getattr(verdict, "missing", [])
    duplicated = getattr(verdict, "duplicated", [])
    problems: list[str] = getattr(verdict, "problems", [])
    if missing:
        return "missing"
    if duplicated:
        return "duplicated"
    if any("delivered" in p and "expected" in p for p in problems):
        return "lane-count"
    if any("unknown lanes" in p for p in problems):
        return "unknown-lanes"
    if any(p.startswith("window ") for p in problems):
        return "window"
    return "divergent"


def _resume_kind(outcome: ScenarioOutcome) -> tuple[str, str]:
    resumes = outcome.resumes
    if not resumes:
        return ("no-resume", "no-resume")
    topology = "resized" if any(r.resized for r in resumes) else "same-size"
    window = "mid-window" if any(r.mid_window for r in resumes) else "boundary"
    return (topology, window)
