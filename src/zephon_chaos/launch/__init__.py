"""Real torchrun groups: launch paths, ports, process trees, deadlines, exit statuses."""

from zephon_chaos.launch.group import TorchrunGroup
from zephon_chaos.launch.result import GroupFailed, GroupResult, RankOutcome
from zephon_chaos.launch.spec import LAUNCH_PATHS, LaunchPath, LaunchSpec

__all__ = [
    "LAUNCH_PATHS",
    "GroupFailed",
    "GroupResult",
    "LaunchPath",
    "LaunchSpec",
    "RankOutcome",
    "TorchrunGroup",
]
