"""``zephon-chaos proxy``: the embedded Toxiproxy-compatible server, in the foreground."""

from __future__ import annotations

import argparse

from zephon_chaos.faults.proxy.options import add_arguments as add_arguments


def run(args: argparse.Namespace) -> int:
    from zephon_chaos.faults.proxy.cli import main

    argv = ["--host", args.host, "--port", str(args.port)]
    if args.allow_non_loopback:
        argv.append("--allow-non-loopback")
    return main(argv)
