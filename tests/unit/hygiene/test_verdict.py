"""Hygiene as a verdict, seen from a real pytest session (the plugin loads by its entry point).

One inner session holds one test per kind of leak; each must fail at teardown naming what it
left, and what it left must be gone afterwards. An opted-out test keeps its leak.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

pytest_plugins = ["pytester"]

INNER = r'''
import json, os, socket, subprocess, sys, tempfile, time
from pathlib import Path

import pytest

from zephon_chaos.hygiene.owner import OWNER_VAR
from zephon_chaos.procs import SPAWNHOOK_DIR, ProcessRegistry

OUT = Path(os.environ["HYGIENE_OUT"])
ORPHAN = (
    "import os, sys, time\n"
    "if os.fork():\n    os._exit(0)\n"
    "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "time.sleep(600)\n"
)
_KEEP = []


def note(name, value):
    (OUT / name).write_text(json.dumps(value))


def spawn_orphan(env, name):
    """A grandchild whose parent exits at once: re-parented to init, no longer our child."""
    pidfile = OUT / f"{name}.pid"
    subprocess.run([sys.executable, "-c", ORPHAN, str(pidfile)], env=env, check=True, timeout=60)
    end = time.monotonic() + 60
    while not pidfile.exists():  # the orphan announces itself by writing this file
        assert time.monotonic() < end, "the orphan never started"
        time.sleep(0.02)
    pid = int(pidfile.read_text())
    assert psutil_ppid(pid) != os.getpid()
    return pid


def psutil_ppid(pid):
    import psutil
    return psutil.Process(pid).ppid()


def test_leaks_a_recorded_process(chaos_registry, tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    registry = ProcessRegistry("zc-hygiene-recorded", pid_dir)
    chaos_registry.registries.append(registry)
    # No owner token: only the spawn record (written by the spawn hook) knows this process.
    env = {k: v for k, v in os.environ.items() if k != OWNER_VAR}
    env.update(PYTHONPATH=SPAWNHOOK_DIR, ZEPHON_CHAOS_PID_DIR=str(pid_dir))
    note("recorded", spawn_orphan(env, "recorded"))


def test_leaks_an_orphan():
    note("orphan", spawn_orphan(dict(os.environ), "orphan"))


def test_leaks_a_listening_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    _KEEP.append(sock)
    note("port", sock.getsockname()[1])


@pytest.mark.parametrize("prefix", ["zephon-leak-", "torchelastic_"])
def test_leaks_a_temp_entry(prefix):
    note(f"entry-{prefix}", tempfile.mkdtemp(prefix=prefix))


def test_leaks_a_shm_segment():
    path = Path("/dev/shm") / f"zephon-leak-{os.getpid()}"
    path.write_bytes(b"x")
    note("shm", str(path))


@pytest.mark.no_chaos_hygiene
def test_opted_out_keeps_its_leak():
    note("kept", tempfile.mkdtemp(prefix="zephon-kept-"))


def test_clean():
    assert True


def test_a_session_fixture_started_mid_test_is_no_leak(request):
    server = request.getfixturevalue("session_server")
    assert server["proc"].poll() is None
    note("session-dir", server["dir"])


def test_the_session_fixture_survived_the_previous_test(session_server):
    assert session_server["proc"].poll() is None
    assert os.path.isdir(session_server["dir"])
'''

CONFTEST = r"""
import shutil, subprocess, sys, tempfile
import pytest


@pytest.fixture(scope="session")
def session_server():
    folder = tempfile.mkdtemp(prefix="zephon-session-")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield {"proc": proc, "dir": folder}
    proc.kill()
    proc.wait()
    shutil.rmtree(folder)
"""

LEAKS = {
    # inner test: what its failure names (a function of what it noted)
    "test_leaks_a_recorded_process": lambda v: f"process {v} (",
    "test_leaks_an_orphan": lambda v: f"process {v} (orphan, ",
    "test_leaks_a_listening_port": lambda v: f"listening port {v} (held by this pytest process",
    "test_leaks_a_temp_entry[zephon-leak-]": lambda v: f"temp entry {v}",
    "test_leaks_a_temp_entry[torchelastic_]": lambda v: f"temp entry {v}",
    "test_leaks_a_shm_segment": lambda v: f"temp entry {v}",
}
NOTES = {
    "test_leaks_a_recorded_process": "recorded",
    "test_leaks_an_orphan": "orphan",
    "test_leaks_a_listening_port": "port",
    "test_leaks_a_temp_entry[zephon-leak-]": "entry-zephon-leak-",
    "test_leaks_a_temp_entry[torchelastic_]": "entry-torchelastic_",
    "test_leaks_a_shm_segment": "shm",
}


@pytest.fixture
def inner_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    out = pytester.path / "out"
    out.mkdir()
    temp = pytester.path / "temp"  # the inner session's temp folder
    temp.mkdir()
    monkeypatch.setenv("HYGIENE_OUT", str(out))
    monkeypatch.setenv("TMPDIR", str(temp))
    pytester.makepyfile(test_inner=INNER)
    pytester.makeconftest(CONFTEST)
    # Most inner tests use none of the plugin's fixtures: the verdict judges them when asked.
    pytester.makeini("[pytest]\nchaos_hygiene = all\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=240)
    notes = {p.name: json.loads(p.read_text()) for p in out.iterdir() if p.suffix != ".pid"}
    return result, notes, temp


def test_each_kind_of_leak_fails_its_test_and_is_removed(inner_session) -> None:
    result, notes, _temp = inner_session
    result.assert_outcomes(passed=len(LEAKS) + 4, errors=len(LEAKS))
    text = result.stdout.str()
    for test, names in LEAKS.items():
        value = notes[NOTES[test]]
        assert f"ERROR at teardown of {test} " in text, test
        section = text.split(f"ERROR at teardown of {test} ", 1)[1].split("\n____", 1)[0]
        assert names(value) in section, (test, section)
    for name in ("recorded", "orphan"):
        assert not psutil.pid_exists(notes[name]) or _zombie(notes[name]), name
    for name in ("entry-zephon-leak-", "entry-torchelastic_", "shm"):
        assert not os.path.exists(notes[name]), name


def test_a_session_fixture_first_used_mid_test_belongs_to_the_session(inner_session) -> None:
    result, notes, temp = inner_session
    text = result.stdout.str()
    assert "PASSED test_inner.py::test_a_session_fixture_started_mid_test_is_no_leak" in text
    assert "PASSED test_inner.py::test_the_session_fixture_survived_the_previous_test" in text
    # Made in the session's temp folder, not in the private TMPDIR of the test that asked.
    assert Path(notes["session-dir"]).parent == temp


def test_the_opt_out_marker_keeps_the_verdict_away(inner_session) -> None:
    result, notes, _temp = inner_session
    assert "PASSED test_inner.py::test_opted_out_keeps_its_leak" in result.stdout.str()
    assert "ERROR at teardown of test_opted_out_keeps_its_leak" not in result.stdout.str()
    assert Path(notes["kept"]).is_dir()


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True
