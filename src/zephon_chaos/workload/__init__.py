"""What a rank's program (``zephon_chaos.rank``) is asked and tells: its JSON spec, its
records, data sources, checkpoint persistence, planted defects, self-inflicted faults. The
harness reads and writes the same types, so they sit below both.
"""
