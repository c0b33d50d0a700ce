"""Table (a): Zephon 0.2.0's configuration rules, each with its source, outcome and moment.

Every row says which exception (or warning) a setting produces, a fragment of its message,
and the moment it surfaces, as measured against real Zephon; ``predict`` walks the rows in
the order Zephon runs its checks, so it is a model of Zephon that the probe can refute.
``docs/validation.md`` is rendered from these objects (``python -m
zephon_chaos.validation.rules docs/validation.md``) and a test keeps the two identical.

Nothing here imports Zephon or torch: the recipe contract and the doc use the table too.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from zephon_chaos.validation.model import (
    DEAD,
    LIVE,
    SCRATCH,
    Expectation,
    ExpectedError,
    ExpectedWarning,
    Moment,
    Observation,
    StoreUri,
    ZephonConfig,
)

ZEPHON_VERSION = "0.2.0"
"""The Zephon release the line numbers and measurements below belong to."""


class Kind(str, Enum):
    """What a row's condition leads to."""

    ERROR = "error"
    WARNING = "warning"
    ACCEPTED = "accepted"
    """Accepted silently: recorded because a reader could expect otherwise."""


@dataclass(frozen=True)
class Citation:
    """A place in Zephon's source: a path inside the package, a function, a line, its text."""

    path: str
    function: str
    line: int
    needle: str
    """Text that line contains; a test checks it, so a moved line is noticed."""

    def __str__(self) -> str:
        return f"`{self.path}` `{self.function}` L{self.line}"


@dataclass(frozen=True)
class ZephonRule:
    """One row of table (a)."""

    id: str
    setting: str
    condition: str
    kind: Kind
    outcome: str
    """Exception type name, warning category name, or ``-`` for accepted rows."""
    fragment: str
    moment: Moment | None
    cites: tuple[Citation, ...]
    witness: ZephonConfig
    """A configuration that shows the row; the suite probes it against real Zephon."""
    applies: Callable[[ZephonConfig], int] = field(compare=False, repr=False)
    """How many times the row fires for a configuration (0: not at all)."""
    notes: str = ""
    finding: bool = False
    """True where Zephon differs from its own documentation or from DESIGN.md."""


# --------------------------------------------------------------------------- model helpers


def effective_c(cfg: ZephonConfig) -> int:
    """Canonical replicas after Zephon's default (the DP size, here the world size)."""
    return cfg.canonical_replicas if cfg.canonical_replicas is not None else cfg.world_size


def _store(cfg: ZephonConfig) -> StoreUri | None:
    """The configured store, or None when unset; an empty string counts as unset."""
    store = cfg.aggregate_store
    if isinstance(store, str):
        if store:
            raise ValueError(
                f"aggregate_store={store!r}: write non-empty URIs as StoreUri(...) so the "
                "table can reason about their parts"
            )
        return None
    return store


def _world_ok(cfg: ZephonConfig) -> bool:
    c = effective_c(cfg)
    return cfg.world_size >= 1 and 0 <= cfg.global_rank < cfg.world_size and c >= cfg.world_size


def _takes_part(cfg: ZephonConfig) -> bool:
    """Whether this rank checks its store at start and goes through rounds at checkpoint.

    One rank with one active worker has nothing to exchange; every rank owns a lane once
    C >= G, so in this suite a rank takes part exactly when world_size > 1.
    """
    return cfg.world_size > 1


def _zephon_port(value: str | None) -> int | str | None:
    """Zephon's ``_parse_port``: None for missing, an int, or ``"invalid"``."""
    if value is None or value == "":
        return None
    if value in (LIVE, DEAD):
        return value
    try:
        port = int(value)
    except ValueError:
        return "invalid"
    return port if 0 < port < 65536 else "invalid"


