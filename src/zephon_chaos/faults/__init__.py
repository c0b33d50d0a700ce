"""Fault injection: the Toxiproxy-compatible proxy layer, process faults and their schedules."""
