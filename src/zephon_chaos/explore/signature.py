"""A failure's signature: what kind of problem, under which resume, so findings deduplicate.

``<area>.<kind>.<topology>.<window>``, for example
``batches-mid-window.missing.resized.mid-window``:

- ``area``, ``kind``: the :class:`~zephon_chaos.problem.Problem` of highest precedence
  (``problem.Area`` lists the areas in that order; a launch's kind is its error type, such
  as ``RuntimeError``, or ``timeout``), read from the values the oracles and the runner made;
- ``topology``: ``resized`` if any launch restored a checkpoint taken on another world size,
  ``same-size`` if every restore kept it, ``no-resume`` if nothing was restored;
- ``window``: ``mid-window`` if any restored checkpoint was taken mid-window, else
  ``boundary`` (``no-resume`` without restores).

Two failures with one signature are taken as one finding; the explorer keeps its smallest
scenario. Problems that a known defect of Zephon explains (see :mod:`.known`) give the
signature ``known.<defect id>`` when nothing else is wrong, or ``limitation.<id>`` when only
documented limitations a recipe meets are involved.
A failure the harness could not describe (:mod:`zephon_chaos.harness_problem`) gives
``harness.<gap>.<topology>.<window>`` when nothing else is wrong: the harness's problem, never
a violation. ``harness.<exception type>.no-resume.no-resume``: the harness raised.
"""

from __future__ import annotations

from zephon_chaos.explore.known import KnownKind, explaining, unexplained
from zephon_chaos.harness_problem import HARNESS_AREA
from zephon_chaos.oracles.global_batches import Verdict
from zephon_chaos.problem import Area, Problem
from zephon_chaos.runner import ScenarioOutcome


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
        found = explaining(outcome)
        ids = sorted({d.id for d in found})
        if not ids:
            return "unclassified.unknown"
        only_limits = all(d.kind is KnownKind.LIMITATION for d in found)
        kind = KnownKind.LIMITATION if only_limits else KnownKind.DEFECT
        return f"{kind.value}." + "+".join(ids)
    area, kind = _first(problems, verdict)
    return ".".join((area.value, str(kind), *_resume_kind(outcome)))


def _first(problems: list[Problem], verdict: Verdict | None) -> tuple[Area, str]:
    """The (area, kind) of highest precedence among the problems and the batch verdict."""
    found = [(p.area, p.kind) for p in problems]
    if verdict is not None and not verdict.ok:
        found.append((verdict.contract.area, verdict.kind))
    return min(found, key=lambda ak: ak[0].precedence)


def _resume_kind(outcome: ScenarioOutcome) -> tuple[str, str]:
    resumes = outcome.resumes
    if not resumes:
        return ("no-resume", "no-resume")
    topology = "resized" if any(r.resized for r in resumes) else "same-size"
    window = "mid-window" if any(r.mid_window for r in resumes) else "boundary"
    return (topology, window)
