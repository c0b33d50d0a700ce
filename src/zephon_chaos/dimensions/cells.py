"""The dimensions of the declared scenario space, their values, and a cell: one value of one
dimension. ``space`` declares which cells a run can reach, ``landing`` where a scenario lands,
``aiming`` which cells the search aims at."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from zephon_chaos.oracles.faults import COMPLETED, FAILED, FINDING, SPLIT, SPLIT_RESOLVED
from zephon_chaos.oracles.healing import HealOutcome
from zephon_chaos.workload.spec import ROUND_PHASES, StagesSpec

START = "start"
"""A link fault from the launch's start rather than at a round point."""
ROUND_POINTS: tuple[str, ...] = (START, *ROUND_PHASES)
FAULT_OUTCOMES: tuple[str, ...] = (COMPLETED, FAILED, SPLIT, SPLIT_RESOLVED, FINDING)
HEAL_OUTCOMES: tuple[str, ...] = tuple(o.value for o in HealOutcome)
"""What the heal oracle (``oracles.healing``) said of a healed fault's next checkpoint call."""
ROLES: tuple[str, ...] = ("leader", "follower")
MAP_STAGES: tuple[str, ...] = ("off", "tokens", "tokens + filter")
"""What a scenario's map stage does: nothing, give rows tokens, or also drop some."""


def map_stage(stages: StagesSpec) -> str:
    """The ``MAP_STAGES`` value of ``stages``."""
    return MAP_STAGES[0 if not stages.tokens else 2 if stages.drop_every else 1]


class Dim(Enum):
    """A dimension of the space; its value is the label reports show."""

    LAUNCHES = "launches"
    WORLD_SIZE = "world size"
    TP = "tp (ranks per DP group)"
    LAYOUT_CHANGE = "DP x TP layout change across a resume"
    LAUNCH_PATH = "launch path"
    RUNNER = "runner"
    MTP = "mtp_mode"
    MAPPING = "mapping"
    AGGREGATION = "aggregation"
    PERSISTENCE = "persistence"
    SERIALIZER = "aggregate_serializer"
    COMPRESSOR = "aggregate_compressor"
    TIMEOUT = "aggregate_timeout_s"
    PREFETCH = "prefetch_batches"
    SHUTDOWN = "shutdown_mode"
    DEPLOYMENT = "deployment (field, value)"
    DATA = "data (kind, exhaustion)"
    MAP_STAGE = "map stage (tokenizer stand-in, filter)"
    PACKING = "pack_sequences algorithm"
    SHUFFLE = "shuffle buffer algorithm"
    CHECKPOINT = "checkpoint"
    TRAJECTORY = "trajectory"
    RELAUNCH = "relaunch"
    RESUME = "resume (topology, window)"
    RANK_FAULT = "rank fault"
    RANK_FAULT_POINT = "rank fault (action, step or round point, aggregation, retry)"
    RANK_FAULT_ROLE = "rank fault at a round point (point, rank role)"
    RANK_FAULT_OUTCOME = "rank fault at a round point: outcome"
    STORE_FAULT = "store fault (toxic, point, aggregation, retry)"
    STORE_FAULT_ROLE = "store fault (point, rank role)"
    STORE_FAULT_OUTCOME = "store fault outcome"
    STORE_FAULT_HEAL = "store fault that heals (toxic, round point, until)"
    STORE_FAULT_HEAL_OUTCOME = "store fault that heals: the next checkpoint call"
    SYNC = "sync (how ranks arrive at a checkpoint)"
    LAG = "lag (who is late, policy after the late round)"
    DRIFT = "drift (a lag of whole checkpoint intervals, policy after it)"
    HOSTED_STORE_FAULT = "hosted store fault (action, round point)"
    HOSTED_STORE_OUTCOME = "hosted store fault outcome"
    RESTARTS = "torchrun --max-restarts"
    CHILD_FAULT = "child processes killed under a live rank (target, when)"


CHILD_WHEN: tuple[str, ...] = ("mid-launch", "at the last step")
"""When a child fault fires: with batches still to draw, or right before the launch's last
checkpoints and the pipeline's close (where the consumer stops drawing)."""


class Checkpoint(Enum):
    STEP_0 = "at step 0, before the first batch"
    BOUNDARY = "on a step boundary"
    MID_WINDOW = "mid-window (step + extra batches)"
    AFTER_DRY = "after the data ran out"


class Trajectory(Enum):
    SAME = "same size"
    GROWTH = "growth"
    SHRINK = "shrink"
    NOT_DIVIDING = "G does not divide C"
    ABOVE_C = "G > C (refusal expected)"


