"""What a relaunch meets of the rounds its predecessors left, read without touching it.

Zephon keeps a launch's rounds under ``{run_id}-{reload_count}``, ``reload_count`` being the
restored checkpoint's plus one (``RoundCoordinator._scoped_run_id``): in a key-value store
as keys ``zephon/{run_id}-{n}/...`` (``KVCoordinator``), in ``aggregate_dir`` as files
``{dir}/{run_id}-{n}/.zephon_agg/...`` (``FileCoordinator``). A relaunch that restores the
same checkpoint as a dead launch, with the same run id, reuses that launch's namespace, where
Zephon calls isolation "best effort" (``KVCoordinator``'s docstring). A follower joins the
announced round unless it is older than ``aggregate_timeout_s + 30`` s or has a result
(``_read_open_round_id``); a dead leader leaves neither. Zephon leaves failed-round
artifacts to "manual cleanup once every participant has stopped" (``RoundCoordinator.cleanup``).

So a real job's relaunch meets such a round: the harness only looks (:meth:`RoundPlace.open_round`,
:meth:`RoundPlace.snapshot`), and removes it only as the operator step a scenario names
(``deployment.Operator`` ``clear_failed_rounds``, :meth:`RoundPlace.clear`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from zephon_chaos.workload.spec import WorkloadSpec

DEFAULT_RUN_ID = "default_run_id"
"""Zephon's ``options.DEFAULT_RUN_ID``: such a run id is scoped by topology and plan id too
(``RoundCoordinator._scoped_run_id``), which the harness cannot name."""
RELOAD_KEY = "checkpoint_reload_count"
"""The restore generation a Zephon checkpoint carries (``EngineStateV2``)."""


@dataclass(frozen=True)
class LeftoverRound:
    """A round a dead launch left announced with no result, in a relaunch's namespace.

    ``failed``: its leader lived to write a failure notice (which ``aggregate_dir`` keeps in a
    file of its own, so its followers still take the round for open); otherwise it left none.
    """

    namespace: str
    round_id: str
    failed: bool = False


def scoped_run_id(run_id: str, restored: Mapping[str, Any] | None) -> str | None:
    """``{run_id}-{reload_count}`` of a launch restoring ``restored`` (None: a run id Zephon
    scopes by what the harness cannot see)."""
    if run_id.startswith(DEFAULT_RUN_ID):
        return None
    if restored is None:
        return f"{run_id}-0"
    reload = restored.get(RELOAD_KEY)
    if not isinstance(reload, int):
        raise ValueError(
            f"the restored checkpoint has no integer {RELOAD_KEY!r} ({reload!r}): it is not a "
            "Zephon checkpoint, so its launch's round namespace is unknown"
        )
    return f"{run_id}-{reload + 1}"


def round_namespace(run_id: str, restored: Mapping[str, Any] | None) -> str | None:
    """The key prefix of a launch's rounds in a key-value store."""
    scoped = scoped_run_id(run_id, restored)
    return None if scoped is None else f"zephon/{scoped}"


def launch_scope(spec: WorkloadSpec, attempt: int = 0) -> str | None:
    """``{run_id}-{reload_count}`` torchrun attempt ``attempt`` of ``spec``'s launch uses
    (``spec`` as that attempt sees it: ``faults.restart.restart_view``)."""
    from zephon_chaos.workload import persist

    restored = (
        None if spec.restore_from is None else persist.load(spec.restore_from, spec.persist_format)
    )
    run_id = spec.pipeline.run_id + (f"-r{attempt}" if spec.run_id_per_restart else "")
    return scoped_run_id(run_id, restored)


class RoundPlace(Protocol):
    """Where a scenario's rounds outlive its launches: a hosted store or a shared directory."""

    def open_round(self, scope: str) -> LeftoverRound | None:
        """The round a follower of a launch in ``scope`` would join, read only."""
        ...

    def clear(self, leftover: LeftoverRound) -> None:
        """The operator's step: remove ``leftover``'s announcement."""
        ...

    def snapshot(self, scopes: tuple[str, ...]) -> tuple[object, ...]:
        """Zephon's state here, for the check that the harness changed none of it."""
        ...


class StoreRounds:
    """Rounds in a TCPStore at ``endpoint`` (``host:port``)."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s

    def _client(self) -> Any:
        import torch.distributed as dist

        host, _, port = self.endpoint.rpartition(":")
        return dist.TCPStore(
            host,
            int(port),
            is_master=False,
            wait_for_workers=False,
            use_libuv=True,
            timeout=timedelta(seconds=self.timeout_s),
        )

    def open_round(self, scope: str) -> LeftoverRound | None:
        client, namespace = self._client(), f"zephon/{scope}"
        announcement = f"{namespace}/round"
        if not client.check([announcement]):
            return None
        round_id = str(json.loads(client.get(announcement))["round"])
        if client.check([f"{namespace}/{round_id}/outcome"]):
            return None  # a result, or a failure notice: KVCoordinator keeps both there
        return LeftoverRound(namespace, round_id)

    def clear(self, leftover: LeftoverRound) -> None:
        self._client().delete_key(f"{leftover.namespace}/round")

    def snapshot(self, scopes: tuple[str, ...]) -> tuple[object, ...]:
        client = self._client()
        rounds = []
        for scope in scopes:
            key = f"zephon/{scope}/round"
            rounds.append((scope, bytes(client.get(key)) if client.check([key]) else None))
        return (client.num_keys(), tuple(rounds))


class DirRounds:
    """Rounds in files under ``aggregate_dir`` (``FileCoordinator``)."""

    def __init__(self, base: Path) -> None:
        self.base = Path(base)

    def _agg(self, scope: str) -> Path:
        return self.base / scope / ".zephon_agg"

    def open_round(self, scope: str) -> LeftoverRound | None:
        agg = self._agg(scope)
        try:
            round_id = (agg / "round.current").read_text().strip()
        except OSError:
            return None
        if not round_id or (agg / f"merged_{round_id}.ckpt").exists():
            return None
        failed = (agg / f"failed_{round_id}.txt").exists()
        return LeftoverRound(str(agg.relative_to(self.base)), round_id, failed)

    def clear(self, leftover: LeftoverRound) -> None:
        (self.base / leftover.namespace / "round.current").unlink(missing_ok=True)

    def snapshot(self, scopes: tuple[str, ...]) -> tuple[object, ...]:
        del scopes  # the whole directory is Zephon's
        if not self.base.exists():
            return ()
        return tuple(
            (str(p.relative_to(self.base)), hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(self.base.rglob("*"))
            if p.is_file()
        )
