"""Write a failing test's evidence under ``--chaos-artifacts DIR``: one folder per test."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from zephon_chaos.launch.result import GroupResult


def artifact_dir(root: str | Path, nodeid: str) -> Path:
    safe = re.sub(r"[^\w.-]+", "_", nodeid).strip("_")[:150]
    return Path(root) / safe


def write_artifacts(root: str | Path, nodeid: str, report: Any, results: list[GroupResult]) -> Path:
    """Copy logs and write the report text; return the folder."""
    target = artifact_dir(root, nodeid)
    target.mkdir(parents=True, exist_ok=True)
    (target / "report.txt").write_text(
        "\n\n".join([str(report.longrepr), *(r.report() for r in results)])
    )
    for result in results:
        logs = result.workdir / "logs"
        if logs.is_dir():
            shutil.copytree(logs, target / result.name / "logs", dirs_exist_ok=True)
        for log in result.agent_logs:
            if log.exists():
                (target / result.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(log, target / result.name / log.name)
    return target
