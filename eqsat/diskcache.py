"""A content-addressed cache on disk, so a second process redoes no rule parsing or compiling.

Entries depend only on their key (a rule's text, a file's bytes) and on this package's code and
egglog's version: both are folded into the cache file's name, so a code change or an egglog
upgrade starts a fresh cache. Files live in ``$EQSAT_LAB_CACHE`` (default
``~/.cache/eqsat-lab``); ``EQSAT_LAB_CACHE=off`` disables the cache. Files are written whole with
unique temporary names (two processes may write; the last complete file wins).

A cache file holds data, not objects: JSON whose only classes are the frozen dataclasses the
memo's owner names (rules, patterns, compiled directions), rebuilt field by field. Anyone who can
write to the cache folder can therefore not run code as the user (a pickle could); a file that is
damaged, foreign (not owned by the user) or names another class is ignored with a warning and
rewritten.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from eqsat.files import replace_atomic

PACKAGE_DIR = Path(__file__).parent
FORMAT = "eqsat-lab-cache/1"


def cache_dir() -> Path | None:
    """Where cache files go (None: caching is off)."""
    where = os.environ.get("EQSAT_LAB_CACHE", "")
    if where.lower() in ("off", "0", "none"):
        return None
    return Path(where) if where else Path.home() / ".cache" / "eqsat-lab"


DATABASES = {"EQSAT_LAB_MEASUREMENTS": "measurements.jsonl", "EQSAT_LAB_HYPOGPU_KERNELS": "hypogpu-kernels.jsonl"}


def database_path(env: str) -> Path | None:
    """A JSON-lines database every run reads and appends to: ``$env``, else its file in the cache
    folder (None: the cache is off). One table, so the CLI refuses an output onto any of them."""
    where = os.environ.get(env)
    if where:
        return Path(where)
    folder = cache_dir()
    return folder / DATABASES[env] if folder is not None else None


@cache
def code_fingerprint() -> str:
    """A hash of every source file of the package and of egglog's version."""
    h = hashlib.sha256()
    for f in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(f.relative_to(PACKAGE_DIR)).encode())
        h.update(f.read_bytes())
    try:
        h.update(metadata.version("egglog").encode())
    except metadata.PackageNotFoundError:  # pragma: no cover - egglog is a dependency
        pass
    return h.hexdigest()[:16]


class CacheFormatError(ValueError):
    """A cache file that is not one this code wrote."""


def encode(value: Any, types: dict[str, type]) -> Any:
    """``value`` as JSON data: tuples, frozensets and the dataclasses in ``types`` become tagged
    objects ({"(": [...]}, {"{": [...]}, {"@": name, "=": [fields]})."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"(": [encode(v, types) for v in value]}
    if isinstance(value, frozenset):
        return {"{": [encode(v, types) for v in value]}
    if isinstance(value, list):
        return [encode(v, types) for v in value]
    name = type(value).__name__
    if dataclasses.is_dataclass(value) and types.get(name) is type(value):
        return {"@": name, "=": [encode(getattr(value, f.name), types) for f in dataclasses.fields(value)]}
    raise TypeError(f"the disk cache cannot store a {name}")


def decoder(types: dict[str, type]) -> Callable[[dict[str, Any]], Any]:
    """The ``object_hook`` inverse of :func:`encode`: it builds only the classes in ``types``."""
    def hook(obj: dict[str, Any]) -> Any:
        if "(" in obj and len(obj) == 1:
            return tuple(obj["("])
        if "{" in obj and len(obj) == 1:
            return frozenset(obj["{"])
        if "@" in obj:
            cls = types.get(obj["@"])
            if cls is None or not isinstance(obj.get("="), list):
                raise CacheFormatError(f"names a class it may not build: {obj['@']!r}")
            return cls(*obj["="])
        return obj
    return hook


class DiskMemo:
    """A dict kept in JSON files per ``namespace`` and code fingerprint; read on first use,
    written by :meth:`save` when something was added. Values may hold the dataclasses in ``types``.

    ``shard`` names the file a key lives in ("" for the namespace's main file), so a process reads
    only the files of the keys it asks for: decoding is the cost of a fresh process (the e-graph's
    compiled rules grew to 2,299 entries, 1.9 MB, 0.1-0.4 s on every run, three quarters of them
    rules grounded on some other model's attributes)."""

    def __init__(self, namespace: str, types: Sequence[type] = (), shard: Callable[[Any], str] | None = None):
        self.namespace = namespace
        self.types = {t.__name__: t for t in types}
        self.shard = shard or (lambda key: "")
        self._shards: dict[str, dict[Any, Any]] = {}
        self._dirty: set[str] = set()
        self.hits = self.misses = 0

    @property
    def path(self) -> Path | None:
        """The main file (keys whose shard is "")."""
        return self.shard_path("")

    def shard_path(self, shard: str) -> Path | None:
        where = cache_dir()
        tail = f"-{shard}" if shard else ""
        return None if where is None else where / f"{self.namespace}-{code_fingerprint()}{tail}.json"

    def _read(self, path: Path) -> dict[Any, Any]:
        if hasattr(os, "getuid") and path.stat().st_uid != os.getuid():
            raise CacheFormatError("is owned by another user")
        raw = json.loads(path.read_bytes(), object_hook=decoder(self.types))
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("entries"), list):
            raise CacheFormatError("is not an eqsat-lab cache file")
        return {k: v for k, v in raw["entries"]}

    def _load(self, shard: str = "") -> dict[Any, Any]:
        data = self._shards.get(shard)
        if data is None:
            data = self._shards[shard] = {}
            path = self.shard_path(shard)
            if path is not None and path.exists():
                try:
                    data.update(self._read(path))
                except (OSError, ValueError, TypeError, RecursionError) as exc:
                    why = str(exc) if isinstance(exc, CacheFormatError) else f"cannot be read ({type(exc).__name__})"
                    warnings.warn(f"{path}: ignoring this cache file, it {why}; it will be rebuilt", stacklevel=3)
                    self._dirty.add(shard)
        return data

    def get(self, key: Any) -> Any:
        found = self._load(self.shard(key)).get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def get_or_compute(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The stored value of ``key``, or ``compute()``, stored."""
        found = self.get(key)
        if found is None:
            found = compute()
            self.put(key, found)
        return found

    def put(self, key: Any, value: Any) -> None:
        shard = self.shard(key)
        self._load(shard)[key] = value
        self._dirty.add(shard)

    def save(self) -> None:
        for shard in sorted(self._dirty):
            path = self.shard_path(shard)
            if path is None:
                return
            entries = [[encode(k, self.types), encode(v, self.types)] for k, v in self._shards[shard].items()]
            data = json.dumps({"format": FORMAT, "entries": entries}, separators=(",", ":")).encode()
            try:
                replace_atomic(path, lambda tmp, data=data: Path(tmp).write_bytes(data))
            except OSError:  # a read-only home: run without the cache
                return
            self._dirty.discard(shard)


def content_key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