def uri_verdict(uri: StoreUri) -> str:
    """How ``open_kv_store``/``TorchKVStore.from_uri`` treat a URI, in their check order.

    One of ``scheme``, ``extras``, ``bad_port``, ``zero_port``, ``incomplete``, ``env``
    (``torch://``: MASTER_ADDR/MASTER_PORT) or ``explicit`` (a host and a port).
    """
    if uri.scheme is None or uri.scheme.lower() != "torch":
        return "scheme"
    if uri.userinfo or uri.path.strip("/") or uri.query.strip("?") or uri.fragment.strip("#"):
        return "extras"
    if not uri.host and uri.port is None:
        return "env"
    if uri.port not in (None, "", LIVE, DEAD):
        if not (uri.port.isdigit() and uri.port.isascii()) or int(uri.port) > 65535:
            return "bad_port"
        if int(uri.port) == 0:
            return "zero_port"
    if not uri.host or uri.port in (None, ""):
        return "incomplete"
    return "explicit"


def _uri_is(verdict: str) -> Callable[[ZephonConfig], int]:
    def applies(cfg: ZephonConfig) -> int:
        store = _store(cfg)
        return int(store is not None and not cfg.aggregate_dir and uri_verdict(store) == verdict)

    return applies


def _env_store(cfg: ZephonConfig) -> bool:
    """A valid ``torch://`` store read from the environment by a rank that uses it."""
    store = _store(cfg)
    return (
        store is not None
        and not cfg.aggregate_dir
        and uri_verdict(store) == "env"
        and _codec_ok(cfg)
        and _takes_part(cfg)
    )


def _codec_ok(cfg: ZephonConfig) -> bool:
    return (
        cfg.aggregate_serializer in (None, *AGGREGATE_SERIALIZERS)
        and cfg.aggregate_compressor in (None, *AGGREGATE_COMPRESSORS)
    )


def _endpoint_port(cfg: ZephonConfig) -> int | str | None:
    """The port a ``torch://`` store connects to, or "invalid"/None as Zephon parses it."""
    store = _store(cfg)
    assert store is not None
    if uri_verdict(store) == "explicit":
        return store.port
    return _zephon_port(cfg.master_port)


def _coordinator_ok(cfg: ZephonConfig) -> bool:
    """Whether the checkpoint coordinator is built without error."""
    store = _store(cfg)
    if store is not None:
        return (
            not cfg.aggregate_dir and uri_verdict(store) in ("env", "explicit") and _codec_ok(cfg)
        )
    return (cfg.world_size == 1 or bool(cfg.aggregate_dir)) and _codec_ok(cfg)


# --------------------------------------------------------------------------- row predicates


def _removed_option(cfg: ZephonConfig) -> int:
    return int(any(name in REMOVED_OPTIONS for name in cfg.extra_options))


def _unknown_options(cfg: ZephonConfig) -> int:
    return sum(1 for name in cfg.extra_options if name not in REMOVED_OPTIONS)


def _garbage_ckpt(cfg: ZephonConfig) -> int:
    return int(cfg.restore_from == "garbage")


def _future_ckpt(cfg: ZephonConfig) -> int:
    return int(cfg.restore_from == "future")


def _bad_auto_validation(cfg: ZephonConfig) -> int:
    mode = cfg.auto_validation
    return int(mode is not None and mode.lower() not in ("strict", "warn", "off"))


def _ws_below_one(cfg: ZephonConfig) -> int:
    return int(cfg.world_size < 1)


def _rank_out_of_range(cfg: ZephonConfig) -> int:
    return int(cfg.world_size >= 1 and not 0 <= cfg.global_rank < cfg.world_size)


def _c_below_one(cfg: ZephonConfig) -> int:
    return int(effective_c(cfg) < 1)


def _g_above_c(cfg: ZephonConfig) -> int:
    return int(1 <= effective_c(cfg) < cfg.world_size)


def _c_not_multiple(cfg: ZephonConfig) -> int:
    return int(_world_ok(cfg) and effective_c(cfg) % cfg.world_size != 0)


