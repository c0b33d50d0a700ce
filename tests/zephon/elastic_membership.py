"""Standalone (torch and zephon only): a torchrun job changes its number of nodes, and the ranks
of its next generation restore the last checkpoint at the new world size.

Run: ``python elastic_membership.py CASE OUT`` (plain python: it starts two torchrun agents).

torchrun's own way to "resume with a different number of ranks": agents on this host with
``--nnodes 1:2`` (c10d rendezvous, ``--max-restarts 1``), two ranks each, every rank meeting
the others each step (a barrier, as a trainer's all-reduce), the checkpoint aggregated through
``aggregate_store="torch://"`` (the store torchrun runs for the workers) and persisted by rank
0. A generation restores the checkpoint it finds on disk. Cases:

- ``lost-between-steps``: 4 ranks take a checkpoint on a window boundary and draw one more
  step; then node 1 (its agent and both its ranks) is SIGKILLed. Node 0's ranks fail at the
  next barrier (gloo: the peer reset the connection), their agent restarts them, the
  rendezvous closes on the one node left, and 2 ranks restore the checkpoint.
- ``lost-at-a-checkpoint``: the same, but node 1 goes where every rank takes its second
  checkpoint: node 0's ranks are already in that round, which fails (the leader waits out
  ``aggregate_timeout_s`` for the lost ranks' shards) and leaves its failure in the agent's
  store, which torchrun keeps across restarts.
- ``node-joins``: node 0 alone runs 2 ranks, takes the checkpoint and draws one more step;
  once the checkpoint is on disk a second agent starts, node 0's agent stops its ranks for
  the membership change (SIGTERM, mid-step), and 4 ranks over both nodes restore it. The
  agents do not share their TCPStore with the workers (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE``):
- ``node-joins-shared-store``: the same with torch's default, which deadlocks both agents in
  the round the new node starts (``JOIN_DEADLOCK``): their exit codes are 1, and the
  agents' logs end in ``DistStoreError: wait timeout after 60000ms``.

Prints one JSON line: ``{"case", "agent_codes", "worlds", "restored", "mismatches",
"checkpoint_errors", "went_on"}``: the agents' exit codes, each generation's world size, the
ranks of the last generation that restored, every lane whose batches (the first generation's
up to its checkpoint, then the last one's) differ from its uninterrupted stream, each rank's error
in the round node 1 left, and ranks that drew on where they should have stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

CASES = ("lost-between-steps", "lost-at-a-checkpoint", "node-joins", "node-joins-shared-store")
C = 4
NPROC = 2
BEFORE = 2
"""Global steps attempt 0 draws before its checkpoint (every lane alike: a window boundary)."""
AFTER = 1
"""Global steps attempt 0 draws after it, lost with node 1."""
RESUMED = 3
"""Global steps attempt 1 draws from the checkpoint."""
TIMEOUT_S = 5
"""``aggregate_timeout_s``: how long the round node 1 left waits for its shards."""
KEEP_ALIVE_ATTEMPTS = 6
"""Heartbeats (one a second) a node may miss before the rendezvous drops it: the time a lost
node takes to be dropped. Too few, and a busy live agent is dropped too (2 was: the joining
node then formed a round of its own while node 0 still ran)."""
JOIN_DEADLOCK = (
    "torch 2.13 DynamicRendezvousHandler.next_rendezvous: the running rank-0 agent, which "
    "built its bootstrap store info in round 0, skips RendezvousStoreInfo.build in the round "
    "a new node starts, so it never writes MASTER_ADDR there; the new agent waits for that "
    "key, the old one for the new one's role_info: both time out after 60 s"
)
DEADLINE_S = 150.0
"""Both agents' deadline (measured: 16-23 s a case on 2 cores; 75 s for the deadlock)."""


