"""Hypothesis strategies for Zephon configurations: valid and invalid values of every field.

Values are weighted so that most examples reach the first batch (a configuration that fails
at the first field teaches little about the fields behind it), and so that the slow
outcomes stay rare: an unreachable store costs 0.5-2.7 s, a lone rank's checkpoint one
``aggregate_timeout_s``.
"""

from __future__ import annotations

from hypothesis import Phase, settings
from hypothesis import strategies as st

from zephon_chaos.validation.model import DEAD, LIVE, SCRATCH, StoreUri, ZephonConfig
from zephon_chaos.validation.value_sets import AGGREGATE_COMPRESSORS, AGGREGATE_SERIALIZERS

MIN_CI_EXAMPLES = 200
"""Examples the validation property runs at least, whatever the loaded profile says."""

LIVE_TIMEOUT_S = 10.0
"""``aggregate_timeout_s`` of a configuration that reaches a live store or master."""
LONE_ROUND_TIMEOUT_S = 2.0
"""The same, when a lone rank of a larger world checkpoints: its round waits out the whole
budget for peers that never come, so ten seconds there cost ten seconds an example. Two
still reach a live server on busy cores (the explorer's link-fault rounds use two)."""
_valid_ports = st.sampled_from([LIVE] * 6 + [DEAD] * 2)
_any_ports = st.sampled_from([LIVE, LIVE, LIVE, DEAD, None, "", "0", "65536", "abc", "-1"])

valid_store_uris = st.builds(
    StoreUri,
    scheme=st.sampled_from(["torch"] * 5 + ["TORCH"]),
    host=st.sampled_from(["127.0.0.1", "localhost"]),
    port=_valid_ports,
    path=st.sampled_from(["", "", "", "/"]),
)
"""``torch://host:port`` that Zephon parses; the port may still be dead."""

env_store_uris = st.just(StoreUri(host="", port=None))
"""``torch://``: host and port come from MASTER_ADDR/MASTER_PORT."""

any_store_uris = st.builds(
    StoreUri,
    scheme=st.sampled_from(["torch", "torch", "torch", "Torch", "redis", "", None]),
    userinfo=st.sampled_from(["", "", "", "u@", "u:p@"]),
    host=st.sampled_from(["127.0.0.1", "localhost", ""]),
    port=_any_ports,
    path=st.sampled_from(["", "", "/", "/x"]),
    query=st.sampled_from(["", "", "", "?a=1"]),
    fragment=st.sampled_from(["", "", "", "#f"]),
)
"""Any combination of URI parts, most of them invalid somewhere."""

_EXTRA_OPTIONS = [
    ("foo_bar",),
    ("aggregate_stor",),
    ("shm_min_size",),
    ("aggregate_stor", "foo_bar"),
]
"""Unknown names (a typo of aggregate_store among them) and a removed one."""

store_uris = st.one_of(valid_store_uris, valid_store_uris, env_store_uris, any_store_uris)


@st.composite
def aggregate_locations(draw: st.DrawFn) -> tuple[StoreUri | str | None, str | None]:
    """(aggregate_store, aggregate_dir): one of them mostly; sometimes neither, both or ''."""
    choice = draw(st.sampled_from(["store"] * 4 + ["dir"] * 3 + ["none", "both", "empty"]))
    if choice == "store":
        return draw(store_uris), None
    if choice == "dir":
        return None, SCRATCH
    if choice == "both":
        return draw(valid_store_uris), SCRATCH
    if choice == "empty":
        return "", draw(st.sampled_from([None, SCRATCH, ""]))
    return None, draw(st.sampled_from([None, ""]))


@st.composite
def worlds(draw: st.DrawFn) -> tuple[int, int, int | None]:
    """(world_size, global_rank, canonical_replicas): mostly consistent, a fifth not."""
    if draw(st.integers(0, 9)) < 8:
        ws = draw(st.sampled_from([1, 1, 2, 2, 3, 4]))
        rank = draw(st.integers(0, ws - 1))
        c = draw(st.sampled_from([None, ws, ws, 2 * ws, ws + 1, 4, 6]))
        return ws, rank, c
    ws = draw(st.sampled_from([1, 2, 3, 4, 0, -1]))
    rank = draw(st.sampled_from([0, max(ws - 1, 0), ws, -1, 1]))
    c = draw(st.sampled_from([None, ws, 2 * ws, ws - 1, 1, 0, -1]))
    return ws, rank, c


@st.composite
def zephon_configs(draw: st.DrawFn) -> ZephonConfig:
    """One configuration: a world, a store and/or a directory, codec, env and a restore."""
    ws, rank, c = draw(worlds())
    restore = draw(st.sampled_from([None] * 16 + ["same", "same", 1, 4, 6, "garbage", "future"]))
    if restore == "same":
        restore = c if c is not None and c >= 1 else max(ws, 1)
    checkpoint = restore is None and (ws <= 1 or draw(st.booleans()))
    store, directory = draw(aggregate_locations())
    timeout_s = draw(st.sampled_from([0.1, 0.2]))
    master_port = draw(st.sampled_from([None, "", "abc", "0", "70000", LIVE, LIVE, LIVE, DEAD]))
    if master_port == LIVE or getattr(store, "port", None) == LIVE:
        # A live server must be reachable within the budget whatever the machine's load:
        # 0.1 s failed to connect on 2 busy cores. Short budgets stay for dead endpoints.
        timeout_s = LONE_ROUND_TIMEOUT_S if checkpoint and ws > 1 else LIVE_TIMEOUT_S
    return ZephonConfig(
        world_size=ws,
        global_rank=rank,
        canonical_replicas=c,
        aggregate_store=store,
        aggregate_dir=directory,
        aggregate_serializer=draw(st.sampled_from([None] * 7 + [*AGGREGATE_SERIALIZERS, "pickle"])),
        aggregate_compressor=draw(st.sampled_from([None] * 7 + [*AGGREGATE_COMPRESSORS, "gzip"])),
        aggregate_timeout_s=timeout_s,
        mapping_strategy=draw(
            st.sampled_from([None, None, "contiguous", "interleaved", "Interleaved", "diagonal"])
        ),
        auto_validation=draw(st.sampled_from([None] * 12 + ["strict", "WARN", "off", "bogus"])),
        extra_options=draw(st.sampled_from([()] * 16 + list(_EXTRA_OPTIONS))),
        master_addr=draw(st.sampled_from([None, "", "127.0.0.1", "127.0.0.1", "localhost"])),
        master_port=master_port,
        restore_from=restore,
        checkpoint=checkpoint,
    )


def property_settings(min_examples: int = MIN_CI_EXAMPLES) -> settings:
    """The loaded zephon-chaos profile, with at least ``min_examples`` where it generates.

    Without the plugin (no profile loaded) the ``ci`` profile is the base. A profile that
    doesn't generate (``replay``) is kept as it is. Probes sleep on timeouts, so no deadline.
    """
    from zephon_chaos import profiles  # registers the profiles

    name = settings.get_current_profile_name()
    base = settings.get_profile(name if name in profiles.PROFILES else "ci")
    if Phase.generate not in base.phases:
        return settings(base, deadline=None)
    return settings(base, max_examples=max(base.max_examples, min_examples), deadline=None)
