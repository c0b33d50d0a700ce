"""Subcommands of ``zephon-chaos``: one module each, with ``add_arguments`` and ``run``."""
