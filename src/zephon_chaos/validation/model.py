"""One Zephon pipeline configuration as plain data, shared by the rule table and the probe.

The rule table predicts from these values without importing Zephon, and the probe turns the
same values into real ``Pipeline.options(...)`` calls. Endpoints that only exist at run time
(a live TCPStore, a port with nothing listening, a fresh directory) are written as tokens
that the probe resolves, so a configuration stays printable and replayable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum

LIVE = "{live}"
"""Port token: the port of a TCPStore server the probe keeps running."""
DEAD = "{dead}"
"""Port token: a port that is bound but not listening, so connections are refused."""
SCRATCH = "{scratch}"
"""``aggregate_dir`` token: a fresh empty directory made by the probe."""


class Moment(str, Enum):
    """When, in a pipeline's life, an outcome surfaces."""

    OPTIONS = "options"
    """At ``pipe.options(...)``."""
    RESTORE = "restore"
    """At the ``pipe.restore(ckpt)`` call itself."""
    ITER = "iter"
    """At ``iter(pipe)``, before any ``next()``."""
    FIRST_BATCH = "first_batch"
    """At the first ``next()`` (after a restore, if there was one)."""
    CHECKPOINT = "checkpoint"
    """At ``pipe.checkpoint()`` after the first batch."""


MOMENT_ORDER: tuple[Moment, ...] = tuple(Moment)
"""The moments in a pipeline's life order, which is the order :class:`Moment` declares them."""


@dataclass(frozen=True)
class StoreUri:
    """An ``aggregate_store`` URI kept in parts, so the table can reason about each part.

    ``scheme=None`` renders without ``://`` at all; ``port=None`` renders no colon and
    ``port=""`` a bare colon. ``port`` may be :data:`LIVE` or :data:`DEAD`.
    """

    scheme: str | None = "torch"
    userinfo: str = ""
    host: str = "127.0.0.1"
    port: str | None = LIVE
    path: str = ""
    query: str = ""
    fragment: str = ""

    def render(self, live_port: int | None = None, dead_port: int | None = None) -> str:
        port = self.port
        if port is not None:
            port = _resolve_port(port, live_port, dead_port)
        hostport = self.host + ("" if port is None else f":{port}")
        rest = f"{self.path}{self.query}{self.fragment}"
        if self.scheme is None:
            return f"{self.userinfo}{hostport or 'localhost'}{rest}"
        return f"{self.scheme}://{self.userinfo}{hostport}{rest}"

    def __str__(self) -> str:
        return self.render()


def _resolve_port(value: str, live_port: int | None, dead_port: int | None) -> str:
    if value == LIVE and live_port is not None:
        return str(live_port)
    if value == DEAD and dead_port is not None:
        return str(dead_port)
    return value


@dataclass(frozen=True)
class ZephonConfig:
    """Options for one pipeline, the environment it starts in, and what the probe does with it.

    ``None`` leaves an option at Zephon's default (the probe doesn't pass it).
    ``restore_from`` restores, before iterating, a checkpoint taken by a one-process
    pipeline with that many canonical replicas, or a malformed (``"garbage"``) or
    too-new (``"future"``) one. ``checkpoint`` takes ``pipe.checkpoint()`` after the
    first batch (never after a restore: the lane counts would depend on the restore).
    """

    world_size: int = 1
    global_rank: int = 0
    canonical_replicas: int | None = 1
    aggregate_store: StoreUri | str | None = None
    aggregate_dir: str | None = None
    aggregate_serializer: str | None = None
    aggregate_compressor: str | None = None
    aggregate_timeout_s: float = 0.2
    mapping_strategy: str | None = None
    auto_validation: str | None = None
    extra_options: tuple[str, ...] = ()
    master_addr: str | None = None
    master_port: str | None = None
    restore_from: int | str | None = None
    checkpoint: bool = True
    label: str = field(default="", compare=False)

    def steps(self) -> tuple[Moment, ...]:
        """The moments the probe goes through for this configuration, in order."""
        steps = [Moment.OPTIONS]
        if self.restore_from is not None:
            steps.append(Moment.RESTORE)
        steps += [Moment.ITER, Moment.FIRST_BATCH]
        if self.checkpoint and self.restore_from is None:
            steps.append(Moment.CHECKPOINT)
        return tuple(steps)

    def replay(self) -> str:
        """Python source that rebuilds this configuration (for failure messages)."""
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "label" or value == f.default:
                continue
            parts.append(f"{f.name}={value!r}")
        return f"ZephonConfig({', '.join(parts)})"


@dataclass(frozen=True)
class ExpectedError:
    """The exception one rule predicts: its type name, a message fragment and its moment."""

    rule_id: str
    type_name: str
    fragment: str
    moment: Moment


@dataclass(frozen=True)
class ExpectedWarning:
    """A warning one rule predicts at a moment."""

    rule_id: str
    category: str
    fragment: str
    moment: Moment


@dataclass(frozen=True)
class Expectation:
    """What the rule table predicts for a configuration: at most one error, and warnings."""

    error: ExpectedError | None
    warnings: tuple[ExpectedWarning, ...]
    steps: tuple[Moment, ...]

    def describe(self) -> str:
        lines = [f"steps: {' -> '.join(m.value for m in self.steps)}"]
        if self.error is None:
            lines.append("error: none")
        else:
            e = self.error
            lines.append(f"error: {e.rule_id} {e.type_name}({e.fragment!r}...) at {e.moment.value}")
        lines += [
            f"warning: {w.rule_id} {w.category}({w.fragment!r}...) at {w.moment.value}"
            for w in self.warnings
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class ObservedError:
    """An exception the real pipeline raised, and the step it raised in."""

    type_name: str
    message: str
    moment: Moment


@dataclass(frozen=True)
class ObservedWarning:
    """A warning the real pipeline emitted, and the step it was emitted in."""

    category: str
    message: str
    moment: Moment


@dataclass
class Observation:
    """What a probe saw: the first exception (if any), the warnings, and time per step."""

    error: ObservedError | None = None
    warnings: list[ObservedWarning] = field(default_factory=list)
    elapsed_s: dict[Moment, float] = field(default_factory=dict)
    hung_at: Moment | None = None
    budget_s: float = 0.0

    def describe(self) -> str:
        lines = []
        if self.hung_at is not None:
            lines.append(f"hung at {self.hung_at.value} (no outcome within {self.budget_s:.1f}s)")
        if self.error is None:
            lines.append("error: none")
        else:
            e = self.error
            lines.append(f"error: {e.type_name}: {e.message[:300]!r} at {e.moment.value}")
        lines += [
            f"warning: {w.category}: {w.message[:200]!r} at {w.moment.value}" for w in self.warnings
        ]
        timing = ", ".join(f"{m.value}={s:.3f}s" for m, s in self.elapsed_s.items())
        lines.append(f"elapsed: {timing}")
        return "\n".join(lines)