class LayoutChange(Enum):
    """How a resume changes a DP x TP layout (beside plain resizes of one rank per group)."""

    DP_ONLY = "DP changes, TP fixed (> 1)"
    TP_ONLY = "TP changes, DP fixed"
    BOTH = "DP and TP change"


class Relaunch(Enum):
    AFTER_CRASH = "after a crash"
    SAME_CHECKPOINT = "after a crash before any checkpoint: from the same checkpoint"
    SAME_RUN_ID = "after a crash before any checkpoint: same checkpoint, same run_id"
    SURVIVING_STORE = "after a crash or a failed round, against the hosted store it left"


class Why(Enum):
    """Why the strategies cannot reach a cell for this run's tier and options."""

    THREADS_NO_LAUNCH_PATH = "threads have no torchrun launch path (standalone only)"
    THREADS_NO_WORKERS = "threads start no worker processes (runner process, mtp_mode)"
    THREADS_NO_PROCESS_FAULT = "a signal or exit ends a process; in-process ranks are threads"
    NO_ODDS = "the strategies give it no odds on this tier and profile"
    THREADS_NO_PROCESS_GROUP = "dcp saves over a process group: in-process ranks have none"
    DCP_WITH_LINK_FAULTS = "no dcp beside link faults: a split outcome would block its save"
    FAULTS_OFF = "rank faults are off for this run"
    ONE_LAUNCH = "max_phases is 1: nothing is relaunched or resumed"
    ONE_WORLD_SIZE = "max_world is 1: one size, dividing every C, never above C"
    THREAD_STALL = (
        "a stalled link holds a rank thread inside the C++ store client until the launch's "
        "deadline: the in-process tier draws no stalling toxic (torchrun does)"
    )
    STORE_FAULTS_OFF = "store faults are off (explore --store-faults)"
    ENDS_GROUP = (
        "an exit, SIGKILL or SIGTERM ends its rank, and torchrun's agent the group, before any "
        "round could fail and be retried: such a launch's retry policy is always none"
    )
    ONE_RANK = "a link fault needs two ranks: a single rank never contacts the store"
    DIR_NO_STORE = "aggregate_dir has no store traffic to fault"
    DIR_NO_PARTICIPANTS = (
        "aggregate_dir has no participants write: the leader lists the round's shard files"
    )
    RESET_AT_START = "a reset at start resets nothing: the strategies move it to the first round"
    LEADER_ONLY = "only the leader (rank 0) announces a round and publishes its outcome"
    FOLLOWER_ONLY = "only followers acknowledge; the leader writes no ack"
    TP_ABOVE_WORLD = "no world size up to max_world holds a DP group of that many ranks"
    NO_SUCH_LAYOUTS = "no two layouts up to max_world differ that way"
    THREADS_START_TOGETHER = (
        "rank threads run in lockstep: a free-running rank's lag waits for a point-to-point "
        "message over a process group, which threads have none of (torchrun draws both)"
    )
    LAG_NEEDS_TWO = "a lag needs two ranks: one is late for the other"
    DRIFT_DEADLOCKS = (
        "an agreeing policy (lockstep, skip) beside a drift of whole intervals deadlocks: the "
        "awaited rank's agreement waits for the lagging rank, which waits for its later call"
    )
    STOP_AT_STEP = "a stop at a step has nothing to continue it: drawn at round points only"
    RETRY_NEEDS_ROUND = "a retry policy needs a failed round; a step fault ends the launch"
    HOSTED_STORE_INPROC = "the hosted store is faulted as a process of its own (torchrun tier)"
    THREADS_NO_AGENT = "torchrun's agent restarts the workers; rank threads have no agent"
    THREADS_NO_CHILDREN = "rank threads share one process: no rank has worker processes of its own"


@dataclass(frozen=True)
class Cell:
    """One value (or combination of values) of one dimension."""

    dim: Dim
    value: tuple[str, ...]

    def label(self) -> str:
        return ", ".join(self.value)


def cell(dim: Dim, *value: object) -> Cell:
    return Cell(dim, tuple(str(v) for v in value))


def layout_change(before: tuple[int, int], after: tuple[int, int]) -> LayoutChange | None:
    """How (dp, tp) ``before`` becomes ``after``; None when unchanged or one rank per group."""
    (dp0, tp0), (dp1, tp1) = before, after
    if max(tp0, tp1) == 1 or (dp0, tp0) == (dp1, tp1):
        return None
    if tp0 == tp1:
        return LayoutChange.DP_ONLY
    return LayoutChange.TP_ONLY if dp0 == dp1 else LayoutChange.BOTH


@dataclass(frozen=True)
class Declared:
    """A cell of the declared space, and why the strategies cannot reach it (None: they can)."""

    cell: Cell
    why_not: Why | None = None
