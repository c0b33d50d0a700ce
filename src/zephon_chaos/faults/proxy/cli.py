"""``zephon-chaos proxy``: run the embedded Toxiproxy-compatible server in the foreground.

Any Toxiproxy client (``toxiproxy-cli``, ``toxiproxy-python``, our ``ToxiproxyClient``) can
drive it. It listens on loopback only unless ``--allow-non-loopback`` is given, and that flag
also decides whether proxies may listen on non-loopback addresses.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from zephon_chaos.faults.proxy.addresses import is_loopback
from zephon_chaos.faults.proxy.api import TOXIPROXY_VERSION, serve
from zephon_chaos.faults.proxy.api_errors import ApiError
from zephon_chaos.faults.proxy.options import add_arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zephon-chaos proxy",
        description="Serve the Toxiproxy HTTP API (embedded server) until SIGINT or SIGTERM.",
    )
    add_arguments(parser)
    return parser


async def _run(host: str, port: int, allow_non_loopback: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    def ready(bound_host: str, bound_port: int) -> None:
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        print(
            f"Toxiproxy API (embedded, v{TOXIPROXY_VERSION} compatible) on "
            f"http://{shown}:{bound_port} - SIGINT or SIGTERM to stop",
            flush=True,
        )

    try:
        await serve(host, port, allow_non_loopback=allow_non_loopback, on_ready=ready, stop=stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.allow_non_loopback and args.host != "localhost" and not is_loopback(args.host):
        print(
            f"zephon-chaos proxy: refusing to listen on {args.host}: not a loopback address; "
            f"use 127.0.0.1, or pass --allow-non-loopback",
            file=sys.stderr,
        )
        return 2
    try:
        asyncio.run(_run(args.host, args.port, args.allow_non_loopback))
    except ApiError as exc:
        print(f"zephon-chaos proxy: cannot serve the API: {exc.message}", file=sys.stderr)
        return 1
    print("zephon-chaos proxy: stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
