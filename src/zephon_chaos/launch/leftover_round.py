"""Close a checkpoint round a dead launch left open, before a relaunch into its namespace.

Zephon keeps a key-value store's rounds under ``zephon/{run_id}-{reload_count}``,
``reload_count`` being the restored checkpoint's plus one (``KVCoordinator``, engine.py
``load_state_dict``): a relaunch that restores the same checkpoint as a dead launch, with the
same run id, reuses that launch's namespace, where Zephon calls isolation "best effort"
(``KVCoordinator``'s docstring). Its followers skip a stale announcement only when its round
has an outcome or is older than ``aggregate_timeout_s + 30`` s (``_read_open_round_id``); a
leader whose link or process died mid-round leaves neither (the failure notice is "best
effort", ``CheckpointCoordinator.aggregate``), so a relaunched follower that calls
``checkpoint()`` before its leader joins the dead round and the relaunch's round fails.
Zephon leaves such failed-round artifacts to "manual cleanup once every participant has
stopped" (``RoundCoordinator.cleanup``): the harness, which hosts the store that outlives
the launches, does that cleanup here, as an operator relaunching against it must. Rounds
that have an outcome are left alone: skipping them is Zephon's own promise, still tested.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zephon_chaos.workload.spec import WorkloadSpec

DEFAULT_RUN_ID = "default_run_id"
"""Zephon's ``options.DEFAULT_RUN_ID``: such a run id is scoped by topology and plan id too
(``RoundCoordinator._scoped_run_id``), which the harness cannot name."""
RELOAD_KEY = "checkpoint_reload_count"
"""The restore generation a Zephon checkpoint carries (``EngineStateV2``)."""


@dataclass(frozen=True)
class LeftoverRound:
    """A round a dead launch left open (announced, no outcome), closed before a relaunch."""

    namespace: str
    round_id: str


def round_namespace(run_id: str, restored: Mapping[str, Any] | None) -> str | None:
    """The key prefix of a launch's rounds, from its run id and the checkpoint it restores
    (None: a run id Zephon scopes by what the harness cannot see)."""
    if run_id.startswith(DEFAULT_RUN_ID):
        return None
    if restored is None:
        return f"zephon/{run_id}-0"
    reload = restored.get(RELOAD_KEY)
    if not isinstance(reload, int):
        raise ValueError(
            f"the restored checkpoint has no integer {RELOAD_KEY!r} ({reload!r}): it is not a "
            "Zephon checkpoint, so its launch's round namespace is unknown"
        )
    return f"zephon/{run_id}-{reload + 1}"


def close_leftover_round(
    endpoint: str, namespace: str, timeout_s: float = 10.0
) -> LeftoverRound | None:
    """Delete the announcement of ``namespace``'s open round if that round has no outcome.

    Call only once every participant of the launches before has stopped (Zephon's condition
    for cleaning up a failed round)."""
    import torch.distributed as dist

    host, _, port = endpoint.rpartition(":")
    client = dist.TCPStore(
        host,
        int(port),
        is_master=False,
        wait_for_workers=False,
        use_libuv=True,
        timeout=timedelta(seconds=timeout_s),
    )
    announcement = f"{namespace}/round"
    if not client.check([announcement]):
        return None
    round_id = str(json.loads(client.get(announcement))["round"])
    if client.check([f"{namespace}/{round_id}/outcome"]):
        return None
    client.delete_key(announcement)
    return LeftoverRound(namespace, round_id)


def close_before_relaunch(endpoint: str, spec: WorkloadSpec) -> LeftoverRound | None:
    """Close the leftover round in the namespace ``spec``'s launch will use, if any."""
    from zephon_chaos.workload import persist

    restored = None if spec.restore_from is None else persist.load(
        spec.restore_from, spec.persist_format
    )
    namespace = round_namespace(spec.pipeline.run_id, restored)
    return None if namespace is None else close_leftover_round(endpoint, namespace)
