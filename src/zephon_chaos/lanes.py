"""Which canonical lanes a rank owns: the same arithmetic as Zephon's ``Engine._build_world``.

Shared by the workload (how many batches make one global step on this rank) and the oracle
(which rank should have produced which lane).
"""

from __future__ import annotations


def lanes_of(rank: int, world_size: int, canonical_replicas: int, strategy: str) -> list[int]:
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world size {world_size}")
    if strategy == "interleaved":
        return [lane for lane in range(canonical_replicas) if lane % world_size == rank]
    if strategy != "contiguous":
        raise ValueError(f"unknown mapping strategy {strategy!r}; use contiguous or interleaved")
    base, rem = divmod(canonical_replicas, world_size)
    start = rank * base + min(rank, rem)
    return list(range(start, start + base + (1 if rank < rem else 0)))


def lane_owner(world_size: int, canonical_replicas: int, strategy: str) -> dict[int, int]:
    return {
        lane: rank
        for rank in range(world_size)
        for lane in lanes_of(rank, world_size, canonical_replicas, strategy)
    }
