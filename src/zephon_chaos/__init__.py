"""zephon-chaos: checks that Zephon loaders resume correctly on real torchrun groups under faults.

Importing this package imports neither torch nor zephon: the pytest plugin loads in every
downstream test session, and those imports cost seconds.
"""

__version__ = "0.1.0"
