"""The embedded server's command-line options, for its own parser and ``zephon-chaos proxy``.

Standard library only: every ``zephon-chaos`` start builds every command's parser.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8474, help="API port (default 8474)")
    parser.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="allow the API and proxies to listen on non-loopback addresses",
    )
