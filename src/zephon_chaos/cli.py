"""``zephon-chaos``: explore | run | replay | proxy | clean | bench | report.

Each subcommand lives in ``zephon_chaos.commands.<name>`` with ``add_arguments(parser)`` and
``run(args) -> int``. Every command module is imported to build the parser, so each keeps
torch, Zephon and the launchers out of its module level (they load inside ``run``), and
``--help`` stays fast. Bad flags
and bad files exit 2 with a message naming the problem: any :class:`InvalidInput` (a
``UsageError``, a ``ScenarioError``, a ``MergeError``, ...) that reaches ``main``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from zephon_chaos.commands import UsageError  # noqa: F401  (callers import it from here)
from zephon_chaos.errors import InvalidInput

COMMANDS: dict[str, str] = {
    "explore": "generate scenarios, run them on real groups, report minimal violations",
    "run": "run one scenario file and print its verdict",
    "replay": "rerun a saved (minimal) scenario and say whether it still fails",
    "proxy": "serve the embedded Toxiproxy-compatible API (for toxiproxy-cli and others)",
    "clean": "remove what a crashed run left behind (processes, temp entries) and say what",
    "bench": "measure: `bench aggregation` (TCPStore aggregation at scale)",
    "report": "`report merge`: one report from the reports of an exploration's shards",
}

LAUNCHING = ("explore", "run", "replay", "bench")
"""Commands that start groups: they own what they start (``hygiene.command``)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zephon-chaos",
        description="Elastic-resume chaos testing of Zephon loaders on real torchrun groups.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, text in COMMANDS.items():
        p = sub.add_parser(name, help=text, description=text)
        p.set_defaults(_module=f"zephon_chaos.commands.{name}")
        module = _load(name)
        if module is not None:
            module.add_arguments(p)
    return parser


def _load(name: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(f"zephon_chaos.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"zephon_chaos.commands.{name}":
            return None
        raise


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    module = _load(args.command)
    if module is None:
        print(f"zephon-chaos: '{args.command}' is not available in this build", file=sys.stderr)
        return 2
    try:
        if args.command not in LAUNCHING:
            return int(module.run(args) or 0)
        from zephon_chaos.hygiene.command import Terminated, owned_command, terminated

        with owned_command(args.command):
            code = int(module.run(args) or 0)
        return 128 + int(Terminated.signum) if terminated() else code
    except InvalidInput as exc:
        print(f"zephon-chaos {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        from zephon_chaos.hygiene.command import Terminated

        print(
            f"zephon-chaos {args.command}: interrupted; everything started was stopped",
            file=sys.stderr,
        )
        return 128 + int(Terminated.signum) if isinstance(exc, Terminated) else 130


if __name__ == "__main__":
    sys.exit(main())
