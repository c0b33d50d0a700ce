"""``tox -e gpu`` on a CPU runner without torch: exit 0, every GPU test skipped with a reason.

The test runs the gpu environment's own pytest command, read from tox.ini, in a child whose
``import torch`` fails as it does where torch is not installed (a shadowing package that
raises ``ModuleNotFoundError``), so a torch-importing module slipping into the GPU tier's
collection turns this red.
"""

from __future__ import annotations

import configparser
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_TORCH = 'raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n'


def gpu_command() -> list[str]:
    """The ``[testenv:gpu]`` pytest command, with this interpreter and no posargs."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    lines = [ln for ln in tox["testenv:gpu"]["commands"].splitlines() if "pytest" in ln]
    assert len(lines) == 1, f"expected one pytest command in [testenv:gpu], got {lines}"
    argv = shlex.split(lines[0].replace("{posargs}", ""))
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


def test_the_gpu_tier_exits_0_saying_why_without_torch(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text(NO_TORCH)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shadow), env.get("PYTHONPATH", "")) if p)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    probe = subprocess.run(
        [sys.executable, "-c", "import torch"], env=env, capture_output=True, timeout=60
    )
    assert probe.returncode != 0, "the shadow package did not hide torch"
    done = subprocess.run(
        [*gpu_command(), "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "GPU tests skipped: torch is not importable here (ModuleNotFoundError" in out, out[
        -4000:
    ]
    assert " error" not in out.splitlines()[-1], out[-4000:]
