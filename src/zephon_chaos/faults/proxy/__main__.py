"""``python -m zephon_chaos.faults.proxy``: the same as ``zephon-chaos proxy``."""

from zephon_chaos.faults.proxy.cli import main

raise SystemExit(main())
