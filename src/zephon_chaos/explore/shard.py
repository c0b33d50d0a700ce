"""One shard of an exploration split across runners: ``--shard i/n``, and its rounds' seeds.

The search's round ``r`` (1, 2, ...) of tier ``t`` draws with the Hypothesis seed
``seed * 1_000_003 + g * 7 + t`` (``t`` 0 in process, 1 on torchrun), where ``g`` is the
round's place in the whole run's sequence of rounds. Unsharded, ``g = r``. Shard ``i`` of
``n`` takes every ``n``-th place from its own: ``g = (r - 1) * n + i``. So shard 1/1 is the
unsharded search, and the shards of one run (same ``--seed``) never share a round's seed:
``g`` differs for every (shard, round), and ``7g + t`` with ``t`` in {0, 1} is one-to-one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(
                f"{self.index}/{self.count} is no shard: write i/n with 1 <= i <= n "
                "(e.g. 2/4, the second of four)"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` -> ``Shard(2, 4)``; ValueError naming what is wrong."""
        match = _SHARD.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not i/n: write the shard as e.g. 2/4")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def sharded(self) -> bool:
        return self.count > 1

    def place(self, round_no: int) -> int:
        """The run-wide place ``g`` of this shard's round ``round_no`` (1-based)."""
        return (round_no - 1) * self.count + self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def round_seed(seed: int, shard: Shard, round_no: int, tier: str) -> int:
    """The Hypothesis seed of a round: the module docstring says why shards never collide."""
    return seed * 1_000_003 + shard.place(round_no) * 7 + (0 if tier == "inproc" else 1)


BOTH_TIERS: tuple[str, str] = ("inproc", "torchrun")
"""The order ``--tier both`` searches its tiers in, unsharded and on odd shards."""


def tier_order(shard: Shard) -> tuple[str, str]:
    """The tiers of ``--tier both`` in the order shard ``shard`` searches them: unsharded,
    both, the in-process one first; sharded, odd shards search in process alone and even
    shards on torchrun alone (the first of the pair), each over its whole budget. So what
    only real processes show is searched from the first minute in one unbroken stretch: the
    torchrun tier's Hypothesis rounds and aims build on each other, where two stretches on
    two shards (each shard giving each tier its share) began that search twice, and found a
    torchrun-only defect late in the second. A tier's rounds draw by their own numbers
    (:func:`round_seed`), whatever the order."""
    return BOTH_TIERS[::-1] if shard.index % 2 == 0 else BOTH_TIERS
