"""Persist a merged checkpoint the three ways users do (pickle, ``torch.save``, JSON), atomically.

Write to a temporary file in the same directory, fsync, then rename: a crash mid-write leaves
the previous checkpoint intact. JSON keeps Python types (int keys, tuples, bytes) through
tagged objects, since a naive ``json.dump`` turns lane ids into strings and breaks restore.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

from zephon_chaos.workload.atomic import replacing

FORMATS = ("pickle", "torch", "json")


class CheckpointFileError(RuntimeError):
    """A persisted checkpoint that cannot be read; the message names the file."""


def save(ckpt: dict[str, Any], path: Path, fmt: str) -> None:
    with replacing(path) as f:
        _dump(ckpt, f, fmt)


def load(path: Path | str, fmt: str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointFileError(
            f"checkpoint file {path} does not exist; persist one first or fix the path"
        )
    try:
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


def _dump(ckpt: dict[str, Any], f: Any, fmt: str) -> None:
    if fmt == "pickle":
        pickle.dump(ckpt, f, protocol=pickle.HIGHEST_PROTOCOL)
    elif fmt == "torch":
        import torch

        torch.save(ckpt, f)
    elif fmt == "json":
        f.write(json.dumps(encode(ckpt)).encode())
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
    """A digest equal for equal checkpoints, whichever process built them."""
    return hashlib.blake2b(
        json.dumps(encode(_ordered(obj)), sort_keys=True).encode(), digest_size=16
    ).hexdigest()


def _ordered(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _ordered(v) for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0]))}
    if isinstance(obj, list):
        return [_ordered(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_ordered(v) for v in obj)
    return obj