def build(world: int, rank: int) -> Any:
    from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

    rows = {s: InMemoryShard([{"s": s, "i": i} for i in range(400)]) for s in range(3)}
    source = StaticMixtureWorkSource(
        datasets=[Dataset.from_dict("a", rows)],
        mixture=MixtureSpec({"a": 1.0}),
        chunk_size=16,
        seed=7,
        shuffle_within_shard=True,
    )
    return (
        Pipeline(source)
        .batch(microbatch_size=4)
        .options(
            world_size=world,
            global_rank=rank,
            canonical_replicas=C,
            run_id="elastic",
            aggregate_store="torch://" if world > 1 else None,
            aggregate_timeout_s=TIMEOUT_S,
        )
    )


def lane_and_ids(batch: Any) -> tuple[int, list[list[int]]]:
    return int(batch.lane_ids[0]), [list(map(int, x)) for x in batch.ids]


def join_group(generation: int) -> Any:
    """Join this generation's process group; the store it uses.

    torch 2.13's agent keeps its store across restarts with the earlier generation's gloo
    addresses in it: a rank of a later one that joins the default way dials dead ranks. So
    every generation publishes its addresses under a prefix of its own.
    """
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    base = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        # The agent's own store, where it shares it; else rank 0 hosts one, as torch's does.
        is_master=os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" and rank == 0,
        timeout=timedelta(seconds=60),
        wait_for_workers=False,
    )
    store = dist.PrefixStore(f"generation{generation}", base)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=int(os.environ["WORLD_SIZE"])
    )
    return store


