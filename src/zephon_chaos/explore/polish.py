"""A last, domain-aware shrinking pass over a finding Hypothesis has already minimized.

Hypothesis shrinks choice sequences; some simplifications need two choices to move at once
(swap the world sizes of two launches and lower C, say), so its result can stop one step
short. This pass tries scenario-level simplifications (drop a launch, a checkpoint or a
fault; move a rank from one launch to another; lower C, steps, world sizes; plainer data
and pipeline settings; every fault at once, as an aimed round may have put one in several
launches) and keeps each one that still fails with the same signature and is
smaller by :func:`size_key`, until none helps or the time is up. Each candidate is made to
obey the scenario rules the strategies build with (``scenario_rules.normalised``: a launch
given more ranks than lanes becomes a refusal, a link fault on a launch of one rank goes, a
last launch over finite data runs dry), so polishing never leaves the space the strategies
generate nor produces a scenario validation refuses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from zephon_chaos.deployment import CHOICES as DEPLOYMENT_CHOICES
from zephon_chaos.deployment import DOWNSTREAM
from zephon_chaos.explore.findings import CODEC_OPTIONS, size_key
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules import normalised
from zephon_chaos.workload.spec import DataSpec, PipelineSpec, plainer_stages

Judge = Callable[[Scenario], str | None]
"""Runs a scenario and returns its signature (None when it passes)."""


def _phases(s: Scenario, phases: list[Launch]) -> Scenario:
    return s.with_(launches=tuple(phases))


def _swap(s: Scenario, i: int, phase: Launch) -> Scenario:
    """``s`` with launch ``i`` replaced by ``phase``."""
    phases = list(s.launches)
    phases[i] = phase
    return _phases(s, phases)


def _clamped(ph: Launch, steps: int) -> Launch:
    cps = tuple(c for c in ph.checkpoints if (c.step, c.extra) <= (steps, 0))
    faults = tuple(f for f in ph.rank_faults if f.at_step <= steps)
    children = tuple(f for f in ph.child_faults if f.at_step <= steps)
    return replace(ph, steps=steps, checkpoints=cps, rank_faults=faults, child_faults=children)


def normalised_candidates(s: Scenario) -> Iterator[Scenario]:
    """The candidates as polishing judges them: each made to obey the scenario rules, then
    validated (a ``ScenarioError`` here is a gap in ``normalised``, not a candidate to skip)."""
    for cand in candidates(s):
        yield normalised(cand).validate()


def candidates(s: Scenario) -> Iterator[Scenario]:
    """Simpler neighbours of ``s``, the biggest simplifications first (raw: moving a rank
    may leave a refusal unflagged until :func:`normalised_candidates` re-derives it)."""
    phases = list(s.launches)
    for i in range(len(phases)):
        if len(phases) > 1:
            yield _phases(s, phases[:i] + phases[i + 1 :])
    faulted = [ph.unfaulted() for ph in phases]
    if faulted != phases:  # all faults at once: an aimed round may have added several
        yield _phases(s, faulted)
    p = s.pipeline
    if p.canonical_replicas > 1:
        yield s.with_(pipeline=replace(p, canonical_replicas=p.canonical_replicas - 1))
    for i in range(len(phases)):
        for j in range(len(phases)):
            if i != j and phases[i].world_size > 1:
                moved = list(phases)
                moved[i] = replace(phases[i], world_size=phases[i].world_size - 1)
                moved[j] = replace(phases[j], world_size=phases[j].world_size + 1)
                yield _phases(s, moved)
    for i, ph in enumerate(phases):
        if ph.world_size > 1:
            yield _swap(s, i, replace(ph, world_size=ph.world_size - 1))
        for j, cp in enumerate(ph.checkpoints):
            cps = ph.checkpoints[:j] + ph.checkpoints[j + 1 :]
            yield _swap(s, i, replace(ph, checkpoints=cps))
            earlier = []
            if cp.step > 0:
                earlier.append(replace(cp, step=cp.step - 1))
            if cp.extra > 0:
                earlier.append(replace(cp, extra=cp.extra - 1))
            for moved in earlier:
                yield _swap(s, i, replace(ph, checkpoints=(*cps[:j], moved, *cps[j:])))
        for j in range(len(ph.rank_faults)):
            faults = ph.rank_faults[:j] + ph.rank_faults[j + 1 :]
            yield _swap(s, i, replace(ph, rank_faults=faults))
        for j, child in enumerate(ph.child_faults):
            others = ph.child_faults[:j] + ph.child_faults[j + 1 :]
            yield _swap(s, i, replace(ph, child_faults=others))
            if child.at_step > 1:
                earlier = replace(child, at_step=child.at_step - 1)
                yield _swap(s, i, replace(ph, child_faults=(*others, earlier)))
        if 1 < ph.steps <= 100:
            yield _swap(s, i, _clamped(ph, ph.steps - 1))
    yield from _plainer(s)


def _plainer(s: Scenario) -> Iterator[Scenario]:
    p, d = s.pipeline, s.data
    plain = PipelineSpec()
    for name in ("aggregation", "runner", "mapping", "mtp_mode", *CODEC_OPTIONS):
        if getattr(p, name) != getattr(plain, name):
            yield s.with_(pipeline=replace(p, **{name: getattr(plain, name)}))
    for field_name, plainest in (("path", "standalone"), ("sync", "lockstep")):
        for i, ph in enumerate(s.launches):
            if getattr(ph, field_name) != plainest:
                yield _swap(s, i, replace(ph, **{field_name: plainest}))
    if s.persist_format != "pickle":
        yield s.with_(persist_format="pickle")
    for name in DEPLOYMENT_CHOICES:  # each deployment field back to the downstream's
        if getattr(s.deployment, name) != getattr(DOWNSTREAM, name):
            yield s.with_(deployment=replace(s.deployment, **{name: getattr(DOWNSTREAM, name)}))
    if len(d.sources) > 1:
        yield s.with_(data=replace(d, sources=d.sources[:1]))
    for field_name in ("seed", "microbatch", "chunk_size", "shuffle"):
        if getattr(d, field_name) != getattr(DataSpec(), field_name):
            yield s.with_(data=replace(d, **{field_name: getattr(DataSpec(), field_name)}))
    for stages in plainer_stages(d.stages):
        yield s.with_(data=replace(d, stages=stages))


def polish(scenario: Scenario, sig: str, judge: Judge, deadline: float) -> Scenario:
    """The smallest scenario reachable by single simplifications that still fails as ``sig``."""
    best = scenario
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for cand in normalised_candidates(best):
            if time.monotonic() >= deadline:
                break
            if size_key(cand) >= size_key(best):
                continue
            if judge(cand) == sig:
                best, improved = cand, True
                break
    return best
