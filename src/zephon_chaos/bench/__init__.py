"""Measurements: ``zephon-chaos bench aggregation`` (checkpoint aggregation at scale)."""
