"""Oracles: verdicts with evidence, from records and checkpoints."""