def _both_set(cfg: ZephonConfig) -> int:
    return int(_store(cfg) is not None and bool(cfg.aggregate_dir))


def _neither_distributed(cfg: ZephonConfig) -> int:
    return int(_store(cfg) is None and not cfg.aggregate_dir and cfg.world_size > 1)


def _bad_serializer(cfg: ZephonConfig) -> int:
    return int(cfg.aggregate_serializer not in (None, *AGGREGATE_SERIALIZERS))


def _bad_compressor(cfg: ZephonConfig) -> int:
    return int(cfg.aggregate_compressor not in (None, *AGGREGATE_COMPRESSORS))


def _bad_master_port(cfg: ZephonConfig) -> int:
    return int(_env_store(cfg) and _zephon_port(cfg.master_port) == "invalid")


def _missing_master(cfg: ZephonConfig) -> int:
    return int(
        _env_store(cfg)
        and _zephon_port(cfg.master_port) != "invalid"
        and (not cfg.master_addr or _zephon_port(cfg.master_port) is None)
    )


def _unreachable(cfg: ZephonConfig) -> int:
    store = _store(cfg)
    if store is None or not _takes_part(cfg) or not _coordinator_ok(cfg):
        return 0
    if uri_verdict(store) == "env" and (
        not cfg.master_addr or _zephon_port(cfg.master_port) in (None, "invalid")
    ):
        return 0
    return int(_endpoint_port(cfg) != LIVE)


def _store_unused(cfg: ZephonConfig) -> int:
    return int(_store(cfg) is not None and not cfg.aggregate_dir and cfg.world_size == 1)


def _empty_store_string(cfg: ZephonConfig) -> int:
    return int(cfg.aggregate_store == "")


def _uppercase_scheme(cfg: ZephonConfig) -> int:
    store = _store(cfg)
    return int(
        store is not None and store.scheme not in (None, "torch") and uri_verdict(store) != "scheme"
    )


def _unknown_mapping(cfg: ZephonConfig) -> int:
    strategy = cfg.mapping_strategy
    return int(strategy is not None and strategy.lower() not in ("contiguous", "interleaved"))


def _c_changed(cfg: ZephonConfig) -> int:
    return int(isinstance(cfg.restore_from, int) and cfg.restore_from != effective_c(cfg))


def _mid_window_restore(cfg: ZephonConfig) -> int:
    c = effective_c(cfg)
    return int(cfg.restore_from == c and c >= 2 and cfg.world_size != 1)


def _mid_window_checkpoint(cfg: ZephonConfig) -> int:
    return int(cfg.world_size == 1 and effective_c(cfg) >= 2)


def _lone_rank(cfg: ZephonConfig) -> int:
    return int(cfg.world_size > 1)


AGGREGATE_SERIALIZERS = ("msgpack", "json")
"""Values ``aggregate_serializer`` accepts, Zephon's default first (``AggregationCodec.__init__``,
``_internal/checkpoint/_codec.py``; the default in ``RuntimeOptions``)."""
AGGREGATE_COMPRESSORS = ("zstd", "none")
"""Values ``aggregate_compressor`` accepts, Zephon's default first (the same check)."""
SHUTDOWN_MODES = ("graceful", "hard")
"""``RuntimeOptions.shutdown_mode``, default first; Zephon checks no value (``Engine.close``
treats anything but ``hard`` as graceful), so these are the two its type names."""

