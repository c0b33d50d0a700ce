"""torchelastic's ``@record``, with the error file written whole or not at all.

When one rank fails, its agent SIGTERMs the others at once. A peer that is itself failing at
that moment (on the connection the dead rank closed, say) may be caught inside torch's
``ErrorHandler.record_exception``, between ``open(file, "w")`` and the end of ``json.dump``.
The agent then reads an empty or truncated error file, and in torch 2.13
``ProcessFailure.__post_init__`` re-raises the ``JSONDecodeError``: the agent itself crashes
and every rank's exit status is lost. Writing to a temporary name and renaming it over the
error file leaves the agent either no file or a whole one.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from torch.distributed.elastic.multiprocessing.errors import ErrorHandler
from torch.distributed.elastic.multiprocessing.errors import record as _torch_record

from zephon_chaos.workload.atomic import replacing
from zephon_chaos.workload.spawn_hook import spawn_hook_call

R = TypeVar("R")


class AtomicErrorHandler(ErrorHandler):
    """The same JSON as torch's handler, renamed into place once complete."""

    def record_exception(self, e: BaseException) -> None:
        # The rank's error left ``main``: noted now, before atexit tears down its MTP
        # children or process group, which its peers may fail of before its exit note.
        spawn_hook_call("_note_raised")
        path = self._get_error_file_path()
        if not path:
            return
        data = {
            "message": {
                "message": f"{type(e).__name__}: {e}",
                "extraInfo": {
                    "py_callstack": traceback.format_exc(),
                    "timestamp": str(int(time.time())),
                },
            }
        }
        with replacing(path) as f:
            f.write(json.dumps(data).encode())


def record(fn: Callable[..., R]) -> Callable[..., R | None]:
    """``torch.distributed.elastic.multiprocessing.errors.record`` with atomic error files."""
    wrapped: Callable[..., Any] = _torch_record(fn, error_handler=AtomicErrorHandler())
    return wrapped
