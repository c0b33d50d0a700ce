"""Which canonical lanes a rank owns: the same arithmetic as Zephon's ``Engine._build_world``.

Shared by the workload (how many batches make one global step on this rank) and the oracle
(which rank should have produced which lane).

Lanes belong to data-parallel groups, not ranks: Zephon maps the C lanes over ``dp_degree``
groups and every rank of group ``dp_group_id`` reads that group's lanes
(``zephon/_internal/engine.py``, ``_build_world`` and the DATA PARTITIONING note above
``_resolve_parallelism_params``). A layout of ``tp`` tensor-parallel ranks per group lays the
TP ranks innermost, as TorchTitan's device mesh does (``ParallelDims.build_mesh`` unflattens
the world into ``("pp", "batch", "cp", "tp")``), so with pp = cp = 1 rank r is in DP group
``r // tp``. ``tp`` = 1 is Zephon's 1D default: one rank per group.
"""

from __future__ import annotations


def dp_degree(world_size: int, tp: int = 1) -> int:
    """Data-parallel groups of a world of ``world_size`` ranks, ``tp`` to a group."""
    if tp < 1 or world_size % tp:
        raise ValueError(
            f"world size {world_size} is not a whole number of tensor-parallel groups of {tp}"
        )
    return world_size // tp


def dp_group(rank: int, tp: int = 1) -> int:
    """The DP group of ``rank`` (TP ranks contiguous, as TorchTitan's mesh lays them out)."""
    return rank // tp


def lanes_of(
    rank: int, world_size: int, canonical_replicas: int, strategy: str, tp: int = 1
) -> list[int]:
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world size {world_size}")
    groups, group = dp_degree(world_size, tp), dp_group(rank, tp)
    if strategy == "interleaved":
        return [lane for lane in range(canonical_replicas) if lane % groups == group]
    if strategy != "contiguous":
        raise ValueError(f"unknown mapping strategy {strategy!r}; use contiguous or interleaved")
    base, rem = divmod(canonical_replicas, groups)
    start = group * base + min(group, rem)
    return list(range(start, start + base + (1 if group < rem else 0)))


def lane_owner(world_size: int, canonical_replicas: int, strategy: str) -> dict[int, int]:
    return {
        lane: rank
        for rank in range(world_size)
        for lane in lanes_of(rank, world_size, canonical_replicas, strategy)
    }