REMOVED_OPTIONS = ("shm_min_size", "coalesce_tensors")
"""Option names ``Pipeline.options`` rejects outright (renamed in an earlier release)."""

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
        kind=Kind.ERROR,
        outcome="TypeError",
        fragment="is no longer supported",
        moment=Moment.OPTIONS,
        cites=(Citation(_P, "Pipeline.options", 1493, "is no longer supported"),),
        witness=ZephonConfig(extra_options=("shm_min_size",)),
        applies=_removed_option,
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
        kind=Kind.WARNING,
        outcome="UserWarning",
        fragment="Unknown pipeline option",
        moment=Moment.OPTIONS,
        cites=(Citation(_P, "Pipeline.options", 1497, "Unknown pipeline option"),),
        witness=ZephonConfig(extra_options=("aggregate_stor",)),
        applies=_unknown_options,
        notes=(
            "Only a warning, and the option is dropped: a misspelt `aggregate_store` runs "
            "with no store at all (one process: the default temp directory)."
        ),
    ),
    ZephonRule(
        id="Z03",
        setting="restore",
        condition="`pipe.restore()` of a dict that is not a checkpoint",
        kind=Kind.ERROR,
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
        applies=_garbage_ckpt,
        notes="The schema is checked eagerly, at the call.",
    ),
    ZephonRule(
        id="Z04",
        setting="restore",
        condition="`pipe.restore()` of a checkpoint from a newer engine version",
        kind=Kind.ERROR,
        outcome="RuntimeError",
        fragment="is newer than the supported version",
        moment=Moment.RESTORE,
        cites=(
            Citation(_P, "Pipeline.restore", 2047, "EngineStateV2.load(ckpt)"),
            Citation("_internal/checkpoint/_migrations.py", "migrate", 298, "is newer than the"),
        ),
        witness=ZephonConfig(restore_from="future"),
        applies=_future_ckpt,
    ),
    ZephonRule(
        id="Z05",
        setting="auto_validation",
        condition="not one of strict/warn/off (case-insensitive)",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="auto_validation must be one of",
        moment=Moment.ITER,
        cites=(
            Citation(_P, "Pipeline._run_auto_validation", 1762, "auto_validation must be one of"),
            Citation(_P, "Pipeline.__iter__", 1787, "self._run_auto_validation()"),
        ),
        witness=ZephonConfig(auto_validation="bogus"),
        applies=_bad_auto_validation,
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
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="must be >= 1",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 521, "must be >= 1"),),
        witness=ZephonConfig(world_size=0),
        applies=_ws_below_one,
    ),
    ZephonRule(
        id="Z07",
        setting="global_rank",
        condition="global_rank outside [0, world_size)",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="must be in [0, world_size",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_E, "Engine._resolve_parallelism_params", 537, "must be in [0, world_size"),
        ),
        witness=ZephonConfig(world_size=2, global_rank=2, canonical_replicas=2),
        applies=_rank_out_of_range,
    ),
    ZephonRule(
        id="Z08",
        setting="canonical_replicas",
        condition="C < 1",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="canonical_replicas",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 561, "must be >= 1"),),
        witness=ZephonConfig(canonical_replicas=0),
        applies=_c_below_one,
        notes="Message: `canonical_replicas (0) must be >= 1`.",
    ),
    ZephonRule(
        id="Z09",
        setting="canonical_replicas",
        condition="world size G > C (C defaults to G when unset)",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="must be >= dp_degree",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 566, "must be >= dp_degree"),),
        witness=ZephonConfig(world_size=4, canonical_replicas=2),
        applies=_g_above_c,
        notes=(
            "The message names `dp_degree`, which defaults to world_size; a user who set only "
            "world_size reads about an option they never set."
        ),
    ),
    ZephonRule(
        id="Z10",
        setting="canonical_replicas",
        condition="C not a multiple of G",
        kind=Kind.WARNING,
        outcome="RuntimeWarning",
        fragment="is not divisible by dp_degree",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine._resolve_parallelism_params", 585, "is not divisible by"),),
        witness=ZephonConfig(
            world_size=2, canonical_replicas=3, aggregate_dir=SCRATCH, checkpoint=False
        ),
        applies=_c_not_multiple,
        notes="Uneven lanes per rank are allowed; emitted before any store check below.",
    ),
    ZephonRule(
        id="Z11",
        setting="aggregate_store + aggregate_dir",
        condition="both set (any world size)",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="Set at most one of RuntimeOptions.aggregate_dir and",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_C, "make_coordinator", 1132, "Set at most one of"),),
        witness=ZephonConfig(aggregate_store=_STORE, aggregate_dir=SCRATCH),
        applies=_both_set,
        notes="Raised when the engine is built, not by `options()`; even with world_size=1.",
    ),
    ZephonRule(
        id="Z12",
        setting="aggregate_store",
        condition="unknown scheme, or no `://` at all (`redis://h:1`, `h:1`)",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="Unknown aggregate_store scheme",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "open_kv_store", 139, "Unknown aggregate_store scheme"),),
        witness=ZephonConfig(aggregate_store=StoreUri(scheme="redis")),
        applies=_uri_is("scheme"),
        notes="Raised even with world_size=1, where the store would never be used.",
    ),
    ZephonRule(
        id="Z13",
        setting="aggregate_store",
        condition="`torch://` with userinfo, a path, a query or a fragment",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="may name only a host and port",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_K, "TorchKVStore.from_uri", 198, "may name only a host and port"),
            Citation(_K, "TorchKVStore.from_uri", 200, "may name only a host and port"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(path="/x")),
        applies=_uri_is("extras"),
        notes="A bare trailing `/` is allowed (the path is stripped of slashes).",
    ),
    ZephonRule(
        id="Z14",
        setting="aggregate_store",
        condition="`torch://host:port` with a non-numeric port or one above 65535",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="has an invalid port",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "TorchKVStore.from_uri", 206, "has an invalid port"),),
        witness=ZephonConfig(aggregate_store=StoreUri(port="99999")),
        applies=_uri_is("bad_port"),
        notes="`-1` is non-numeric to `urllib.parse`, so it lands here too.",
    ),
    ZephonRule(
        id="Z15",
        setting="aggregate_store",
        condition="`torch://host:0`",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="is not a valid port",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_K, "TorchKVStore.from_uri", 207, "port = _parse_port(explicit_port, uri)"),
            Citation(_K, "_parse_port", 328, "is not a valid port"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(port="0")),
        applies=_uri_is("zero_port"),
        notes="Port 0 passes `urllib.parse` and fails Zephon's own range check: a second wording.",
    ),
    ZephonRule(
        id="Z16",
        setting="aggregate_store",
        condition="`torch://host`, `torch://host:` or `torch://:port` (host or port missing)",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="must name both a host and a port",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "TorchKVStore.from_uri", 209, "must name both a host and a port"),),
        witness=ZephonConfig(aggregate_store=StoreUri(port=None)),
        applies=_uri_is("incomplete"),
    ),
    ZephonRule(
        id="Z17",
        setting="aggregate_store + aggregate_dir",
        condition="neither set (or `aggregate_dir=''`) with world_size > 1",
        kind=Kind.ERROR,
        outcome="RuntimeError",
        fragment="must be set for multi-node checkpoint aggregation",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_C, "FileCoordinator.__init__", 706, "must be set for multi-node"),),
        witness=ZephonConfig(**_TWO),
        applies=_neither_distributed,
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
        kind=Kind.ERROR,
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
        applies=_bad_serializer,
        notes="Checked after the store/dir choice (Z11-Z17), even with world_size=1.",
    ),
    ZephonRule(
        id="Z19",
        setting="aggregate_compressor",
        condition="not `none` or `zstd`",
        kind=Kind.ERROR,
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
        applies=_bad_compressor,
    ),
    ZephonRule(
        id="Z20",
        setting="MASTER_PORT",
        condition="`torch://`, world_size > 1, MASTER_PORT set but not a port in 1..65535",
        kind=Kind.ERROR,
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
        applies=_bad_master_port,
        notes="MASTER_PORT is parsed before MASTER_ADDR is looked at.",
    ),
    ZephonRule(
        id="Z21",
        setting="MASTER_ADDR / MASTER_PORT",
        condition="`torch://`, world_size > 1, MASTER_ADDR or MASTER_PORT unset or empty",
        kind=Kind.ERROR,
        outcome="ValueError",
        fragment="MASTER_ADDR/MASTER_PORT are not set",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_K, "TorchKVStore._endpoint", 187, "MASTER_ADDR/MASTER_PORT are not set"),),
        witness=ZephonConfig(aggregate_store=StoreUri(host="", port=None), **_TWO),
        applies=_missing_master,
        notes="The message names the way out: `torch://host:port`, or launch with torchrun.",
    ),
    ZephonRule(
        id="Z22",
        setting="aggregate_store",
        condition="world_size > 1 and nothing accepts connections at the store's address",
        kind=Kind.ERROR,
        outcome="RuntimeError",
        fragment="Can't reach the checkpoint TCPStore",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_K, "TorchKVStore.check_ready", 260, "Can't reach the checkpoint TCPStore"),
            Citation(_E, "Engine.__init__", 447, "self._coordinator.check_ready()"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(port=DEAD), aggregate_timeout_s=0.5, **_TWO),
        applies=_unreachable,
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
        kind=Kind.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(
            Citation(_E, "Engine.__init__", 446, "if self._takes_part_in_rounds():"),
            Citation(_E, "Engine._takes_part_in_rounds", 1139, "world_size == 1"),
        ),
        witness=ZephonConfig(aggregate_store=StoreUri(port=DEAD)),
        applies=_store_unused,
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
        kind=Kind.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(Citation(_C, "make_coordinator", 1129, "if opts.aggregate_store:"),),
        witness=ZephonConfig(aggregate_store="", aggregate_dir=SCRATCH),
        applies=_empty_store_string,
        notes="Counts as unset: no Z11 with aggregate_dir, Z17 without it when world_size > 1.",
    ),
    ZephonRule(
        id="Z25",
        setting="aggregate_store",
        condition="scheme in another case (`TORCH://`)",
        kind=Kind.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(Citation(_K, "open_kv_store", 136, "_REGISTRY.get(scheme.lower())"),),
        witness=ZephonConfig(aggregate_store=StoreUri(scheme="TORCH"), **_TWO, checkpoint=False),
        applies=_uppercase_scheme,
    ),
    ZephonRule(
        id="Z26",
        setting="mapping_strategy",
        condition="a value other than contiguous/interleaved",
        kind=Kind.ACCEPTED,
        outcome="-",
        fragment="",
        moment=None,
        cites=(Citation(_E, "Engine._build_world", 607, "mapping_strategy"),),
        witness=ZephonConfig(mapping_strategy="diagonal", canonical_replicas=2, checkpoint=False),
        applies=_unknown_mapping,
        notes="Silently treated as contiguous.",
        finding=True,
    ),
    ZephonRule(
        id="Z27",
        setting="canonical_replicas at restore",
        condition="restore a checkpoint taken with another C (C=4 into C=6)",
        kind=Kind.ERROR,
        outcome="RuntimeError",
        fragment="canonical_replicas changed; migration required",
        moment=Moment.FIRST_BATCH,
        cites=(
            Citation(_E, "Engine.load_state_dict", 2131, "canonical_replicas changed"),
            Citation(_P, "Pipeline._build_raw_iter", 1830, "engine.load_state_dict(restore_ckpt"),
        ),
        witness=ZephonConfig(canonical_replicas=6, restore_from=4),
        applies=_c_changed,
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
        kind=Kind.WARNING,
        outcome="RuntimeWarning",
        fragment="Resuming a mid-window checkpoint into a different topology",
        moment=Moment.FIRST_BATCH,
        cites=(Citation(_E, "Engine.load_state_dict", 2266, "Resuming a mid-window checkpoint"),),
        witness=ZephonConfig(restore_from=2, aggregate_dir=SCRATCH, **_TWO),
        applies=_mid_window_restore,
        notes="The source checkpoint is taken after one batch on one rank, so lanes are uneven.",
    ),
    ZephonRule(
        id="Z29",
        setting="checkpoint",
        condition="one rank, C >= 2, checkpoint after one batch (lanes uneven)",
        kind=Kind.WARNING,
        outcome="RuntimeWarning",
        fragment="Checkpoint taken mid-window",
        moment=Moment.CHECKPOINT,
        cites=(
            Citation(_E, "Engine._check_mid_window_counts", 1678, "Checkpoint taken mid-window"),
            Citation(_E, "Engine.state_dict", 1866, "self._check_mid_window_counts("),
        ),
        witness=ZephonConfig(canonical_replicas=2),
        applies=_mid_window_checkpoint,
    ),
    ZephonRule(
        id="Z30",
        setting="world_size",
        condition="world_size > 1 and the other ranks never call checkpoint()",
        kind=Kind.ERROR,
        outcome="RuntimeError",
        fragment="Timed out after",
        moment=Moment.CHECKPOINT,
        cites=(Citation(_C, "RoundCoordinator._timeout_error", 488, "Timed out after"),),
        witness=ZephonConfig(aggregate_dir=SCRATCH, **_TWO),
        applies=_lone_rank,
        notes=(
            "After about aggregate_timeout_s; rank 0 waits for 'checkpoint shards', other "
            "ranks for the 'round id'."
        ),
    ),
)

