"""What to launch: the entry point, the group's shape, the launch path, environment, deadline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from zephon_chaos.launch.hangwatch import HangWatch

LaunchPath = Literal["standalone", "static", "c10d"]
LAUNCH_PATHS: tuple[LaunchPath, ...] = ("standalone", "static", "c10d")

FORMATION_POLL_S = 1.0
"""How often a group whose formation is awaited looks for it: a cheap look at a few files."""


@dataclass(frozen=True)
class Formation:
    """A launch's deadline counted from its group's formation, a logical event the caller
    reads (every rank's first record, say), not from its start.

    How long ranks take to start and form a process group on a loaded machine does not scale
    with anything measured beforehand; what follows formation does. Until ``formed()`` holds
    the group has ``before_s`` (``ceiling_s`` where None, never more); from then on
    ``after_s`` more, but never less than the spec's ``deadline_s`` from the start, and never
    past ``ceiling_s``."""

    formed: Callable[[], bool]
    after_s: float
    ceiling_s: float
    poll_s: float = FORMATION_POLL_S
    before_s: float | None = None
    """The most the group may take to form, from the start: a ceiling that raised for what
    follows formation (a pipeline's worker processes) does not stretch it."""

    def __post_init__(self) -> None:
        if self.after_s <= 0 or self.ceiling_s <= 0 or self.poll_s <= 0:
            raise ValueError(
                "a formation deadline needs positive after_s, ceiling_s and poll_s, got "
                f"{self.after_s}, {self.ceiling_s}, {self.poll_s}"
            )
        if self.before_s is not None and self.before_s <= 0:
            raise ValueError(f"a formation deadline needs a positive before_s, got {self.before_s}")

    @property
    def to_form_s(self) -> float:
        """The deadline from the start while the group has not formed."""
        return self.ceiling_s if self.before_s is None else min(self.before_s, self.ceiling_s)


LaunchLane = Literal["cli", "warm"]
"""How the harness starts a torchrun group: ``cli`` runs ``python -m torch.distributed.run``
per launch; ``warm`` forks torchrun's agent and workers from a process that imported torch
already (``launch.warm``). Both run torchrun's own agent code; the launch path is apart."""
LAUNCH_LANES: tuple[LaunchLane, ...] = ("cli", "warm")
DEFAULT_LAUNCH_LANE: LaunchLane = "warm"
"""The lane of ``explore``, ``run`` and ``replay`` unless told (``--launch``): one value, so
a finding replays as it was found (~10x faster than ``cli`` per launch). A scenario file
saved by ``explore`` records its lane, which ``replay`` takes over this default."""


@dataclass(frozen=True)
class LaunchSpec:
    """One torchrun group; frozen: whoever needs another makes it with ``dataclasses.replace``.

    ``path`` is how users start torchrun: ``standalone`` (``--standalone``), ``static``
    (``--master-addr/--master-port``, the recipe demo's path) or ``c10d`` (``--rdzv-backend
    c10d --rdzv-endpoint``, the ``run_train.sh`` path; the harness hosts the rendezvous store).
    ``nnodes`` > 1 starts that many agents on this host.
    """

    entry: str | Path
    args: Sequence[str] = ()
    module: bool = False
    nproc: int = 2
    nnodes: int = 1
    path: LaunchPath = "standalone"
    env: dict[str, str] = field(default_factory=dict)
    deadline_s: float = 120.0
    max_restarts: int = 0
    name: str = "group"
    rdzv_endpoint_for: Callable[[str, int], tuple[str, int]] | None = None
    """Maps the hosted rendezvous store's address to the one agents dial (a proxy, say)."""
    hosts: int = 1
    """> 1: each of the ``nnodes`` agents on a host of its own, a network namespace
    (``launch.netns``); only a ``NetnsGroup`` launches it."""
    hang_watch: HangWatch | None = field(default=None, compare=False)
    """What the group watches for to end a known hang before its deadline
    (``launch.hangwatch``); None: it waits out its deadline. Torchrun groups only."""
    formation: Formation | None = field(default=None, compare=False)
    """Count ``deadline_s`` from the group's formation (:class:`Formation`); None: from the
    start. Torchrun groups only: ranks that are threads form at once."""

    def validate(self) -> None:
        if self.path not in LAUNCH_PATHS:
            raise ValueError(
                f"unknown launch path {self.path!r}; choose one of {', '.join(LAUNCH_PATHS)}"
            )
        if self.nproc < 1:
            raise ValueError(f"nproc must be at least 1, got {self.nproc}")
        if self.nnodes < 1:
            raise ValueError(f"nnodes must be at least 1, got {self.nnodes}")
        if self.nnodes > 1 and self.path == "standalone":
            raise ValueError(
                "--standalone starts a single node; use path='c10d' or 'static' for nnodes > 1"
            )
        if self.hosts > 1 and (self.nnodes != self.hosts or self.path == "standalone"):
            raise ValueError(
                f"hosts={self.hosts} runs one agent per host: set nnodes={self.hosts} and "
                "path 'c10d' or 'static'"
            )
        if self.deadline_s <= 0:
            raise ValueError(f"deadline_s must be positive, got {self.deadline_s}")
        if self.formation is not None and self.formation.ceiling_s < self.deadline_s:
            raise ValueError(
                f"the formation ceiling ({self.formation.ceiling_s:.0f}s) is below deadline_s "
                f"({self.deadline_s:.0f}s): the ceiling bounds the whole launch"
            )
        if not self.module and not Path(self.entry).is_file():
            raise FileNotFoundError(
                f"launch entry {str(self.entry)!r} is not a file; pass module=True for a module"
            )

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes
