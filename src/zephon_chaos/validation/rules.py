"""Table (a): Zephon 0.2.0's configuration rules, each with its source, outcome and moment.

Every row says which exception (or warning) a setting produces, a fragment of its message,
and the moment it surfaces, as measured against real Zephon; ``predict`` walks the rows in
the order Zephon runs its checks, so it is a model of Zephon that the probe can refute.
``docs/validation.md`` is rendered from these objects (``validation.doc``) and a test keeps
the two identical; a row's type is ``validation.rule``, the rows' conditions are in
``validation.conditions``, the value sets in ``validation.value_sets``, and ``validation.judge``
predicts and compares. This module is data: the rows and nothing else.

Nothing here imports Zephon or torch: the recipe contract and the doc use the table too.
"""

from __future__ import annotations

from zephon_chaos.validation import conditions as when
from zephon_chaos.validation.model import (
    DEAD,
    SCRATCH,
    Moment,
    StoreUri,
    ZephonConfig,
)
from zephon_chaos.validation.rule import Citation, Reaction, ZephonRule

ZEPHON_VERSION = "0.2.0"
"""The Zephon release the line numbers and measurements below belong to."""

__all__ = ["ZEPHON_RULES", "ZEPHON_VERSION", "Citation", "Reaction", "ZephonRule"]

_P = "_internal/pipeline.py"
_E = "_internal/engine.py"
_C = "_internal/coordination.py"
_K = "_internal/kvstore.py"

_STORE = StoreUri()
_TWO = {"world_size": 2, "canonical_replicas": 2}

