"""``zephon-chaos proxy`` writes out the server's options (importing the proxy package would
slow every command's start-up): they must stay the server's own."""

from __future__ import annotations

import argparse

from zephon_chaos.commands import proxy
from zephon_chaos.faults.proxy.cli import build_parser


def _options(parser: argparse.ArgumentParser) -> dict[str, tuple[object, object, str | None]]:
    return {
        a.dest: (a.default, a.type, a.help)
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction)
    }


def test_the_subcommand_offers_exactly_the_servers_options() -> None:
    mine = argparse.ArgumentParser()
    proxy.add_arguments(mine)
    assert _options(mine) == _options(build_parser())
