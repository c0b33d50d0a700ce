"""The value sets Zephon 0.2.0 accepts or rejects for its options, named once: the rules'
predicates, the strategies and the configurations draw on the same tuples."""

from __future__ import annotations

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
