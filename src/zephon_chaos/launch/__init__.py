"""Real torchrun groups: launch paths, ports, process trees, deadlines, exit statuses."""

from zephon_chaos.launch.group import TorchrunGroup
from zephon_chaos.launch.launch_spec import (
    DEFAULT_LAUNCH_LANE,
    LAUNCH_LANES,
    LAUNCH_PATHS,
    Formation,
    LaunchLane,
    LaunchPath,
    LaunchSpec,
)
from zephon_chaos.launch.result import GroupFailed, GroupResult, RankOutcome

__all__ = [
    "DEFAULT_LAUNCH_LANE",
    "LAUNCH_LANES",
    "LAUNCH_PATHS",
    "Formation",
    "GroupFailed",
    "GroupResult",
    "LaunchLane",
    "LaunchPath",
    "LaunchSpec",
    "RankOutcome",
    "TorchrunGroup",
]
