"""Run one configuration against real Zephon in this process and record what surfaces when.

A probe builds a small in-memory pipeline, applies the options, optionally restores a
checkpoint, iterates one batch and optionally checkpoints, noting the exception and
warnings of each step. It runs in a watchdog thread so that a hang becomes an observation
instead of a stuck test run. Zephon and torch are imported here, so only the suite's
Zephon tests import this module.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

from zephon_chaos.closing import Closing
from zephon_chaos.validation.model import (
    DEAD,
    LIVE,
    SCRATCH,
    Moment,
    Observation,
    ObservedError,
    ObservedWarning,
    StoreUri,
    ZephonConfig,
)

ROWS_PER_SHARD = 128
CHUNK_SIZE = 16
MICROBATCH = 4
FUTURE_VERSION = 99
"""A checkpoint ``version`` beyond what Zephon 0.2.0 reads."""
SCRATCH_PREFIX = "chaos_validation_"
"""Not ``zephon*``: leak checks (ours and concurrent sessions') delete new ``zephon*``
temp entries, and this directory outlives single tests on purpose."""


class Endpoints(Closing):
    """What probes point at: a live TCPStore, a refusing port, and a scratch directory.

    The live store is a c10d TCPStore server on an ephemeral port (c10d listens on every
    interface; probes reach it through 127.0.0.1 or localhost). The dead port is a loopback
    socket bound but never listening, held while the endpoints live so nothing else takes
    it. Every probe's directories (and Zephon's default ``zephon_state_r*``) live under the
    scratch directory, removed on close.
    """

    def __init__(self) -> None:
        import torch.distributed as dist

        self._store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        self.live_port: int = self._store.port
        self._dead = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._dead.bind(("127.0.0.1", 0))
        self.dead_port: int = self._dead.getsockname()[1]
        self.scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
        self._checkpoints: dict[int, dict[str, Any]] = {}

    def fresh_dir(self) -> str:
        return tempfile.mkdtemp(dir=self.scratch, prefix="agg_")

    def resolve_port(self, value: str | None) -> str | None:
        if value == LIVE:
            return str(self.live_port)
        if value == DEAD:
            return str(self.dead_port)
        return value

    def checkpoint_with(self, canonical_replicas: int) -> dict[str, Any]:
        """A checkpoint of a one-rank pipeline with C lanes, taken after one batch."""
        if canonical_replicas not in self._checkpoints:
            pipe = build_pipeline().options(
                canonical_replicas=canonical_replicas, aggregate_dir=self.fresh_dir()
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                it = iter(pipe)
                next(it)
                self._checkpoints[canonical_replicas] = pipe.checkpoint()
                it.close()
        return copy.deepcopy(self._checkpoints[canonical_replicas])

    def close(self) -> None:
        self._dead.close()
        del self._store
        shutil.rmtree(self.scratch, ignore_errors=True)


def build_pipeline() -> Any:
    """Two in-memory shards, a one-dataset mixture, batches of four: cheap to start."""
    shards = {shard: [{"x": shard * 1000 + i} for i in range(ROWS_PER_SHARD)] for shard in (0, 1)}
    return one_dataset_pipeline("a", shards, chunk_size=CHUNK_SIZE, seed=0, microbatch=MICROBATCH)


def one_dataset_pipeline(
    name: str,
    shards: dict[int, list[dict[str, Any]]],
    *,
    chunk_size: int,
    seed: int,
    microbatch: int,
) -> Any:
    """A Zephon pipeline over one in-memory dataset (rows per shard), shuffled within shards
    and batched, without options: the cheapest real pipeline, which the probe and the chunked
    checkpoint benchmark both start."""
    from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

    source = StaticMixtureWorkSource(
        datasets=[Dataset.from_dict(name, {s: InMemoryShard(rows) for s, rows in shards.items()})],
        mixture=MixtureSpec({name: 1.0}),
        chunk_size=chunk_size,
        seed=seed,
        shuffle_within_shard=True,
    )
    return Pipeline(source).batch(microbatch_size=microbatch)


def zephon_options(cfg: ZephonConfig, endpoints: Endpoints) -> dict[str, Any]:
    """The keyword arguments the probe passes to ``Pipeline.options``."""
    options: dict[str, Any] = {
        "world_size": cfg.world_size,
        "global_rank": cfg.global_rank,
        "aggregate_timeout_s": cfg.aggregate_timeout_s,
        # Unique per probe: rounds of earlier probes in the shared store must not match.
        "run_id": f"probe-{uuid.uuid4().hex[:12]}",
    }
    if cfg.canonical_replicas is not None:
        options["canonical_replicas"] = cfg.canonical_replicas
    store = cfg.aggregate_store
    if isinstance(store, StoreUri):
        options["aggregate_store"] = store.render(endpoints.live_port, endpoints.dead_port)
    elif store is not None:
        options["aggregate_store"] = store
    if cfg.aggregate_dir is not None:
        options["aggregate_dir"] = (
            endpoints.fresh_dir() if cfg.aggregate_dir == SCRATCH else cfg.aggregate_dir
        )
    for name in (
        "aggregate_serializer",
        "aggregate_compressor",
        "mapping_strategy",
        "auto_validation",
    ):
        value = getattr(cfg, name)
        if value is not None:
            options[name] = value
    for name in cfg.extra_options:
        options[name] = 1
    return options


@contextlib.contextmanager
def _environment(cfg: ZephonConfig, endpoints: Endpoints) -> Iterator[None]:
    """MASTER_ADDR/MASTER_PORT as the config says, and temp files under the scratch dir."""
    wanted = {
        "MASTER_ADDR": cfg.master_addr,
        "MASTER_PORT": endpoints.resolve_port(cfg.master_port),
    }
    saved = {name: os.environ.get(name) for name in wanted}
    saved_tempdir = tempfile.tempdir
    try:
        for name, value in wanted.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir = endpoints.scratch
        yield
    finally:
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _source_checkpoint(cfg: ZephonConfig, endpoints: Endpoints) -> dict[str, Any]:
    if cfg.restore_from == "garbage":
        return {"not": "a checkpoint"}
    if cfg.restore_from == "future":
        ckpt = endpoints.checkpoint_with(1)
        ckpt["version"] = FUTURE_VERSION
        return ckpt
    assert isinstance(cfg.restore_from, int)
    return endpoints.checkpoint_with(cfg.restore_from)


def _run(cfg: ZephonConfig, endpoints: Endpoints, obs: Observation, state: dict[str, Any]) -> None:
    """The probe body; ``state['moment']`` tells the watchdog where a hang happened."""
    ckpt = _source_checkpoint(cfg, endpoints) if cfg.restore_from is not None else None
    pipe = build_pipeline()
    options = zephon_options(cfg, endpoints)
    iterator: Any = None
    with _environment(cfg, endpoints), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def step(moment: Moment, action: Any) -> Any:
            state["moment"] = moment
            before = len(caught)
            start = time.perf_counter()
            try:
                return action()
            finally:
                obs.elapsed_s[moment] = time.perf_counter() - start
                obs.warnings += [
                    ObservedWarning(w.category.__name__, str(w.message), moment)
                    for w in caught[before:]
                ]

        try:
            for moment in cfg.steps():
                if moment is Moment.OPTIONS:
                    step(moment, lambda: pipe.options(**options))
                elif moment is Moment.RESTORE:
                    step(moment, lambda: pipe.restore(ckpt))
                elif moment is Moment.ITER:
                    iterator = step(moment, lambda: iter(pipe))
                elif moment is Moment.FIRST_BATCH:
                    step(moment, functools.partial(next, iterator))
                else:
                    step(moment, pipe.checkpoint)
        except BaseException as exc:
            obs.error = ObservedError(type(exc).__name__, str(exc), state["moment"])
        finally:
            if iterator is not None:
                with contextlib.suppress(Exception):
                    iterator.close()


def probe(cfg: ZephonConfig, endpoints: Endpoints, *, budget_s: float | None = None) -> Observation:
    """Run ``cfg`` once; give up (``hung_at``) if it takes longer than ``budget_s``.

    The default budget covers the slowest legitimate outcome, an unreachable store:
    two connect attempts of ``aggregate_timeout_s`` plus c10d's back-off between them.
    """
    budget = budget_s if budget_s is not None else 10.0 + 4 * cfg.aggregate_timeout_s
    obs = Observation(budget_s=budget)
    state: dict[str, Any] = {"moment": Moment.OPTIONS}
    crash: list[BaseException] = []

    def target() -> None:
        try:
            _run(cfg, endpoints, obs, state)
        except BaseException as exc:  # a harness failure, not a Zephon outcome
            crash.append(exc)

    thread = threading.Thread(target=target, name="zephon-validation-probe", daemon=True)
    thread.start()
    thread.join(budget)
    if thread.is_alive():
        obs.hung_at = state["moment"]
    if crash:
        raise RuntimeError(f"the probe itself failed for {cfg.replay()}") from crash[0]
    return obs
