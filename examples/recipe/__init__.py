"""A tiny TorchTitan-style recipe: the loader config a training script builds Zephon options from.

``config.LoaderConfig`` is the reference adapter for ``zephon_chaos.contract``;
``broken_config`` holds a deliberately broken variant the suite must catch.
"""
