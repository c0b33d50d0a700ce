"""Persist a merged checkpoint the ways users do, and read it back.

``pickle``, ``torch`` (``torch.save``), ``json`` (types kept through tagged objects, since a
naive ``json.dump`` turns lane ids into strings), ``plain_json`` (that naive ``json.dumps``,
as recipes write it: whether Zephon restores what it gives back is the question it asks) and
``dcp``: ``torch.distributed.checkpoint`` holding ``{"dataloader": {"zephon": pickle(ckpt)}}``,
the downstream adapter's state under the trainer's key, saved and loaded by every rank
together over the process group (without one, DCP reads and writes in this process alone).

Files are written to a temporary file in the same directory, fsynced, then renamed: a crash
mid-write leaves the previous checkpoint intact. A ``dcp`` checkpoint is a directory whose
``.metadata`` DCP writes last, once every rank's data is down.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from zephon_chaos.errors import ChaosError
from zephon_chaos.workload.atomic import replacing
from zephon_chaos.workload.spec import FORMATS

DCP_KEY = "dataloader"
"""The trainer's key for the loader's state in its DCP state dict."""
LOADER_KEY = "zephon"
"""The adapter's key for the pickled merged checkpoint inside its state."""
DCP_METADATA = ".metadata"


class CheckpointFileError(ChaosError, RuntimeError):
    """A persisted checkpoint that cannot be read; the message names the file."""


class LoaderState:
    """The adapter's loader as DCP sees it (a ``Stateful``): ``{"zephon": pickle(ckpt)}``.

    Like the adapter's ``load_state_dict``, it refuses missing, empty or non-bytes state.
    """

    def __init__(self, payload: bytes = b"") -> None:
        self.payload = payload

    def state_dict(self) -> dict[str, Any]:
        return {LOADER_KEY: self.payload}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        value = state.get(LOADER_KEY) if isinstance(state, dict) else None
        if not isinstance(value, bytes) or not value:
            raise ValueError(
                f"loader state {DCP_KEY}.{LOADER_KEY} is {type(value).__name__}"
                f"{' (empty)' if value == b'' else ''}, not the pickled checkpoint bytes"
            )
        self.payload = value


def save(ckpt: dict[str, Any], path: Path, fmt: str) -> None:
    """Persist ``ckpt``; for ``dcp`` every rank of the process group calls this together."""
    if fmt == "dcp":
        _save_dcp(ckpt, path)
        return
    with replacing(path) as f:
        _dump(ckpt, f, fmt)


def load(path: Path | str, fmt: str) -> dict[str, Any]:
    """Read a persisted checkpoint; for ``dcp`` every rank of a process group calls it."""
    path = Path(path)
    present = path.is_dir() if fmt == "dcp" else path.is_file()
    if not present:
        kind = "directory" if fmt == "dcp" else "file"
        raise CheckpointFileError(
            f"checkpoint {kind} {path} does not exist; persist one first or fix the path"
        )
    try:
        if fmt == "dcp":
            data = _load_dcp(path)
        else:
            with open(path, "rb") as f:
                data = _load(f, fmt)
    except Exception as exc:
        raise CheckpointFileError(
            f"checkpoint file {path} cannot be read as {fmt} ({type(exc).__name__}: {exc}); "
            "it is truncated, corrupt or of another format: restore from an earlier checkpoint"
        ) from exc
    if not isinstance(data, dict):
        raise CheckpointFileError(
            f"checkpoint file {path} holds a {type(data).__name__}, not a checkpoint dict"
        )
    return data


@contextlib.contextmanager
def _alone_is_meant() -> Iterator[None]:
    """Without a process group DCP warns that it assumes one process: here that is meant
    (the harness reading a checkpoint back, a test's single process)."""
    import torch.distributed as dist

    with warnings.catch_warnings():
        if not (dist.is_available() and dist.is_initialized()):
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


class DcpError(ChaosError, RuntimeError):
    """A DCP save or load that failed on some rank; the message names each rank's error."""


@contextlib.contextmanager
def _dcp_errors(what: str, path: Path) -> Iterator[None]:
    """DCP raises ``CheckpointException``, a ``BaseException``: one that ``except Exception``
    (a rank's error record, this module's file errors) would let through. Make it an error."""
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        yield
    except CheckpointException as exc:
        causes = "; ".join(
            f"rank {rank}: {type(err).__name__}: {err}" for rank, (err, _) in exc.failures.items()
        )
        raise DcpError(f"DCP {what} of {path} failed ({causes})") from None


