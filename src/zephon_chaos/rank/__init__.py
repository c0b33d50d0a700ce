"""The rank-side program torchrun runs (``python -m zephon_chaos.rank SPEC.json``): a Zephon
pipeline, per-step records, checkpoints.

It imports nothing from the pytest side of the package; the harness talks to it through a
JSON spec file in and record files out (their types: ``zephon_chaos.workload``).
"""