ZEPHON_RULES: tuple[ZephonRule, ...] = (
    ZephonRule(
        id="Z01",
        setting="option names",
        condition="a removed option name (`shm_min_size`, `coalesce_tensors`)",
        kind=Reaction.ERROR,
        outcome="TypeError",
        fragment="is no longer supported",
        moment=Moment.OPTIONS,
        cites=(Citation(_P, "Pipeline.options", 1493, "is no longer supported"),),
        witness=ZephonConfig(extra_options=("shm_min_size",)),
        applies=when.removed_option,
        notes=(
            "The one error `options()` raises itself, against DESIGN.md's 'validation errors "
            "surface at the first next(), not at options()'. Checked before the unknown-name "
            "loop, so no Z02 warning accompanies it."
        ),
        finding=True,
    ),
    ZephonRule(
        id="Z02",
        setting="option names",
        condition="an unknown option name, e.g. the misspelt `aggregate_stor`",
        kind=Reaction.WARNING,
        outcome="UserWarning",
        fragment="Unknown pipeline option",
        moment=Moment.OPTIONS,
        cites=(Citation(_P, "Pipeline.options", 1497, "Unknown pipeline option"),),
        witness=ZephonConfig(extra_options=("aggregate_stor",)),
        applies=when.unknown_options,
        notes=(
            "Only a warning, and the option is dropped: a misspelt `aggregate_store` runs "
            "with no store at all (one process: the default temp directory)."
        ),
    ),
    ZephonRule(
        id="Z03",
        setting="restore",
        condition="`pipe.restore()` of a dict that is not a checkpoint",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="cannot be constructed from raw dict",
        moment=Moment.RESTORE,
        cites=(
            Citation(_P, "Pipeline.restore", 2047, "EngineStateV2.load(ckpt)"),
            Citation(
                "_internal/checkpoint/_schemas.py",
                "CheckpointMixin.from_dict",
                190,
                "cannot be constructed from raw dict",
            ),
        ),
        witness=ZephonConfig(restore_from="garbage"),
        applies=when.garbage_ckpt,
        notes="The schema is checked eagerly, at the call.",
    ),
    ZephonRule(
        id="Z04",
        setting="restore",
        condition="`pipe.restore()` of a checkpoint from a newer engine version",
        kind=Reaction.ERROR,
        outcome="RuntimeError",
        fragment="is newer than the supported version",
        moment=Moment.RESTORE,
        cites=(
            Citation(_P, "Pipeline.restore", 2047, "EngineStateV2.load(ckpt)"),
            Citation("_internal/checkpoint/_migrations.py", "migrate", 298, "is newer than the"),
        ),
        witness=ZephonConfig(restore_from="future"),
        applies=when.future_ckpt,
    ),
    ZephonRule(
        id="Z05",
        setting="auto_validation",
        condition="not one of strict/warn/off (case-insensitive)",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="auto_validation must be one of",
        moment=Moment.ITER,
        cites=(
            Citation(_P, "Pipeline._run_auto_validation", 1762, "auto_validation must be one of"),
            Citation(_P, "Pipeline.__iter__", 1787, "self._run_auto_validation()"),
        ),
        witness=ZephonConfig(auto_validation="bogus"),
        applies=when.bad_auto_validation,
        notes=(
            "Raised by `iter(pipe)`, before any `next()`: DESIGN.md's 'validation errors "
            "surface at the first next()' holds for every other error row, not this one."
        ),
        finding=True,
    ),
    ZephonRule(
        id="Z06",
        setting="world_size",
        condition="world_size < 1",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="must be >= 1",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 521, "must be >= 1"),),
        witness=ZephonConfig(world_size=0),
        applies=when.ws_below_one,
    ),
    ZephonRule(
        id="Z07",
        setting="global_rank",
        condition="global_rank outside [0, world_size)",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="must be in [0, world_size",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_E, "Engine._resolve_parallelism_params", 537, "must be in [0, world_size"),
        ),
        witness=ZephonConfig(world_size=2, global_rank=2, canonical_replicas=2),
        applies=when.rank_out_of_range,
    ),
    ZephonRule(
        id="Z08",
        setting="canonical_replicas",
        condition="C < 1",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="canonical_replicas",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 561, "must be >= 1"),),
        witness=ZephonConfig(canonical_replicas=0),
        applies=when.c_below_one,
        notes="Message: `canonical_replicas (0) must be >= 1`.",
    ),
    ZephonRule(
        id="Z09",
        setting="canonical_replicas",
        condition="world size G > C (C defaults to G when unset)",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="must be >= dp_degree",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 566, "must be >= dp_degree"),),
        witness=ZephonConfig(world_size=4, canonical_replicas=2),
        applies=when.g_above_c,
        notes=(
            "The message names `dp_degree`, which defaults to world_size; a user who set only "
            "world_size reads about an option they never set."
        ),
    ),
    ZephonRule(
        id="Z10",
        setting="canonical_replicas",
        condition="C not a multiple of G",
        kind=Reaction.WARNING,
        outcome="RuntimeWarning",
        fragment="is not divisible by dp_degree",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 585, "is not divisible by"),),
        witness=ZephonConfig(
            world_size=2, canonical_replicas=3, aggregate_dir=SCRATCH, checkpoint=False
        ),
        applies=when.c_not_multiple,
        notes="Uneven lanes per rank are allowed; emitted before any store check below.",
    ),
    ZephonRule(
        id="Z11",
        setting="aggregate_store + aggregate_dir",
        condition="both set (any world size)",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="Set at most one of RuntimeOptions.aggregate_dir and",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_C, "make_coordinator", 1132, "Set at most one of"),),
        witness=ZephonConfig(aggregate_store=_STORE, aggregate_dir=SCRATCH),
        applies=when.both_set,
        notes="Raised when the engine is built, not by `options()`; even with world_size=1.",
    ),
    ZephonRule(
        id="Z12",
        setting="aggregate_store",
        condition="unknown scheme, or no `://` at all (`redis://h:1`, `h:1`)",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="Unknown aggregate_store scheme",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "open_kv_store", 139, "Unknown aggregate_store scheme"),),
        witness=ZephonConfig(aggregate_store=StoreUri(scheme="redis")),
        applies=when.uri_is("scheme"),
        notes="Raised even with world_size=1, where the store would never be used.",
    ),
    ZephonRule(
        id="Z13",
        setting="aggregate_store",
        condition="`torch://` with userinfo, a path, a query or a fragment",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="may name only a host and port",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_K, "TorchKVStore.from_uri", 198, "may name only a host and port"),
            Citation(_K, "TorchKVStore.from_uri", 200, "may name only a host and port"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(path="/x")),
        applies=when.uri_is("extras"),
        notes="A bare trailing `/` is allowed (the path is stripped of slashes).",
    ),
    ZephonRule(
        id="Z14",
        setting="aggregate_store",
        condition="`torch://host:port` with a non-numeric port or one above 65535",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="has an invalid port",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "TorchKVStore.from_uri", 206, "has an invalid port"),),
        witness=ZephonConfig(aggregate_store=StoreUri(port="99999")),
        applies=when.uri_is("bad_port"),
        notes="`-1` is non-numeric to `urllib.parse`, so it lands here too.",
    ),
    ZephonRule(
        id="Z15",
        setting="aggregate_store",
        condition="`torch://host:0`",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="is not a valid port",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_K, "TorchKVStore.from_uri", 207, "port = _parse_port(explicit_port, uri)"),
            Citation(_K, "_parse_port", 328, "is not a valid port"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(port="0")),
        applies=when.uri_is("zero_port"),
        notes="Port 0 passes `urllib.parse` and fails Zephon's own range check: a second wording.",
    ),
    ZephonRule(
        id="Z16",
        setting="aggregate_store",
        condition="`torch://host`, `torch://host:` or `torch://:port` (host or port missing)",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="must name both a host and a port",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "TorchKVStore.from_uri", 209, "must name both a host and a port"),),
        witness=ZephonConfig(aggregate_store=StoreUri(port=None)),
        applies=when.uri_is("incomplete"),
    ),
    ZephonRule(
        id="Z17",
        setting="aggregate_store + aggregate_dir",
        condition="neither set (or `aggregate_dir=''`) with world_size > 1",
        kind=Reaction.ERROR,
        outcome="RuntimeError",
        fragment="must be set for multi-node checkpoint aggregation",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_C, "FileCoordinator.__init__", 706, "must be set for multi-node"),),
        witness=ZephonConfig(**_TWO),
        applies=when.neither_distributed,
        notes=(
            "Surfaces when the engine is built (first `next()`), not at the first checkpoint; "
            "and as RuntimeError where 'both set' (Z11) is a ValueError."
        ),
        finding=True,
    ),
    ZephonRule(
        id="Z18",
        setting="aggregate_serializer",
        condition="not `json` or `msgpack`",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="Unknown serializer",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(
                "_internal/checkpoint/_codec.py",
                "AggregationCodec.__init__",
                90,
                "Unknown serializer",
            ),
            Citation(_C, "RoundCoordinator.__init__", 251, "AggregationCodec("),
        ),
        witness=ZephonConfig(aggregate_serializer="pickle"),
        applies=when.bad_serializer,
        notes="Checked after the store/dir choice (Z11-Z17), even with world_size=1.",
    ),
    ZephonRule(
        id="Z19",
        setting="aggregate_compressor",
        condition="not `none` or `zstd`",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="Unknown compressor",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(
                "_internal/checkpoint/_codec.py",
                "AggregationCodec.__init__",
                92,
                "Unknown compressor",
            ),
        ),
        witness=ZephonConfig(aggregate_compressor="gzip"),
        applies=when.bad_compressor,
    ),
    ZephonRule(
        id="Z20",
        setting="MASTER_PORT",
        condition="`torch://`, world_size > 1, MASTER_PORT set but not a port in 1..65535",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="MASTER_PORT is not a valid port",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_K, "TorchKVStore._endpoint", 183, 'os.environ.get("MASTER_PORT")'),
            Citation(_K, "_parse_port", 326, "is not a valid port"),
        ),
        witness=ZephonConfig(
            aggregate_store=StoreUri(host="", port=None),
            master_addr="127.0.0.1",
            master_port="abc",
            **_TWO,
        ),
        applies=when.bad_master_port,
        notes="MASTER_PORT is parsed before MASTER_ADDR is looked at.",
    ),
    ZephonRule(
        id="Z21",
        setting="MASTER_ADDR / MASTER_PORT",
        condition="`torch://`, world_size > 1, MASTER_ADDR or MASTER_PORT unset or empty",
        kind=Reaction.ERROR,
        outcome="ValueError",
        fragment="MASTER_ADDR/MASTER_PORT are not set",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "TorchKVStore._endpoint", 187, "MASTER_ADDR/MASTER_PORT are not set"),),
        witness=ZephonConfig(aggregate_store=StoreUri(host="", port=None), **_TWO),
        applies=when.missing_master,
        notes="The message names the way out: `torch://host:port`, or launch with torchrun.",
    ),
    ZephonRule(
        id="Z22",
        setting="aggregate_store",
        condition="world_size > 1 and nothing accepts connections at the store's address",
        kind=Reaction.ERROR,
        outcome="RuntimeError",
        fragment="Can't reach the checkpoint TCPStore",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_K, "TorchKVStore.check_ready", 260, "Can't reach the checkpoint TCPStore"),
            Citation(_E, "Engine.__init__", 447, "self._coordinator.check_ready()"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(port=DEAD), aggregate_timeout_s=0.5, **_TWO),
        applies=when.unreachable,
        notes=(
            "Reported at the first `next()`, after aggregate_timeout_s plus c10d's jittered "
            "reconnect back-off (two connect attempts 0.5-1.6 s apart): measured 0.5-1.1 s "
            "for 0.1-0.2 s budgets and 0.7-2.7 s for 0.5 s, so the wait is not a fixed "
            "2-2.5x the timeout for small budgets."
        ),
        finding=True,
    ),
    ZephonRule(
        id="Z23",
        setting="aggregate_store",
        condition="world_size = 1 with a store that is unreachable or lacks MASTER_ADDR/PORT",
        kind=Reaction.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(
            Citation(_E, "Engine.__init__", 446, "if self._takes_part_in_rounds():"),
            Citation(_E, "Engine._takes_part_in_rounds", 1139, "world_size == 1"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(port=DEAD)),
        applies=when.store_unused,
        notes=(
            "A single rank never contacts the store, not even at checkpoint, so 'an "
            "unreachable store is reported when the pipeline starts' holds only for ranks "
            "that take part in rounds (world_size > 1)."
        ),
        finding=True,
    ),
    ZephonRule(
        id="Z24",
        setting="aggregate_store",
        condition="`aggregate_store=''`",
        kind=Reaction.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(Citation(_C, "make_coordinator", 1129, "if opts.aggregate_store:"),),
        witness=ZephonConfig(aggregate_store="", aggregate_dir=SCRATCH),
        applies=when.empty_store_string,
        notes="Counts as unset: no Z11 with aggregate_dir, Z17 without it when world_size > 1.",
    ),
    ZephonRule(
        id="Z25",
        setting="aggregate_store",
        condition="scheme in another case (`TORCH://`)",
        kind=Reaction.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(Citation(_K, "open_kv_store", 136, "_REGISTRY.get(scheme.lower())"),),
        witness=ZephonConfig(aggregate_store=StoreUri(scheme="TORCH"), **_TWO, checkpoint=False),
        applies=when.uppercase_scheme,
    ),
    ZephonRule(
        id="Z26",
        setting="mapping_strategy",
        condition="a value other than contiguous/interleaved",
        kind=Reaction.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(Citation(_E, "Engine._build_world", 607, "mapping_strategy"),),
        witness=ZephonConfig(mapping_strategy="diagonal", canonical_replicas=2, checkpoint=False),
        applies=when.unknown_mapping,
        notes="Silently treated as contiguous.",
        finding=True,
    ),
    ZephonRule(
        id="Z27",
        setting="canonical_replicas at restore",
        condition="restore a checkpoint taken with another C (C=4 into C=6)",
        kind=Reaction.ERROR,
        outcome="RuntimeError",
        fragment="canonical_replicas changed; migration required",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_E, "Engine.load_state_dict", 2131, "canonical_replicas changed"),
            Citation(_P, "Pipeline._build_raw_iter", 1830, "engine.load_state_dict(restore_ckpt"),
        ),
        witness=ZephonConfig(canonical_replicas=6, restore_from=4),
        applies=when.c_changed,
        notes=(
            "`restore()` accepts the checkpoint; the refusal comes at the first `next()` after "
            "it, and names neither the old nor the new C nor a way out."
        ),
        finding=True,
    ),
    ZephonRule(
        id="Z28",
        setting="canonical_replicas at restore",
        condition="restore a mid-window checkpoint (same C >= 2) into another world size",
        kind=Reaction.WARNING,
        outcome="RuntimeWarning",
        fragment="Resuming a mid-window checkpoint into a different topology",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine.load_state_dict", 2266, "Resuming a mid-window checkpoint"),),
        witness=ZephonConfig(restore_from=2, aggregate_dir=SCRATCH, **_TWO),
        applies=when.mid_window_restore,
        notes="The source checkpoint is taken after one batch on one rank, so lanes are uneven.",
    ),
    ZephonRule(
        id="Z29",
        setting="checkpoint",
        condition="one rank, C >= 2, checkpoint after one batch (lanes uneven)",
        kind=Reaction.WARNING,
        outcome="RuntimeWarning",
        fragment="Checkpoint taken mid-window",
        moment=Moment.CHECKPOINT,
        cites=(
            Citation(_E, "Engine._check_mid_window_counts", 1678, "Checkpoint taken mid-window"),
            Citation(_E, "Engine.state_dict", 1866, "self._check_mid_window_counts("),
        ),
        witness=ZephonConfig(canonical_replicas=2),
        applies=when.mid_window_checkpoint,
    ),
    ZephonRule(
        id="Z30",
        setting="world_size",
        condition="world_size > 1 and the other ranks never call checkpoint()",
        kind=Reaction.ERROR,
        outcome="RuntimeError",
        fragment="Timed out after",
        moment=Moment.CHECKPOINT,
        cites=(Citation(_C, "RoundCoordinator._timeout_error", 488, "Timed out after"),),
        witness=ZephonConfig(aggregate_dir=SCRATCH, **_TWO),
        applies=when.lone_rank,
        notes=(
            "After about aggregate_timeout_s; rank 0 waits for 'checkpoint shards', other "
            "ranks for the 'round id'."
        ),
    ),
)

RULES_BY_ID: dict[str, ZephonRule] = {rule.id: rule for rule in ZEPHON_RULES}
