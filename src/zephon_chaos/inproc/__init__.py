"""The in-process tier: a scenario's ranks as threads of this interpreter.

Each rank thread builds its own Zephon pipeline (``world_size``/``global_rank`` options)
against a real c10d TCPStore this process hosts on a loopback socket it holds, and writes
the same record files as the torchrun workload, so the same :class:`ScenarioRunner` and
oracles judge both tiers. What only processes can do (signals, launch paths) is refused
here with the reason.
"""

from zephon_chaos.inproc.launcher import InprocLauncher
from zephon_chaos.inproc.refusal import InprocRefusal, TierRefusal, inproc_refusal, inproc_refused
from zephon_chaos.inproc.runner import inproc_runner

__all__ = [
    "InprocLauncher",
    "InprocRefusal",
    "TierRefusal",
    "inproc_refusal",
    "inproc_refused",
    "inproc_runner",
]