def _save_dcp(ckpt: dict[str, Any], path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    state = LoaderState(pickle.dumps(ckpt, protocol=pickle.HIGHEST_PROTOCOL))
    with _alone_is_meant(), _dcp_errors("save", path):
        dcp.save({DCP_KEY: state}, checkpoint_id=str(path))


def _load_dcp(path: Path) -> Any:
    import torch.distributed.checkpoint as dcp

    if not (path / DCP_METADATA).is_file():
        raise ValueError(f"no {DCP_METADATA}: the save did not finish on every rank")
    state = LoaderState()
    with _alone_is_meant(), _dcp_errors("load", path):
        dcp.load({DCP_KEY: state}, checkpoint_id=str(path))
    return pickle.loads(state.payload)


def _dump(ckpt: dict[str, Any], f: Any, fmt: str) -> None:
    if fmt == "pickle":
        pickle.dump(ckpt, f, protocol=pickle.HIGHEST_PROTOCOL)
    elif fmt == "torch":
        import torch

        torch.save(ckpt, f)
    elif fmt == "json":
        f.write(json.dumps(encode(ckpt)).encode())
    elif fmt == "plain_json":
        try:
            text = json.dumps(ckpt)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"the checkpoint is not plain JSON ({exc}); persist it as 'json', which keeps "
                "Python types, or as 'pickle'"
            ) from exc
        f.write(text.encode())
    else:
        raise ValueError(f"unknown persistence format {fmt!r}; use one of {', '.join(FORMATS)}")


def _load(f: Any, fmt: str) -> Any:
    if fmt == "pickle":
        return pickle.load(f)
    if fmt == "torch":
        import torch

        return torch.load(f, weights_only=False)
    if fmt == "json":
        return decode(json.loads(f.read().decode()))
    if fmt == "plain_json":
        return json.loads(f.read().decode())
    raise ValueError(f"unknown persistence format {fmt!r}; use one of {', '.join(FORMATS)}")


def encode(obj: Any) -> Any:
    """Python value → JSON value that ``decode`` turns back into the same Python value."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, float)):
        return obj
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and "__t" not in obj:
            return {k: encode(v) for k, v in obj.items()}
        return {"__t": "dict", "items": [[encode(k), encode(v)] for k, v in obj.items()]}
    if isinstance(obj, list):
        return [encode(v) for v in obj]
    if isinstance(obj, tuple):
        return {"__t": "tuple", "items": [encode(v) for v in obj]}
    if isinstance(obj, (bytes, bytearray)):
        return {"__t": "bytes", "b64": base64.b64encode(bytes(obj)).decode()}
    if type(obj).__module__ == "numpy":
        import numpy as np

        if isinstance(obj, np.ndarray):
            return {"__t": "ndarray", "dtype": str(obj.dtype), "items": encode(obj.tolist())}
        return encode(obj.item())
    raise TypeError(f"cannot encode {type(obj).__name__} in a JSON checkpoint")


def decode(obj: Any) -> Any:
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    tag = obj.get("__t")
    if tag is None:
        return {k: decode(v) for k, v in obj.items()}
    if tag == "dict":
        return {_hashable(decode(k)): decode(v) for k, v in obj["items"]}
    if tag == "tuple":
        return tuple(decode(v) for v in obj["items"])
    if tag == "bytes":
        return base64.b64decode(obj["b64"])
    if tag == "ndarray":
        import numpy as np

        return np.asarray(decode(obj["items"]), dtype=obj["dtype"])
    raise ValueError(f"unknown tag {tag!r} in a JSON checkpoint")


def _hashable(key: Any) -> Any:
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key


def digest(obj: Any) -> str:
    """A digest equal for equal checkpoints, whichever process built them and whichever
    format carried them: it sees a checkpoint as plain JSON does (int keys as strings, tuples
    as lists), so a ``plain_json`` file read back has the digest its ranks recorded."""
    return hashlib.blake2b(
        json.dumps(_plain(obj), sort_keys=True).encode(), digest_size=16
    ).hexdigest()


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {_key_text(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return encode(obj)


def _key_text(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it (``1`` -> ``"1"``, ``True`` -> ``"true"``)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    return json.dumps(encode(key), sort_keys=True)
