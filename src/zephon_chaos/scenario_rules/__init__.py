"""The one validity model of a scenario: what a launch may carry, given its place.

Four modules: ``predicates`` (the rules' questions and constants, written once),
``checking`` (:func:`violations`), ``repairing`` (:func:`normalised`), and ``hosted`` (the
hosted store's faults and torchrun's restarts, both views); this package names them all.

Two views of the same predicates: :func:`violations` lists what a scenario breaks (each a
:class:`RuleBreach` naming the field; ``Scenario.validate`` raises the first), and
:func:`normalised` repairs what can be derived (a launch with more ranks than lanes is a
refusal, a link fault no round can time is dropped, ...). The strategies build every
scenario through ``normalised``, and the explorer's polishing normalises each candidate, so
generation, shrinking, polishing and loading a file all obey the rules written here once.

Rules, per launch ``i`` (C: its canonical_replicas):

* layout: ``world_size`` is ``dp`` data-parallel groups of ``tp`` ranks (``tp`` divides it);
  lanes belong to DP groups, so Zephon's rules below count groups, not ranks. With ``tp`` > 1
  (the downstream adapter's DP x TP layout) C is a multiple of ``dp``, as the adapter requires
  (``ZephonDataLoader._validate_config``); normalising lowers ``tp`` to a divisor of the
  world, and to 1 where C is not a multiple of the groups;
* refusal: ``expect_failure`` exactly when Zephon refuses the launch: more DP groups than C
  (``canonical_replicas ... must be >= dp_degree``, ``Engine._resolve_parallelism_params``), or a
  C other than that of the checkpoint it restores; such a launch takes no checkpoint,
  carries no fault and names the error it expects in ``expect_error`` (normalising: one
  step, and Zephon's own error);
* a launch followed by another checkpoints (the next restores from it), unless a rank fault
  ends it; checkpoints lie within its steps and are collective on every rank;
* rank faults name a rank of the launch and a step within it; none over finite data (a rank
  whose data ran out never reaches its fault), and none beside a link fault; a ``sigstop``
  only at a round point (the harness continues a rank it heard stop there);
* a rank fault at a round point (``RankFault.at``: ``shard``, ``ack#2``, ...) is the launch's
  only rank fault, one of ``RANK_POINT_ACTIONS``, where a round can time it (as a link
  fault below, but with ``aggregate_dir`` too: the rank's interposer wraps its round files,
  ``faults.dir_interposer``, which have no ``participants`` write), on a rank that writes its
  point, and in round n at most the checkpoint count;
* link faults (``proxy_faults``) only where a checkpoint round can time them: two or more
  ranks, aggregation through a store (``store`` or ``store_explicit``), no ``mtp_mode`` (the
  MTP child runs the round; under ``runner: process`` the rank does, as under ``inline``), at
  least one checkpoint, and not a restored launch that checkpoints before its first batch;
  the leader-only points (announce, outcome) on rank 0, the follower-only one (ack)
  elsewhere; a ``reset_peer`` at a round point (at start it resets nothing); the n-th round
  at most the launch's checkpoint count; one that heals (``until``) is a ``down`` or a
  ``reset_peer`` at a round point (``HEALING_TOXICS``); a retry policy only with a link fault or a
  round-point rank fault that leaves its rank alive (``raise``, ``sigstop``): an ``exit``,
  SIGKILL or SIGTERM ends its rank, and torchrun's agent ends the group within one monitor
  interval, long before any round could fail and be retried;
* over finite data the last launch can run dry (it would otherwise stop with lanes out of
  step, which the batch oracle cannot compare);
* ``sync: free`` only with two or more ranks (one rank is late for no one); a lag
  (``RankLag``: a rank that calls a checkpoint once a peer's call of it, or of one ``by``
  intervals later, has ended) only under ``free``, at most one a launch, on two ranks of it
  and checkpoints of it, beside no other fault; a drift of whole intervals (``by`` > 0) beside
  no agreeing policy (lockstep, skip: a deadlock), and ``independent`` retry beside a lag with
  no collective save (``dcp``); a retry policy (lockstep, independent, skip) only
  where a checkpoint can fail on purpose: a link fault, a round-point rank fault or a lag.
  On the in-process tier rank threads run in lockstep (they meet in
  ``inproc.collective``); a lag needs a process group (``inproc.inproc_refusal``).
"""

from __future__ import annotations

from zephon_chaos.scenario_rules import predicates
from zephon_chaos.scenario_rules.checking import (
    violations,
)
from zephon_chaos.scenario_rules.hosted import (
    HOSTED_AGGREGATION,
    MAX_STALL_S,
    RESTART_ACTIONS,
    STORE_ACTIONS,
    NoHostedStore,
    no_store_fault,
    normalised_store_faults,
    store_fault_violations,
)
from zephon_chaos.scenario_rules.predicates import *  # noqa: F403 (all of predicates.__all__)
from zephon_chaos.scenario_rules.repairing import (
    normalised,
)

__all__ = [
    "HOSTED_AGGREGATION",
    "MAX_STALL_S",
    "RESTART_ACTIONS",
    "STORE_ACTIONS",
    "NoHostedStore",
    "no_store_fault",
    "normalised",
    "normalised_store_faults",
    "store_fault_violations",
    "violations",
]
__all__ += predicates.__all__
