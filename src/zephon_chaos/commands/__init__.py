"""Subcommands of ``zephon-chaos``: one module each, with ``add_arguments`` and ``run``."""

from zephon_chaos.errors import InvalidInput


class UsageError(InvalidInput):
    """Bad input from the command line; printed without a traceback, exit 2.

    Defined here, below the subcommands, so that they raise it without importing ``cli``,
    which sits above them and loads them by name.
    """
