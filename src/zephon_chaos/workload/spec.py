"""The workload's input: what data, which pipeline, how many steps, where to checkpoint.

Plain dataclasses with a versioned JSON round trip, so a spec written by the harness (or
saved in a scenario file) is read the same way by every rank of every launch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from zephon_chaos.errors import InvalidInput

SPEC_VERSION = 1
Runner = Literal["inline", "threads", "process"]
Mapping = Literal["contiguous", "interleaved"]
Aggregation = Literal["store", "store_explicit", "dir"]
PersistFormat = Literal["pickle", "torch", "json", "plain_json", "dcp"]
RUNNERS: tuple[str, ...] = ("inline", "threads", "process")
MAPPINGS: tuple[str, ...] = ("contiguous", "interleaved")
AGGREGATIONS: tuple[str, ...] = ("store", "store_explicit", "dir")
FORMATS: tuple[str, ...] = ("pickle", "torch", "json", "plain_json", "dcp")
"""How a merged checkpoint is persisted: ``json`` keeps Python types through tagged objects;
``plain_json`` is ``json.dumps`` as recipes write it (tuples become lists, int keys strings);
``dcp`` is ``torch.distributed.checkpoint`` holding ``{"dataloader": {"zephon": pickle}}``
as the downstream adapter saves it, collectively on every rank (torchrun only)."""
COLLECTIVE_FORMATS: tuple[str, ...] = ("dcp",)
"""Formats every rank persists and loads together, over the process group."""
_SUFFIXES = {"pickle": "pkl", "torch": "pt", "json": "json", "plain_json": "json", "dcp": "dcp"}
EXHAUSTION: tuple[str, ...] = ("repeat", "stop")
Retry = Literal["none", "lockstep", "independent", "skip"]
RETRIES: tuple[str, ...] = ("none", "lockstep", "independent", "skip")
"""After a failed checkpoint: raise; retry with every rank (an all-reduce of success decides);
retry alone; or skip it: every rank records the failure and trains on to the next scheduled
checkpoint, as recipes do when a checkpoint interval fails (the same all-reduce decides, so
rank 0 persists only a checkpoint every rank got and every rank makes the same calls)."""
AGREEING_RETRIES: tuple[str, ...] = ("lockstep", "skip")
"""The policies whose ranks agree (an all-reduce of success) after each attempt."""
Sync = Literal["lockstep", "free"]
SYNCS: tuple[str, ...] = ("lockstep", "free")
"""How ranks arrive at a checkpoint: ``lockstep`` meet in a collective first, as a trainer's
per-step gradient all-reduce keeps them within one step of each other; ``free`` run on their
own (data preparation, evaluation), so one may reach ``checkpoint()`` long after another."""
ROUND_PHASES: tuple[str, ...] = ("announce", "shard", "participants", "outcome", "ack")
"""Checkpoint-round phases the interposer sees, in protocol order (see ``faults.interposer``)."""
NEVER = "never"
ROUND_END = "round_end"
LINK_HEALS: tuple[str, ...] = (NEVER, ROUND_END)
"""When a link fault is removed (``ProxyFault.until``, ``PhaseTrigger.until``): never (it stays
to the launch's end), or at the end of the faulted round on its rank: once the rank's
``checkpoint()`` call the fault fired in has returned or raised (the rank removes it itself)."""


class SpecError(InvalidInput, ValueError):
    """A spec that cannot be run; the message names the field."""


@dataclass(frozen=True)
class SourceSpec:
    """One data source: ``shards`` lists each shard's row count."""

    name: str
    shards: tuple[int, ...] = (40, 40, 40)
    weight: float = 1.0
    kind: Literal["memory", "jsonl"] = "memory"
    exhausted: Literal["repeat", "stop"] = "repeat"

    def rows(self) -> int:
        return sum(self.shards)


PACKINGS: tuple[str, ...] = ("none", "first_fit", "best_fit", "wrap", "best_fit_wrap")
"""``pack_sequences`` algorithms, none first: whole rows into bins (``first_fit``,
``best_fit``), or rows split across bins (``wrap``, ``best_fit_wrap``)."""
BINNED_PACKINGS: tuple[str, ...] = ("first_fit", "best_fit")
"""The algorithms that keep ``num_bins`` open bins (Zephon refuses the argument elsewhere)."""
SHUFFLES: tuple[str, ...] = ("none", "streaming", "block", "block_warmup")
"""``shuffle`` buffer algorithms, none first."""
TOKEN_LIMIT = 1 << 10
"""Tokens a row may have: a token id is its row's code times this plus its place in the row."""
STAGE_RULES = ("stages-token-limit", "stages-need-tokens", "stages-values")
"""The ids of ``StagesSpec.invalid``'s refusals (``scenario_rules.ids.Rule``, which this
bottom layer cannot import): the token limit, a stage that needs tokens, any other value."""


@dataclass(frozen=True)
class StagesSpec:
    """The stages a downstream recipe puts between the mixture and the batch, in its order:
    tokenize, pack, shuffle (torchtitan-zephon's ``ZephonDataLoader``). Each keeps state per
    lane that a checkpoint must carry across a resume; all are off by default, so a scenario
    file written before they existed means what it meant.

    ``tokens``: 0 passes rows as they are; n > 0 maps each row to 1..n token ids, a pure
    function of the row (``map_transform``, the tokenizer's stand-in: no tokenizer can be
    downloaded here), whose values name the row, so a packed bin says what it holds.
    ``drop_every``: that map also drops one row in ``drop_every`` (0: none), as a filter.
    ``pack``: one of ``PACKINGS`` (``pack_sequences`` into bins of ``pack_length`` tokens,
    ``pack_bins`` open bins for the binned algorithms). ``shuffle``: one of ``SHUFFLES``
    (a buffer of ``shuffle_buffer`` records, ``shuffle_seed``).
    """

    tokens: int = 0
    drop_every: int = 0
    pack: str = "none"
    pack_length: int = 16
    pack_bins: int = 4
    shuffle: str = "none"
    shuffle_buffer: int = 8
    shuffle_seed: int = 0

    @property
    def any(self) -> bool:
        return bool(self.tokens) or self.pack != "none" or self.shuffle != "none"

    def invalid(self) -> tuple[str, str, str] | None:
        """The first field no pipeline could run with, why, and the refusal's id
        (``scenario_rules.ids.Rule``); None when all can."""
        limit, tokens, values = STAGE_RULES
        checks = (
            (
                "tokens",
                0 <= self.tokens < TOKEN_LIMIT,
                f"must be 0 (off) to {TOKEN_LIMIT - 1}",
                limit,
            ),
            ("drop_every", self.drop_every == 0 or self.drop_every >= 2, "must be 0 or 2+", values),
            (
                "drop_every",
                not self.drop_every or self.tokens,
                "needs tokens (the map drops)",
                tokens,
            ),
            ("pack", self.pack in PACKINGS, f"must be one of {PACKINGS}", values),
            ("pack", self.pack == "none" or self.tokens, "needs tokens to pack", tokens),
            ("pack_length", self.pack_length >= 1, "must be at least 1", values),
            ("pack_bins", self.pack_bins >= 1, "must be at least 1", values),
            ("shuffle", self.shuffle in SHUFFLES, f"must be one of {SHUFFLES}", values),
            ("shuffle_buffer", self.shuffle_buffer >= 1, "must be at least 1", values),
        )
        return next(((name, why, rule) for name, ok, why, rule in checks if not ok), None)

    def describe(self) -> str:
        """``tokens<=9 -1/3 -> pack first_fit(16, 4 bins) -> shuffle streaming(8)``, or ''."""
        parts = []
        if self.tokens:
            dropped = f" -1/{self.drop_every}" if self.drop_every else ""
            parts.append(f"tokens<={self.tokens}{dropped}")
        if self.pack != "none":
            bins = f", {self.pack_bins} bins" if self.pack in BINNED_PACKINGS else ""
            parts.append(f"pack {self.pack}({self.pack_length}{bins})")
        if self.shuffle != "none":
            parts.append(f"shuffle {self.shuffle}({self.shuffle_buffer})")
        return " -> ".join(parts)


def stage_count(stages: StagesSpec) -> int:
    """How many of a scenario's stage settings differ from none: smaller is plainer."""
    plain = StagesSpec()
    return sum(getattr(stages, f.name) != getattr(plain, f.name) for f in fields(StagesSpec))


def plainer_stages(stages: StagesSpec) -> list[StagesSpec]:
    """Simpler stages, the biggest simplification first: none; then without the shuffle, the
    pack or the filter, each alone; then any one setting at its default, where valid."""
    plain = StagesSpec()
    if stages == plain:
        return []
    out = [plain]
    for change in ({"shuffle": "none"}, {"pack": "none"}, {"drop_every": 0}):
        out.append(replace(stages, **change))
    out += [replace(stages, **{f.name: getattr(plain, f.name)}) for f in fields(StagesSpec)]
    seen: list[StagesSpec] = []
    for cand in out:
        if cand != stages and cand not in seen and cand.invalid() is None:
            seen.append(cand)
    return seen


@dataclass(frozen=True)
class DataSpec:
    sources: tuple[SourceSpec, ...] = (SourceSpec("a"),)
    seed: int = 7
    chunk_size: int = 16
    shuffle: bool = True
    microbatch: int = 4
    stages: StagesSpec = field(default_factory=StagesSpec)


@dataclass(frozen=True)
class PipelineSpec:
    """The pipeline's runtime options. The aggregation codec, prefetch depth and shutdown
    mode default to Zephon's own defaults (accepted values: ``validation.value_sets``), so a
    scenario file written before they existed means what it meant."""

    canonical_replicas: int = 6
    mapping: Mapping = "contiguous"
    runner: Runner = "inline"
    mtp_mode: bool = False
    aggregation: Aggregation = "store"
    aggregate_timeout_s: float = 30.0
    run_id: str = "zc-run"
    aggregate_serializer: str = "msgpack"
    aggregate_compressor: str = "zstd"
    prefetch_batches: int | None = None
    """Depth of the pipeline's tail prefetch; None lets Zephon derive it, 0 turns it off."""
    shutdown_mode: str = "graceful"


@dataclass(frozen=True)
class CheckpointAt:
    """After ``step`` whole global steps, plus ``extra`` batches on every rank (mid-window)."""

    step: int
    extra: int = 0


AT_STEP = "step"
"""``RankFault.at`` of a fault timed by a global step (``at_step``), not by a round point."""


@dataclass(frozen=True)
class RankFault:
    """A fault the rank applies to itself (or its agent) at a logical point.

    ``at_step``: before consuming global step k. ``action``: sigkill | sigterm | sigstop |
    exit | raise | kill_agent. ``rank``: which rank acts. ``restart``: the first torchrun
    restart attempt it fires in (``TORCHELASTIC_RESTART_COUNT``), and ``attempts``: in how
    many attempts from there (a crash loop: attempts 0..k-1 fail, attempt k runs through);
    ``restart`` None fires in every attempt.
    ``at``: ``step`` (at ``at_step``), or a round point of ``ROUND_PHASES`` with an optional
    ``#n`` (the rank's n-th write of that point): the interposer fires it right before that
    write (the harness turns it into a ``PhaseTrigger``; ``at_step`` is then unused).
    """

    rank: int
    at_step: int
    action: str
    restart: int | None = None
    at: str = AT_STEP
    attempts: int = 1

    @property
    def at_round(self) -> bool:
        """Timed by a checkpoint-round point rather than a step."""
        return self.at != AT_STEP

    def fires_in(self, attempt: int) -> bool:
        """Whether it fires in torchrun restart attempt ``attempt``."""
        return self.restart is None or self.restart <= attempt < self.restart + self.attempts

    @property
    def until_attempt(self) -> int | None:
        """The first attempt it no longer fires in (None: it fires in every attempt)."""
        return None if self.restart is None else self.restart + self.attempts


CHILD_TARGETS: tuple[str, ...] = ("workers", "worker")
"""What a ``ChildFault`` kills of ``runner: process``: ``workers``, every worker process of the
rank; ``worker``, one (the lowest PID), as the OOM killer most often takes one."""
ALL_WORKERS = CHILD_TARGETS[0]


@dataclass(frozen=True)
class ChildFault:
    """A rank SIGKILLs its pipeline's own child processes, before consuming global step
    ``at_step``, and draws on: the rank lives, so the launch is judged as one that completes.

    ``target`` (``CHILD_TARGETS``): ``workers`` (all of the rank's) or ``worker`` (one), the
    fetch workers Zephon's watchdog is to replace, re-dispatching their work, so the batches
    must stay exactly the same.
    """

    rank: int
    at_step: int
    target: str = "workers"


@dataclass(frozen=True)
class PhaseTrigger:
    """A fault the interposer applies when ``rank`` writes a key of a checkpoint-round phase.

    ``phase``: one of ``ROUND_PHASES``; ``occurrence``: the n-th such write of this rank
    (1 = its first round); ``when``: ``before`` or ``after`` the write reaches the store.
    ``action``: event | hold | drop | cut | toxic | raise | sigkill | sigterm | sigstop |
    exit | kill_agent (see ``faults.interposer.ACTIONS``); ``toxic``/``attributes``/``stream``
    describe the toxic of action ``toxic``; ``hold_timeout_s`` bounds a hold; ``until``
    (``LINK_HEALS``, actions ``cut`` and ``toxic``): when the rank undoes its action.
    """

    rank: int
    phase: str
    action: str = "event"
    occurrence: int = 1
    when: str = "before"
    toxic: str = ""
    attributes: dict[str, int] = field(default_factory=dict)
    stream: str = "downstream"
    hold_timeout_s: float = 60.0
    until_attempt: int | None = None
    """The first torchrun restart attempt it no longer fires in (None: every attempt): a
    round-point rank fault of attempt 0 must not fire again in the restarted workers."""
    until: str = NEVER


@dataclass(frozen=True)
class RankLag:
    """A deliberate late arrival (a fault, under ``sync: free``): ``rank`` calls its
    ``checkpoint``-th checkpoint (0-based, in this launch) only once ``waits_for`` has ended
    its own call of checkpoint ``checkpoint + by``, so it is later than ``aggregate_timeout_s``
    by construction (that call cannot complete without this rank's shard or announcement, so
    it ends by its budget). ``waits_for`` None: the leader (rank 0), or rank 1 when ``rank``
    is the leader. ``by``: whole checkpoint intervals the rank drifts behind its peer (0: late
    for the same checkpoint), as free-running evaluation and inference ranks may."""

    rank: int
    checkpoint: int = 0
    waits_for: int | None = None
    by: int = 0

    def awaited(self) -> int:
        if self.waits_for is not None:
            return self.waits_for
        return 1 if self.rank == 0 else 0

    @property
    def awaited_call(self) -> int:
        """The awaited rank's checkpoint whose first call must end before this rank calls."""
        return self.checkpoint + self.by


@dataclass
class WorkloadSpec:
    """Everything one launch of the workload needs; each rank reads the same file."""

    data: DataSpec = field(default_factory=DataSpec)
    pipeline: PipelineSpec = field(default_factory=PipelineSpec)
    steps: int = 4
    checkpoints: tuple[CheckpointAt, ...] = ()
    restore_from: str | None = None
    persist_format: PersistFormat = "pickle"
    out_dir: str = "."
    data_dir: str | None = None
    aggregate_dir: str | None = None
    store_uri: str | None = None
    faults: tuple[RankFault, ...] = ()
    child_faults: tuple[ChildFault, ...] = ()
    """Kills of the ranks' pipeline child processes (``ChildFault``); torchrun groups only."""
    backend: Literal["gloo", "nccl"] = "gloo"
    plant: str | None = None
    """A deliberate defect, to show the oracle catches it (see ``workload.plants``)."""
    store_proxy_ports: dict[str, int] = field(default_factory=dict)
    """Rank (a string: JSON's key type) → port of its own proxy on 127.0.0.1 in front of the
    aggregation store; the rank points the proxy at MASTER_ADDR:MASTER_PORT once it knows them."""
    store_proxy_names: dict[str, str] = field(default_factory=dict)
    """Rank → name of that proxy on the Toxiproxy server at ``proxy_api_url``."""
    proxy_api_url: str | None = None
    interpose: bool = False
    """Wrap the store client in the interposer (``chaos://``) even without triggers."""
    triggers: tuple[PhaseTrigger, ...] = ()
    control: str | None = None
    """Abstract Unix socket name where the harness hears interposer events (and releases holds)."""
    retry: Retry = "none"
    """After a failed checkpoint: raise (none), all ranks agree by an all-reduce of success and
    retry together (lockstep), each rank retries alone (independent), or every rank records
    the failure and goes on to the next scheduled checkpoint (skip; see ``RETRIES``)."""
    retry_attempts: int = 2
    """Checkpoint calls per checkpoint at most, under lockstep or independent retry."""
    sync: Sync = "free"
    """``lockstep``: the ranks meet before each checkpoint (see ``SYNCS``): a torchrun group
    in an all-reduce, rank threads in ``inproc.collective``."""
    lags: tuple[RankLag, ...] = ()
    """Deliberate late arrivals at checkpoints (``RankLag``); torchrun groups only."""

    @property
    def draws_past_failures(self) -> bool:
        """A rank whose every attempt at a checkpoint failed records it and draws on to its
        next one, as a free-running evaluation or inference loader does (nothing waits on its
        checkpoint): ``independent`` retry beside a lag, so ranks may drift apart by whole
        checkpoint intervals. Every other policy raises or agrees as ``retry`` says."""
        return self.retry == "independent" and bool(self.lags)

    @property
    def keeps_own_copy(self) -> bool:
        """Every rank persists the merged checkpoint it got (``rank_checkpoint_path``), not
        rank 0 alone: under ``independent`` retry ranks may get different ones, and each is
        judged by resuming it (``runner.verify``). Collective formats save together: none."""
        return self.retry == "independent" and self.persist_format not in COLLECTIVE_FORMATS
    run_id_per_restart: bool = False
    """Append torchrun's ``TORCHELASTIC_RESTART_COUNT`` to the run id (``-r<n>``), as a
    recipe whose run id includes it does (``deployment.RunIdPolicy`` ``per_restart``)."""
    resume_on_restart: bool = False
    """In a torchrun restart, write under ``out_dir/restart<n>`` and restore the latest
    checkpoint an earlier attempt persisted."""
    pg_timeout_s: float | None = None
    """Process-group timeout (gloo collectives); None keeps torch's default."""
    tp: int = 1
    """Tensor-parallel ranks per data-parallel group: Zephon gets ``dp_degree`` world / tp and
    ``dp_group_id`` rank // tp, as the downstream adapter passes them (``lanes.dp_group``)."""
    version: int = SPEC_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json())
        return path

    @classmethod
    def from_json(cls, text: str) -> WorkloadSpec:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise SpecError(f"workload spec is not JSON: {exc}") from None
        return from_dict(cls, raw, "spec")

    @classmethod
    def read(cls, path: Path | str) -> WorkloadSpec:
        return cls.from_json(Path(path).read_text())

    def checkpoint_path(self, index: int) -> Path:
        """The file (a directory for ``dcp``) checkpoint ``index`` is persisted to."""
        return Path(self.out_dir) / f"ckpt-{index}.{_SUFFIXES[self.persist_format]}"

    def rank_checkpoint_path(self, index: int, rank: int) -> Path:
        """Where rank ``rank`` keeps its own copy of checkpoint ``index`` (rank 0's is
        :meth:`checkpoint_path`): see ``keeps_own_copy``."""
        if rank == 0:
            return self.checkpoint_path(index)
        return Path(self.out_dir) / f"ckpt-{index}-rank{rank}.{_SUFFIXES[self.persist_format]}"


