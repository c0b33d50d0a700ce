"""Reading torchelastic's failure summary and exit codes into words."""

from __future__ import annotations

import pytest

from zephon_chaos.launch.elastic_errors import (
    agent_crash_note,
    last_exception_line,
    parse_summary,
)
from zephon_chaos.launch.exitcodes import describe
from zephon_chaos.launch.result import RankOutcome

SUMMARY = """
t.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-29_16:32:57
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 2501)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 2501
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_16:32:57
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 2500)
  error_file: /tmp/x/error.json
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
"""


def test_summary_lists_failures_and_the_root_cause() -> None:
    failures = {f.rank: f for f in parse_summary(SUMMARY)}
    assert failures[1].exitcode == -15 and not failures[1].root_cause
    assert failures[1].error_file is None
    assert failures[0].root_cause and str(failures[0].error_file) == "/tmp/x/error.json"
    assert parse_summary("no summary here") == []


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (0, "exited 0 (success)"),
        (3, "exited 3"),
        (-9, "killed by SIGKILL"),
        (-6, "killed by SIGABRT"),
        (137, "exited 137 (the shell's code for SIGKILL)"),
        (None, "still running"),
    ],
)
def test_exit_codes_in_words(code: int | None, words: str) -> None:
    assert describe(code) == words


def test_last_exception_line_of_a_rank_log() -> None:
    log = "[rank1]: Traceback (most recent call last):\n[rank1]:   File x\n"
    log += "[rank1]: ValueError: bad C\n"
    assert last_exception_line(log) == "ValueError: bad C"
    assert last_exception_line("all fine") is None


AGENT_CRASH = """
[E1129 22:16:51.004 agent] Failed to parse reply file: /tmp/t/attempt_0/0/error.json
Traceback (most recent call last):
  File "torch/distributed/elastic/multiprocessing/errors/__init__.py", line 123, in __post_init__
    self.error_file_data = json.load(fp)
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""


@pytest.mark.parametrize(
    ("log", "named"),
    [
        (AGENT_CRASH, "/tmp/t/attempt_0/0/error.json"),
        (SUMMARY, None),
        (AGENT_CRASH.replace("json.decoder.JSONDecodeError", "OSError"), None),
    ],
    ids=["torn error file", "ordinary failure", "other parse error"],
)
def test_an_agent_crash_on_a_torn_error_file_is_named(log: str, named: str | None) -> None:
    note = agent_crash_note(log)
    if named is None:
        assert note is None
    else:
        assert note is not None and named in note and "exit statuses are lost" in note


def test_a_rank_its_silent_agent_never_reported_is_no_success() -> None:
    outcome = RankOutcome(
        rank=0, local_rank=0, node=0, pid=12, exitcode=None,
        unknown_because="its agent ended (exited 1) without reporting it",
    )
    assert outcome.status == "exit status unknown (its agent ended (exited 1) without reporting it)"
