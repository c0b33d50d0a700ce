"""The conditions of table (a)'s rows: how many times a row fires for a configuration.

Each is named after what it detects; ``rules.ZEPHON_RULES`` names the row that uses it.
"""

from __future__ import annotations

from collections.abc import Callable

from zephon_chaos.validation.model import (
    DEAD,
    LIVE,
    StoreUri,
    ZephonConfig,
)
from zephon_chaos.validation.value_sets import (
    AGGREGATE_COMPRESSORS,
    AGGREGATE_SERIALIZERS,
    REMOVED_OPTIONS,
)


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


def uri_is(verdict: str) -> Callable[[ZephonConfig], int]:
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


def removed_option(cfg: ZephonConfig) -> int:
    return int(any(name in REMOVED_OPTIONS for name in cfg.extra_options))


def unknown_options(cfg: ZephonConfig) -> int:
    return sum(1 for name in cfg.extra_options if name not in REMOVED_OPTIONS)


def garbage_ckpt(cfg: ZephonConfig) -> int:
    return int(cfg.restore_from == "garbage")


def future_ckpt(cfg: ZephonConfig) -> int:
    return int(cfg.restore_from == "future")


def bad_auto_validation(cfg: ZephonConfig) -> int:
    mode = cfg.auto_validation
    return int(mode is not None and mode.lower() not in ("strict", "warn", "off"))


def ws_below_one(cfg: ZephonConfig) -> int:
    return int(cfg.world_size < 1)


def rank_out_of_range(cfg: ZephonConfig) -> int:
    return int(cfg.world_size >= 1 and not 0 <= cfg.global_rank < cfg.world_size)


def c_below_one(cfg: ZephonConfig) -> int:
    return int(effective_c(cfg) < 1)


def g_above_c(cfg: ZephonConfig) -> int:
    return int(1 <= effective_c(cfg) < cfg.world_size)


def c_not_multiple(cfg: ZephonConfig) -> int:
    return int(_world_ok(cfg) and effective_c(cfg) % cfg.world_size != 0)


def both_set(cfg: ZephonConfig) -> int:
    return int(_store(cfg) is not None and bool(cfg.aggregate_dir))


def neither_distributed(cfg: ZephonConfig) -> int:
    return int(_store(cfg) is None and not cfg.aggregate_dir and cfg.world_size > 1)


def bad_serializer(cfg: ZephonConfig) -> int:
    return int(cfg.aggregate_serializer not in (None, *AGGREGATE_SERIALIZERS))


def bad_compressor(cfg: ZephonConfig) -> int:
    return int(cfg.aggregate_compressor not in (None, *AGGREGATE_COMPRESSORS))


def bad_master_port(cfg: ZephonConfig) -> int:
    return int(_env_store(cfg) and _zephon_port(cfg.master_port) == "invalid")


def missing_master(cfg: ZephonConfig) -> int:
    return int(
        _env_store(cfg)
        and _zephon_port(cfg.master_port) != "invalid"
        and (not cfg.master_addr or _zephon_port(cfg.master_port) is None)
    )


def unreachable(cfg: ZephonConfig) -> int:
    store = _store(cfg)
    if store is None or not _takes_part(cfg) or not _coordinator_ok(cfg):
        return 0
    if uri_verdict(store) == "env" and (
        not cfg.master_addr or _zephon_port(cfg.master_port) in (None, "invalid")
    ):
        return 0
    return int(_endpoint_port(cfg) != LIVE)


def store_unused(cfg: ZephonConfig) -> int:
    return int(_store(cfg) is not None and not cfg.aggregate_dir and cfg.world_size == 1)


def empty_store_string(cfg: ZephonConfig) -> int:
    return int(cfg.aggregate_store == "")


def uppercase_scheme(cfg: ZephonConfig) -> int:
    store = _store(cfg)
    return int(
        store is not None and store.scheme not in (None, "torch") and uri_verdict(store) != "scheme"
    )


def unknown_mapping(cfg: ZephonConfig) -> int:
    strategy = cfg.mapping_strategy
    return int(strategy is not None and strategy.lower() not in ("contiguous", "interleaved"))


def c_changed(cfg: ZephonConfig) -> int:
    return int(isinstance(cfg.restore_from, int) and cfg.restore_from != effective_c(cfg))


def mid_window_restore(cfg: ZephonConfig) -> int:
    c = effective_c(cfg)
    return int(cfg.restore_from == c and c >= 2 and cfg.world_size != 1)


def mid_window_checkpoint(cfg: ZephonConfig) -> int:
    return int(cfg.world_size == 1 and effective_c(cfg) >= 2)


def lone_rank(cfg: ZephonConfig) -> int:
    return int(cfg.world_size > 1)