def rank_main(case: str, out: Path) -> None:
    import torch.distributed as dist

    # A generation is one start of the workers: a failure's restart, or a membership change
    # (which torchrun does not count as a restart). The second finds the checkpoint on disk.
    attempt = int((out / "checkpoint.pkl").exists())
    store = join_group(attempt)
    world, rank = dist.get_world_size(), dist.get_rank()
    log = (out / f"a{attempt}-r{rank}.jsonl").open("w")

    def note(**fields: Any) -> None:
        log.write(json.dumps({"attempt": attempt, "world": world, "rank": rank, **fields}) + "\n")
        log.flush()

    def lose_node_1() -> None:
        if os.environ["NODE_TAG"] == "1":  # its agent and every rank on it
            if os.environ["LOCAL_RANK"] == "0":
                os.kill(os.getppid(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)

    def wait_for_the_new_node() -> None:
        # A long step: torchrun's agent ends it (SIGTERM) once a node asks to join.
        store.wait(["never-set"], timedelta(seconds=DEADLINE_S))
        note(never_restarted=True)
        sys.exit(4)

    pipe = build(world, rank)
    if attempt > 0:
        with (out / "checkpoint.pkl").open("rb") as f:
            pipe.restore(pickle.load(f))
        note(restored=True)
    it = iter(pipe)

    def step() -> None:
        for _ in range(C // world):
            lane, ids = lane_and_ids(next(it))
            note(lane=lane, ids=ids)
        dist.barrier()

    if attempt > 0:
        for _ in range(RESUMED):
            step()
        dist.destroy_process_group()
        return
    for _ in range(BEFORE):
        step()
    checkpoint = pipe.checkpoint()
    if rank == 0:
        (out / "checkpoint.tmp").write_bytes(pickle.dumps(checkpoint))
        (out / "checkpoint.tmp").rename(out / "checkpoint.pkl")
    note(checkpoint=BEFORE)
    dist.barrier()  # persisted before anyone draws on
    for _ in range(AFTER):
        step()
    if case.startswith("node-joins"):
        wait_for_the_new_node()
    lose_node_1()
    if case == "lost-at-a-checkpoint":
        try:
            pipe.checkpoint()
        except Exception as exc:  # the round node 1 left fails: what it says is evidence
            note(checkpoint_error=f"{type(exc).__name__}: {exc}"[:300])
            raise
    step()  # node 0: the collective with the lost ranks fails
    note(went_on=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(case: str, out: Path) -> list[int | None]:
    """Both agents, node 0 hosting the rendezvous; their exit codes (None: past the deadline,
    killed with their sessions)."""
    port = free_port()
    conf = f"last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt={KEEP_ALIVE_ATTEMPTS}"
    agents: list[subprocess.Popen[bytes]] = []
    for node in range(2):
        joins = case.startswith("node-joins") and node == 1
        if joins and not appeared(out / "checkpoint.pkl", agents):
            break
        argv = [
            *(sys.executable, "-m", "torch.distributed.run", "--nnodes", "1:2"),
            *("--nproc-per-node", str(NPROC), "--max-restarts", "1", "--monitor-interval", "0.5"),
            *("--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}"),
            *("--rdzv-id", "elastic", "--rdzv-conf", f"{conf},is_host={node == 0}".lower()),
            *("--log-dir", str(out / f"logs{node}"), "--tee", "2"),
            *(__file__, case, str(out)),
        ]
        log = (out / f"agent{node}.log").open("w")
        env = {**os.environ, "NODE_TAG": str(node)}
        if case == "node-joins":  # not "node-joins-shared-store", which shows why
            # torch 2.13: with the agents' TCPStore shared (the default), the round a joining
            # node starts deadlocks both agents (JOIN_DEADLOCK); this is torch's way out.
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        agents.append(
            subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )
    codes: list[int | None] = []
    for agent in agents:
        try:
            codes.append(agent.wait(timeout=DEADLINE_S))
        except subprocess.TimeoutExpired:
            for a in agents:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(a.pid, signal.SIGKILL)
            codes.append(None)
    return codes


def appeared(path: Path, agents: list[subprocess.Popen[bytes]]) -> bool:
    """Whether ``path`` appeared before the deadline, while the agents ran."""
    end = time.monotonic() + DEADLINE_S
    while not path.exists():
        if time.monotonic() > end or any(a.poll() is not None for a in agents):
            return False
        time.sleep(0.05)  # polling a file the ranks write: no event to block on
    return True


def streams(n: int) -> dict[int, list[Any]]:
    """The first ``n`` batches of every lane, uninterrupted, on one rank."""
    it = iter(build(1, 0))
    out: dict[int, list[Any]] = {lane: [] for lane in range(C)}
    while min(len(v) for v in out.values()) < n:
        lane, ids = lane_and_ids(next(it))
        out[lane].append(ids)
    return out


def judge(case: str, out: Path, codes: list[int | None]) -> dict[str, Any]:
    records = [json.loads(line) for p in sorted(out.glob("a*-r*.jsonl")) for line in p.open()]
    worlds = {r["attempt"]: r["world"] for r in records}
    last = max(worlds, default=0)
    got: dict[int, list[Any]] = {lane: [] for lane in range(C)}
    for attempt in sorted(worlds):
        drawn: dict[int, list[Any]] = {lane: [] for lane in range(C)}
        for r in records:
            if r["attempt"] == attempt and "lane" in r:
                drawn[r["lane"]].append(r["ids"])
        for lane, batches in drawn.items():  # attempt 0's after its checkpoint were lost
            got[lane] += batches[:BEFORE] if attempt < last else batches
    reference = streams(BEFORE + RESUMED)
    return {
        "case": case,
        "agent_codes": codes,
        "worlds": [worlds[a] for a in sorted(worlds)],
        "restored": sorted(r["rank"] for r in records if r.get("restored")),
        "mismatches": [lane for lane in range(C) if got[lane] != reference[lane]],
        "checkpoint_errors": {
            str(r["rank"]): r["checkpoint_error"] for r in records if "checkpoint_error" in r
        },
        "went_on": [r["rank"] for r in records if r.get("went_on") or r.get("never_restarted")],
    }


def main() -> None:
    case, out = sys.argv[1], Path(sys.argv[2]).resolve()
    if case not in CASES:
        sys.exit(f"unknown case {case!r}: one of {', '.join(CASES)}")
    if "TORCHELASTIC_RESTART_COUNT" in os.environ:
        rank_main(case, out)
        return
    out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(judge(case, out, launch(case, out))), flush=True)


if __name__ == "__main__":
    main()
