"""The example database an exploration shares with others: ``explore --database SPEC``.

Hypothesis saves each failing scenario's choices to its database and replays what it holds
first (its ``reuse`` phase), so a failure one runner found is the first scenario every other
runner sharing the database runs. SPEC is one of:

- ``none``: no database (each run is an island);
- ``redis://[user:password@]host:port/db``, ``rediss://...`` or ``unix:///path/redis.sock``:
  a Redis server (``hypothesis.extra.redis.RedisExampleDatabase``; needs the ``redis``
  package: ``pip install 'zephon-chaos[shard]'``), shared live between concurrent runs;
- ``github-artifact:OWNER/REPO[/ARTIFACT]``: the latest ``hypothesis-example-db`` (or
  ARTIFACT) artifact of a GitHub repository, read only (``GITHUB_TOKEN`` from the
  environment), with what this run finds written to ``<report>/example-db``;
- any other text: a directory (``DirectoryBasedExampleDatabase``).

The key is the explorer's, not Hypothesis's default (a digest of the round's nested property
source): it names the strategy's options, so runs on different commits share what their
scenarios mean, and tiers or plants never replay each other's choices (:func:`database_key`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    GitHubArtifactDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

from zephon_chaos.directories import make_directory
from zephon_chaos.errors import InvalidInput

NONE = "none"
REDIS_SCHEMES = ("redis", "rediss", "unix")
GITHUB_ARTIFACT = "github-artifact:"
LOCAL_COPY = "example-db"
"""Under the report folder: what a run with a read-only shared database writes."""
KEY_SCHEMA = b"zephon-chaos.explore/1"
"""Bumped when the meaning of a saved choice sequence changes for every strategy."""
_REPO = re.compile(r"^([\w.-]+)/([\w.-]+)(?:/([\w.-]+))?$")


class DatabaseError(InvalidInput, ValueError):
    """A database spec that cannot be opened; the message says why and what to do."""


@dataclass(frozen=True)
class SearchKey:
    """What fixes the meaning of a round's choices: the strategy's options."""

    tier: str
    max_world: int
    max_phases: int
    plant: str | None
    store_faults: bool
    profile: str


def database_key(key: SearchKey) -> bytes:
    """The key the rounds of this search save under: the same in every round, shard and
    process with the same strategy options."""
    text = repr((key.tier, key.max_world, key.max_phases, key.plant, key.store_faults, key.profile))
    return KEY_SCHEMA + b":" + hashlib.sha256(text.encode()).hexdigest()[:24].encode()


def shown(spec: str) -> str:
    """``spec`` as a report may show it: a URL's password is never written out."""
    parts = urlsplit(spec)
    if parts.scheme in REDIS_SCHEMES and parts.password is not None:
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return spec


def open_database(spec: str | None, report_dir: Path) -> ExampleDatabase | None:
    """The database ``spec`` names (module docstring); :class:`DatabaseError` if it cannot be
    opened. A Redis server is pinged here, so an unreachable one fails before the search."""
    if spec is None or spec.strip().lower() == NONE:
        return None
    if urlsplit(spec).scheme in REDIS_SCHEMES:
        return _redis(spec)
    if spec.startswith(GITHUB_ARTIFACT):
        return _github(spec[len(GITHUB_ARTIFACT) :], report_dir / LOCAL_COPY)
    path = Path(spec)
    if why := make_directory(path):
        raise DatabaseError(f"{spec}: {why} (give a directory path)")
    return DirectoryBasedExampleDatabase(path)


def close_database(db: ExampleDatabase | None) -> None:
    """Release a Redis connection pool (other databases hold nothing open)."""
    inner = db.inner if isinstance(db, KeepKnown) else db
    client = getattr(inner, "redis", None)
    if client is not None:
        client.close()


def _redis(spec: str) -> ExampleDatabase:
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise DatabaseError(
            f"{shown(spec)}: a Redis database needs the redis package: "
            "pip install 'zephon-chaos[shard]'"
        ) from None
    try:
        client = redis.Redis.from_url(spec, socket_timeout=10, socket_connect_timeout=10)
        client.ping()
    except (ValueError, redis.RedisError) as exc:
        raise DatabaseError(f"{shown(spec)}: cannot reach the Redis server ({exc})") from None
    return RedisExampleDatabase(client)


def _github(rest: str, local: Path) -> ExampleDatabase:
    match = _REPO.match(rest)
    if match is None:
        raise DatabaseError(
            f"{GITHUB_ARTIFACT}{rest}: write {GITHUB_ARTIFACT}OWNER/REPO or "
            f"{GITHUB_ARTIFACT}OWNER/REPO/ARTIFACT"
        )
    owner, repo, artifact = match.groups()
    shared = GitHubArtifactDatabase(owner, repo, artifact_name=artifact or "hypothesis-example-db")
    local.mkdir(parents=True, exist_ok=True)
    return MultiplexedDatabase(DirectoryBasedExampleDatabase(local), ReadOnlyDatabase(shared))


class KeepKnown(ExampleDatabase):
    """The round's view of the shared database: a replay that did not fail here because the
    explorer already holds its failure (its signature was shrunk in an earlier round), or
    because it was not run (the budget's end), is not deleted.

    Hypothesis deletes a replayed example that passes, taking the failure for fixed; but a
    round passes an already-shrunk signature on purpose (to look for new ones), so without
    this the first runner would erase what it shares before any other runner replayed it.
    The property sets :attr:`keep` for such a call; deletes are skipped while it is set.

    Hypothesis also saves the example of any call that raises something other than a
    failure: the explorer ends a round's shrinking so, on a candidate it never ran. Saved,
    it would sort before the failure it was shrunk from and be another runner's first
    scenario; the property clears :attr:`save_ok` for that call.
    """

    def __init__(self, inner: ExampleDatabase) -> None:
        super().__init__()
        self.inner = inner
        self.keep = False
        self.save_ok = True

    def __repr__(self) -> str:
        return f"KeepKnown({self.inner!r})"

    def fetch(self, key: bytes) -> Iterable[bytes]:
        yield from self.inner.fetch(key)

    def save(self, key: bytes, value: bytes) -> None:
        if self.save_ok:
            self.inner.save(key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        if not self.keep:
            self.inner.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(src, dest, value)


SUB_KEYS = (b"secondary", b"pareto")
"""What Hypothesis's engine appends to a property's key (``ConjectureRunner.sub_key``)."""


class PinnedKey(ExampleDatabase):
    """A round's database under the explorer's key (:func:`database_key`): every key Hypothesis
    derives from its digest of the round's property, the digest and its sub-keys, maps onto
    ``key`` and its sub-keys. A wrapper, as Hypothesis's own ``ReadOnlyDatabase`` is, so that
    the property carries no private attribute of Hypothesis's."""

    def __init__(self, inner: ExampleDatabase, key: bytes) -> None:
        super().__init__()
        self.inner = inner
        self.key = key

    def __repr__(self) -> str:
        return f"PinnedKey({self.inner!r}, {self.key!r})"

    def _pinned(self, key: bytes) -> bytes:
        for sub in SUB_KEYS:
            if key.endswith(b"." + sub):
                return self.key + b"." + sub
        return self.key

    def fetch(self, key: bytes) -> Iterable[bytes]:
        yield from self.inner.fetch(self._pinned(key))

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self._pinned(key), value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self._pinned(key), value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self._pinned(src), self._pinned(dest), value)
