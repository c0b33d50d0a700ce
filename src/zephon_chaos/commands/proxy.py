"""``zephon-chaos proxy``: the embedded Toxiproxy-compatible server, in the foreground."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The same options as ``faults.proxy.cli.build_parser``: written out here, because
    # importing that module (the proxy package, 180 ms) would slow every command's start-up.
    parser.add_argument("--host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8474, help="API port (default 8474)")
    parser.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="allow the API and proxies to listen on non-loopback addresses",
    )


def run(args: argparse.Namespace) -> int:
    from zephon_chaos.faults.proxy.cli import main

    argv = ["--host", args.host, "--port", str(args.port)]
    if args.allow_non_loopback:
        argv.append("--allow-non-loopback")
    return main(argv)
