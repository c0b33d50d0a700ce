"""Every refusal of the scenario model, by a stable id.

Each removes part of the scenario space: ``docs/space.md`` says for each why (the state
cannot arise, a user error Zephon refuses, a Zephon limitation a default recipe meets, or a
limit of the harness), and ``tests/unit/scenario_rules/test_space_doc.py`` keeps the two in
step. A :class:`~zephon_chaos.scenario_rules.predicates.RuleBreach` carries its rule, as does a
``ScenarioError`` from ``Scenario.validate`` and an in-process tier refusal.
"""

from __future__ import annotations

from enum import Enum


class Rule(Enum):
    """A refusal; the value is its id in ``docs/space.md``."""

    # Scenario.validate: values no run could use
    C_AT_LEAST_ONE = "c-at-least-one"
    MAPPING_KNOWN = "mapping-known"
    RUNNER_KNOWN = "runner-known"
    AGGREGATION_KNOWN = "aggregation-known"
    TIMEOUT_POSITIVE = "timeout-positive"
    PERSIST_FORMAT_KNOWN = "persist-format-known"
    BACKEND_KNOWN = "backend-known"
    DEPLOYMENT_KNOWN = "deployment-known"
    FOUND_KNOWN = "found-known"
    SOURCES_NONEMPTY = "sources-nonempty"
    MICROBATCH_POSITIVE = "microbatch-positive"
    CHUNK_SIZE_POSITIVE = "chunk-size-positive"
    STAGES_TOKEN_LIMIT = "stages-token-limit"
    STAGES_NEED_TOKENS = "stages-need-tokens"
    STAGES_VALUES = "stages-values"
    PHASES_NONEMPTY = "phases-nonempty"
    WORLD_SIZE_POSITIVE = "world-size-positive"
    STEPS_NONNEGATIVE = "steps-nonnegative"
    LAUNCH_PATH_KNOWN = "launch-path-known"
    RETRY_KNOWN = "retry-known"
    SYNC_KNOWN = "sync-known"
    HOSTS_LAYOUT = "hosts-layout"
    TP_POSITIVE = "tp-positive"
    PHASE_C_AT_LEAST_ONE = "phase-c-at-least-one"

    # checking: layout, Zephon's refusals, checkpoints
    TP_DIVIDES_WORLD = "tp-divides-world"
    TP_C_MULTIPLE_OF_DP = "tp-c-multiple-of-dp"
    MORE_GROUPS_THAN_C_EXPECTED = "more-groups-than-c-expected"
    CHANGED_C_EXPECTED = "changed-c-expected"
    REFUSED_NAMES_ERROR = "refused-names-error"
    REFUSED_RUNS_NOTHING = "refused-runs-nothing"
    REFUSED_NO_RETRY = "refused-no-retry"
    ACCEPTED_NOT_EXPECTED_TO_FAIL = "accepted-not-expected-to-fail"
    ERROR_ONLY_WHEN_REFUSED = "error-only-when-refused"
    CHECKPOINT_WITHIN_STEPS = "checkpoint-within-steps"
    FOLLOWED_LAUNCH_CHECKPOINTS = "followed-launch-checkpoints"
    CHECKPOINTS_COLLECTIVE = "checkpoints-collective"
    RUN_DRY = "run-dry"

    # checking: rank faults
    RANK_FAULT_FINITE_DATA = "rank-fault-finite-data"
    RANK_FAULT_BESIDE_LINK_FAULT = "rank-fault-beside-link-fault"
    ONE_ROUND_POINT_FAULT = "one-round-point-fault"
    RANK_FAULT_RANK = "rank-fault-rank"
    RANK_FAULT_STEP_WITHIN = "rank-fault-step-within"
    STOP_AT_STEP = "stop-at-step"
    RANK_POINT_MALFORMED = "rank-point-malformed"
    RANK_POINT_ACTION = "rank-point-action"
    RANK_POINT_ONE_RANK = "rank-point-one-rank"
    RANK_POINT_MTP_MODE = "rank-point-mtp-mode"
    RANK_POINT_NO_CHECKPOINT = "rank-point-no-checkpoint"
    RANK_POINT_RESTORED_STEP_ZERO = "rank-point-restored-step-zero"
    RANK_POINT_NOT_ON_DIR = "rank-point-not-on-dir"
    RANK_POINT_WRITER = "rank-point-writer"
    RANK_POINT_ROUND_COUNT = "rank-point-round-count"

    # checking: link faults and retry policies
    RETRY_NEEDS_FAILURE = "retry-needs-failure"
    LINK_FAULT_ONE_RANK = "link-fault-one-rank"
    LINK_FAULT_NOT_STORE = "link-fault-not-store"
    LINK_FAULT_MTP_MODE = "link-fault-mtp-mode"
    LINK_FAULT_NO_CHECKPOINT = "link-fault-no-checkpoint"
    LINK_FAULT_RESTORED_STEP_ZERO = "link-fault-restored-step-zero"
    LINK_FAULT_MALFORMED = "link-fault-malformed"
    LINK_FAULT_RANK = "link-fault-rank"
    LINK_FAULT_WRITER = "link-fault-writer"
    LINK_FAULT_STREAM = "link-fault-stream"
    RESET_AT_START = "reset-at-start"
    LINK_FAULT_ROUND_COUNT = "link-fault-round-count"
    LINK_HEAL_KNOWN = "link-heal-known"
    LINK_HEAL_TOXIC = "link-heal-toxic"
    LINK_HEAL_AT_ROUND = "link-heal-at-round"

    # checking: arrival (sync, lags)
    FREE_NEEDS_TWO = "free-needs-two"
    LAG_NEEDS_FREE = "lag-needs-free"
    ONE_LAG = "one-lag"
    LAG_ALONE = "lag-alone"
    LAG_DRIFT_NO_AGREEMENT = "lag-drift-no-agreement"
    LAG_INDEPENDENT_COLLECTIVE_SAVE = "lag-independent-collective-save"
    LAG_FITS = "lag-fits"
    LAG_TP_PEERS = "lag-tp-peers"

    # checking: child faults
    CHILD_FAULT_NO_WORKERS = "child-fault-no-workers"
    CHILD_FAULT_MTP_MODE = "child-fault-mtp-mode"
    CHILD_FAULT_FINITE_DATA = "child-fault-finite-data"
    CHILD_FAULT_ALONE = "child-fault-alone"
    CHILD_FAULT_LOCKSTEP = "child-fault-lockstep"
    CHILD_FAULT_TARGET = "child-fault-target"
    CHILD_FAULT_RANK = "child-fault-rank"
    CHILD_FAULT_STEP = "child-fault-step"
    CHILD_FAULT_TAIL = "child-fault-tail"

    # hosted: the hosted store's faults
    STORE_FAULT_REFUSED_LAUNCH = "store-fault-refused-launch"
    STORE_FAULT_NOT_HOSTED = "store-fault-not-hosted"
    STORE_FAULT_ONE_RANK = "store-fault-one-rank"
    STORE_FAULT_MTP_MODE = "store-fault-mtp-mode"
    STORE_FAULT_NO_CHECKPOINT = "store-fault-no-checkpoint"
    STORE_FAULT_RESTORED_STEP_ZERO = "store-fault-restored-step-zero"
    ONE_STORE_FAULT = "one-store-fault"
    STORE_FAULT_ALONE = "store-fault-alone"
    STORE_ACTION_KNOWN = "store-action-known"
    STORE_FAULT_POINT = "store-fault-point"
    STORE_FAULT_ROUND_COUNT = "store-fault-round-count"
    STALL_BOUND = "stall-bound"

    # hosted: torchrun's restarts
    RESTARTS_REFUSED_LAUNCH = "restarts-refused-launch"
    RESTARTS_NONNEGATIVE = "restarts-nonnegative"
    RESTARTS_NEED_RANK_FAULT = "restarts-need-rank-fault"
    RESTART_FAULT_ATTEMPT_ZERO = "restart-fault-attempt-zero"
    RESTART_ACTIONS = "restart-actions"
    RESTARTS_ONE_HOST = "restarts-one-host"
    RESTARTED_LAUNCH_CHECKPOINTS = "restarted-launch-checkpoints"

    # inproc.inproc_refusal: what the in-process tier cannot run
    INPROC_CHILD_FAULTS = "inproc-child-faults"
    INPROC_RUNNER_PROCESS = "inproc-runner-process"
    INPROC_MTP_MODE = "inproc-mtp-mode"
    INPROC_DCP = "inproc-dcp"
    INPROC_LAUNCH_PATH = "inproc-launch-path"
    INPROC_PROCESS_ACTION = "inproc-process-action"
    INPROC_STALLING_TOXIC = "inproc-stalling-toxic"
    INPROC_RESTARTS = "inproc-restarts"
    INPROC_STORE_FAULTS = "inproc-store-faults"
    INPROC_LAGS = "inproc-lags"