RULES_BY_ID: dict[str, ZephonRule] = {rule.id: rule for rule in ZEPHON_RULES}


# --------------------------------------------------------------------------- prediction


def predict(cfg: ZephonConfig) -> Expectation:
    """What Zephon 0.2.0 does with ``cfg``: walk the rows in Zephon's own check order.

    Rows are grouped by moment and ordered inside a moment as Zephon checks them, so the
    first error row that applies is the error, and the warning rows met before it (at
    the same or earlier moments) are the warnings.
    """
    steps = cfg.steps()
    warnings: list[ExpectedWarning] = []
    for rule in ZEPHON_RULES:
        if rule.kind is Kind.ACCEPTED or rule.moment not in steps:
            continue
        count = rule.applies(cfg)
        if not count:
            continue
        if rule.kind is Kind.WARNING:
            warnings += [ExpectedWarning(rule.id, rule.outcome, rule.fragment, rule.moment)] * count
            continue
        error = ExpectedError(rule.id, rule.outcome, rule.fragment, rule.moment)
        reached = steps[: steps.index(rule.moment) + 1]
        return Expectation(error=error, warnings=tuple(warnings), steps=reached)
    return Expectation(error=None, warnings=tuple(warnings), steps=steps)


def classify_warning(category: str, message: str) -> str | None:
    """The warning row a warning belongs to, ``"?"`` for an unknown Zephon one, else None."""
    for rule in ZEPHON_RULES:
        if rule.kind is Kind.WARNING and rule.outcome == category and rule.fragment in message:
            return rule.id
    if message.startswith("[zephon]") or "pipeline option" in message:
        return "?"
    return None