_NESTED: dict[str, type] = {
    "data": DataSpec,
    "pipeline": PipelineSpec,
    "sources": SourceSpec,
    "stages": StagesSpec,
    "checkpoints": CheckpointAt,
    "faults": RankFault,
    "child_faults": ChildFault,
    "triggers": PhaseTrigger,
    "lags": RankLag,
}


def from_dict(cls: type, raw: Any, where: str) -> Any:
    """Build dataclass ``cls`` from JSON, naming the exact field that is wrong."""
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected an object, got {type(raw).__name__}")
    if cls is WorkloadSpec and raw.get("version", SPEC_VERSION) > SPEC_VERSION:
        raise SpecError(
            f"{where}.version: {raw['version']} is newer than this zephon-chaos reads "
            f"({SPEC_VERSION}); upgrade zephon-chaos"
        )
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {', '.join(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, value in raw.items():
        nested = _NESTED.get(name)
        if nested is not None and isinstance(value, list):
            kwargs[name] = tuple(
                from_dict(nested, item, f"{where}.{name}[{i}]") for i, item in enumerate(value)
            )
        elif nested is not None:
            kwargs[name] = from_dict(nested, value, f"{where}.{name}")
        elif name == "shards":
            if not isinstance(value, list) or not all(isinstance(n, int) and n > 0 for n in value):
                raise SpecError(f"{where}.shards: expected a list of positive row counts")
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SpecError(f"{where}: {exc}") from None
