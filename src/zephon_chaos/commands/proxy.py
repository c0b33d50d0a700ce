"""``zephon-chaos proxy``: the embedded Toxiproxy-compatible server, in the foreground."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from zephon_chaos.faults.proxy.cli import add_arguments as server_arguments

    server_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from zephon_chaos.faults.proxy.cli import main

    argv = ["--host", args.host, "--port", str(args.port)]
    if args.allow_non_loopback:
        argv.append("--allow-non-loopback")
    return main(argv)