def compare(expected: Expectation, observed: Observation) -> list[str]:
    """Mismatches between a prediction and what the probe saw; empty when they agree."""
    problems: list[str] = []
    if observed.hung_at is not None:
        problems.append(f"no outcome at {observed.hung_at.value} within {observed.budget_s:.1f}s")
        return problems
    exp, got = expected.error, observed.error
    if exp is None and got is not None:
        problems.append(f"unexpected {got.type_name} at {got.moment.value}: {got.message[:300]!r}")
    elif exp is not None and got is None:
        problems.append(
            f"rule {exp.rule_id} predicts {exp.type_name} at {exp.moment.value}, "
            "but the pipeline raised nothing"
        )
    elif exp is not None and got is not None:
        if got.type_name != exp.type_name:
            problems.append(
                f"rule {exp.rule_id}: expected {exp.type_name}, got {got.type_name}: "
                f"{got.message[:300]!r}"
            )
        if exp.fragment not in got.message:
            problems.append(
                f"rule {exp.rule_id}: message lacks {exp.fragment!r}: {got.message[:300]!r}"
            )
        if got.moment is not exp.moment:
            problems.append(
                f"rule {exp.rule_id}: expected at {exp.moment.value}, surfaced at "
                f"{got.moment.value}"
            )
    want = Counter((w.rule_id, w.moment) for w in expected.warnings)
    seen: Counter[tuple[str, Moment]] = Counter()
    for w in observed.warnings:
        rule_id = classify_warning(w.category, w.message)
        if rule_id == "?":
            problems.append(
                f"a Zephon warning no row covers at {w.moment.value}: "
                f"{w.category}: {w.message[:200]!r}"
            )
        elif rule_id is not None:
            seen[(rule_id, w.moment)] += 1
    for key in sorted(set(want) | set(seen), key=str):
        if want[key] != seen[key]:
            rule_id, moment = key
            problems.append(
                f"rule {rule_id}: expected {want[key]} warning(s) at {moment.value}, "
                f"saw {seen[key]}"
            )
    return problems


