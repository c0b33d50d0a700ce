"""Hang diagnosis: the Python stacks of every process of a group, and where each one is stuck."""

from zephon_chaos.diagnostics.frames import Frame, ThreadStack, parse_stacks, stuck_frame

__all__ = ["Frame", "ThreadStack", "parse_stacks", "stuck_frame"]
