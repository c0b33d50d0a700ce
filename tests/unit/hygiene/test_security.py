"""Security basics: servers the harness hosts bind loopback, its folders are private, no shell."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

import psutil
import pytest

import zephon_chaos
from zephon_chaos.hygiene.owner import UnsafeDirectory, private_root
from zephon_chaos.launch import LaunchSpec, TorchrunGroup

SRC = Path(zephon_chaos.__file__).parent
SHELL = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|subprocess\.getoutput\(")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.cpu
def test_a_hosted_store_listens_on_loopback_only() -> None:
    from zephon_chaos.launch.store_host import StoreHost

    with StoreHost() as host:
        listening = [
            c.laddr
            for c in psutil.Process().net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == host.port
        ]
    assert listening and {a.ip for a in listening} == {"127.0.0.1"}


def test_the_folders_a_test_and_its_groups_use_are_private(chaos_tmp_root: Path) -> None:
    entry = chaos_tmp_root / "entry.py"
    entry.write_text("")
    group = TorchrunGroup(LaunchSpec(entry=entry), chaos_tmp_root / "g")
    for folder in (chaos_tmp_root, group.workdir, group.tmpdir, group.registry.pid_dir):
        assert _mode(folder) == 0o700, folder
    assert _mode(Path(tempfile.gettempdir())) == 0o700  # this test's own TMPDIR
    assert _mode(private_root()) == 0o700


def test_a_private_root_that_is_a_link_or_someone_elses_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / f"zephon-chaos-{os.getuid()}").symlink_to(elsewhere)
    with pytest.raises(UnsafeDirectory, match="not a plain directory"):
        private_root(linked)
    if os.getuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    foreign = tmp_path / "foreign"
    (foreign / f"zephon-chaos-{os.getuid()}").mkdir(parents=True, mode=0o700)
    os.chown(foreign / f"zephon-chaos-{os.getuid()}", 4242, 4242)
    with pytest.raises(UnsafeDirectory, match="belongs to uid 4242"):
        private_root(foreign)


def test_no_command_line_goes_through_a_shell() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SHELL.search(line)
    ]
    assert offenders == []