# --------------------------------------------------------------------------- the document


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_validation_doc() -> str:
    """The text of ``docs/validation.md``, rendered from the rule objects."""
    from zephon_chaos.validation.recipe_rules import RECIPE_RULES

    lines = [
        "# Configuration validation",
        "",
        "<!-- Generated by `python -m zephon_chaos.validation.rules docs/validation.md`;",
        "     tests/unit/validation/test_rules.py fails when this file and the rules differ. -->",
        "",
        f"## (a) Zephon {ZEPHON_VERSION}: what each setting does, and when",
        "",
        "Moments: `options` = `pipe.options(...)`; `restore` = the `pipe.restore(ckpt)` call;",
        "`iter` = `iter(pipe)`; `first_batch` = the first `next()` (after a restore, if any);",
        "`checkpoint` = `pipe.checkpoint()` after one batch. Rows are listed in the order",
        "Zephon checks them: when several apply, the first error row wins, and warning rows",
        "above it still fire. Sources are paths inside the `zephon` package, with the",
        "function and line in 0.2.0. Every row has a witness configuration that",
        "`tests/zephon/test_validation.py` runs against real Zephon, and a Hypothesis",
        "property compares `predict()` with real pipelines on generated configurations.",
        "",
    ]
    lines += _table(
        ("ID", "setting", "condition", "outcome", "message fragment", "moment", "source", "notes"),
        [
            (
                r.id,
                r.setting,
                r.condition,
                f"{r.kind.value}: {r.outcome}" if r.kind is not Kind.ACCEPTED else "accepted",
                f"`{r.fragment}`" if r.fragment else "",
                r.moment.value if r.moment else "",
                "; ".join(str(c) for c in r.cites),
                r.notes,
            )
            for r in ZEPHON_RULES
        ],
    )
    lines += ["", "### Findings: where Zephon differs from its documentation or DESIGN.md", ""]
    lines += [f"- **{r.id}** ({r.setting}): {r.notes}" for r in ZEPHON_RULES if r.finding]
    lines += [
        "",
        "## (b) The recipe configuration contract",
        "",
        "What a downstream recipe's config adapter promises, checked by",
        "`zephon_chaos.contract.RecipeConfigContract` (subclass it and define",
        "`make_config(**fields)`, optionally `from_toml(text)`; one test per row).",
        "Moments: `construction` = building the config object; `from_toml` = loading a",
        "TOML recipe; `to_zephon_options` = the options the config hands to Zephon.",
        "",
    ]
    lines += _table(
        ("ID", "rule", "expected", "moment", "why"),
        [(r.id, r.title, r.expected, r.moment, r.why) for r in RECIPE_RULES],
    )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the rendered doc to the path given (or print it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    text = render_validation_doc()
    if not args:
        sys.stdout.write(text)
        return 0
    Path(args[0]).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
