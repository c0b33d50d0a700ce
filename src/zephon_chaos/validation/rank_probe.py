"""Probe rule witnesses inside a torchrun rank: ``python -m zephon_chaos.validation.rank_probe``.

The in-process property runs thousands of probes cheaply; this runs a sample of the same
table's witnesses where users meet them, in a worker torchrun started (its environment,
its MASTER_ADDR/MASTER_PORT), and writes each row's disagreements as JSON per rank.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from zephon_chaos.validation.judge import compare, predict
from zephon_chaos.validation.probe import Endpoints, probe
from zephon_chaos.validation.rules import ZEPHON_RULES


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m zephon_chaos.validation.rank_probe OUT_DIR RULE_ID...")
        return 2
    out, wanted = Path(argv[0]), set(argv[1:])
    rules = [r for r in ZEPHON_RULES if r.id in wanted]
    unknown = wanted - {r.id for r in rules}
    if unknown:
        print(f"unknown rule ids: {sorted(unknown)}", file=sys.stderr)
        return 2
    results: dict[str, list[str]] = {}
    with Endpoints() as endpoints:
        for rule in rules:
            results[rule.id] = compare(predict(rule.witness), probe(rule.witness, endpoints))
    rank = os.environ.get("RANK", "0")
    (out / f"rank{rank}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
