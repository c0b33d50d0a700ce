"""``zephon-chaos proxy`` offers the server's own options, and building every command's parser
does not load the proxy (its client imports ``requests``)."""

from __future__ import annotations

import argparse
import subprocess
import sys

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


def test_building_the_commands_parser_loads_neither_the_proxy_nor_requests() -> None:
    code = (
        "import sys; from zephon_chaos.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('requests', 'zephon_chaos.faults.proxy.client', "
        "'zephon_chaos.faults.proxy.cli') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
